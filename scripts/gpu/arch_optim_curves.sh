#!/usr/bin/env bash
# GPU machine: issue 20's curves in one call: the shakespeare_char recipe (6L/384, T256, B64, 2000 steps of the
# 5000-step schedule, f16) with the GPT-2 block and the Llama block (configs/llama_shakespeare_char.json), each with
# AdamW and with Muon (optim.name muon, its state on the GPU: vk::GpuMuon, Newton-Schulz on the GPU's f16 GEMMs;
# MUON_DEVICE=cpu keeps it on the host). Prints each run's eval curve, best val and median step ms.
# VARIANTS="label|--set k=v ...;label2|..." adds Llama AdamW runs with those settings (tuning at full size);
# SKIP_MUON=1 leaves out the Muon runs; SKIP_BASE=1 the GPT-2 and Llama AdamW
# runs (deterministic: same build, same bits), for a call of variants only. STEPS (default 2000) and TIMEOUT (s per
# run, default 200) size the runs: STEPS=5000 is the whole recipe.
# Usage (carry .gl and gpu): bash gpu/arch_optim_curves.sh [extra --set ...]
set -u
source "$(dirname "$0")/setup.sh"
run() {
  local label=$1 config=$2; shift 2
  rm -rf "$OUT/$label"  # a label run twice (SKIP_BASE with other settings) starts clean
  timeout "${TIMEOUT:-200}" gpu/alpha train gpu/configs/$config --quiet --set data.path=gpu/tinyshakespeare.txt \
    --set out_dir=$OUT/$label --set device=vulkan --set model.precision=f16 --set checkpoint.interval=100000 \
    --set train.max_steps=${STEPS:-2000} --set train.sample_tokens=0 "$@" > $OUT/$label.log 2>&1 || { echo "$label failed"; tail -3 $OUT/$label.log; return; }
  python3 - $OUT/$label/metrics.jsonl $label <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in rs if r.get("type") == "eval"]; st = [r for r in rs if r.get("type") == "step"]
ms = sorted(r["step_ms"] for r in st[5:])
print(sys.argv[2], "best val", round(min(r["val_loss"] for r in ev), 4), "median step ms", round(ms[len(ms) // 2], 1),
      "curve", " ".join(f"{r['step']}:{r['val_loss']:.4f}" for r in ev))
PY
}
if [ -z "${SKIP_BASE:-}" ]; then
  run gpt2_adamw_gpu shakespeare_char.json --set optim.device=gpu "$@"
  run llama_adamw_gpu llama_shakespeare_char.json --set optim.device=gpu "$@"
fi
IFS=';' read -ra variants <<< "${VARIANTS:-}"
for v in "${variants[@]}"; do
  IFS='|' read -r label sets <<< "$v"
  # shellcheck disable=SC2086  # the settings split into words on purpose
  run "llama_$label" llama_shakespeare_char.json --set optim.device=gpu $sets "$@"
done
[ -n "${SKIP_MUON:-}" ] && exit 0
muon=(--set optim.device="${MUON_DEVICE:-gpu}" --set optim.name=muon --set optim.muon.ns_dtype=f16)
run gpt2_muon shakespeare_char.json "${muon[@]}" "$@"
# Muon at the recipe's GPT-2 settings: the Llama config's AdamW tuning (lr 5e-4, dropout 0.3) made Muon worse.
run llama_muon llama_shakespeare_char.json "${muon[@]}" --set optim.lr=1e-3 --set model.dropout=0.2 "$@"
exit 0
