#!/usr/bin/env bash
# GPU machine: the shakespeare_char recipe (nanoGPT's: 6L/6H/384, T 256, B 64, dropout 0.2, 5000 steps, eval every
# 250 over 200 batches) in f16 precision (coopmat matmuls, f16 activations, dynamic loss scaling) with the GPU AdamW.
# Prints the eval records, the best val loss and the median step ms. Usage (carry .gl and gpu): bash gpu/quality.sh [extra --set ...]
set -u
source "$(dirname "$0")/setup.sh"
time timeout 580 gpu/alpha train configs/shakespeare_char.json --quiet --set data.path=gpu/tinyshakespeare.txt \
  --set out_dir=$OUT/quality --set device=vulkan --set model.precision=f16 --set optim.device=gpu \
  --set checkpoint.interval=100000 "$@" > $OUT/quality.log 2>&1; echo "rc=$?"
tail -3 $OUT/quality.log
python3 - $OUT/quality/metrics.jsonl <<'PY'
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in rs if r.get("type") == "eval"]
for r in ev: print("step", r["step"], "train", round(r["train_loss"], 4), "val", round(r["val_loss"], 4))
st = [r for r in rs if r.get("type") == "step"]
ms = sorted(r["step_ms"] for r in st[5:]); print("best val", min(r["val_loss"] for r in ev), "median step ms", ms[len(ms)//2],
      "loss_scale", st[-1].get("loss_scale"), "skips", st[-1].get("loss_scale_skips"))
PY
