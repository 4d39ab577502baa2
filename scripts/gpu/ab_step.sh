#!/usr/bin/env bash
# GPU machine: an A/B of two or more builds' training steps in one call: `alpha bench gpu --only step` (median of 10, GPU
# AdamW) for GPT-2 124M (f16, B8 T1024), shakespeare_char and the Llama block (f16, dropout 0; relu2: its ReLU² config), ROUNDS times (default
# 2), the binaries alternating and their order reversed every other round (the first runs on a cold GPU).
# Prepare here: bash scripts/gpu/prepare.sh, then copy the other build's alpha to gpu/alpha_base.
# CONFIGS picks the steps (default "gpt2 shakes llama"). Usage (carry .gl and gpu): bash gpu/ab_step.sh [BASE NEW [MORE...]]
# (default gpu/alpha_base gpu/alpha).
set -u
source "$(dirname "$0")/setup.sh"
builds=("$@"); [ $# -gt 0 ] || builds=(gpu/alpha_base gpu/alpha)
reversed=(); for ((i = ${#builds[@]} - 1; i >= 0; --i)); do reversed+=("${builds[i]}"); done
for f in "${builds[@]}"; do [ -x "$f" ] || { echo "[ab_step] $f is not an executable"; exit 2; }; done
for round in $(seq 1 "${ROUNDS:-2}"); do
  bins=("${builds[@]}"); [ $((round % 2)) = 0 ] && bins=("${reversed[@]}")
  for bin in "${bins[@]}"; do
    for cfg in ${CONFIGS:-gpt2 shakes llama}; do
      case $cfg in
        gpt2) args=(--config gpu/configs/gpt2_124m.json --set train.grad_accum=1);;
        shakes) args=(--config gpu/configs/shakespeare_char.json --set model.precision=f16 --set model.dropout=0.0);;
        llama) args=(--config gpu/configs/llama_shakespeare_char.json --set model.precision=f16 --set model.dropout=0.0);;
        relu2) args=(--config gpu/configs/llama_relu2_shakespeare_char.json --set model.precision=f16 --set model.dropout=0.0);;
        *) echo "[ab_step] unknown config $cfg (gpt2, shakes, llama, relu2)"; exit 2;;
      esac
      out="$OUT/ab_${round}_${cfg}_$(basename "$bin").json"
      timeout 100 "$bin" bench gpu --only step --json "${args[@]}" > "$out" 2>&1
      python3 - "$out" "round $round $cfg $(basename "$bin")" <<'PY' || tail -3 "$out"
import json, sys
s = json.load(open(sys.argv[1]))["step"]
s = s[0] if isinstance(s, list) else s
print(sys.argv[2], " ".join(f"{k}={v:.2f}" for k, v in s.items() if k.endswith("_ms")))
PY
    done
  done
done
exit 0
