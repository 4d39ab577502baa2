#!/usr/bin/env bash
# Runs nanoGPT's CPU recipe on tiny Shakespeare with Alpha and with the PyTorch peer, one after the other on
# the same machine, and prints one JSON line per trainer: final val loss, wall seconds, ms/step.
# Usage: scripts/cpu_recipe_compare.sh PATH/TO/tinyshakespeare.txt [max_steps]
# Needs Debian's python3-torch for the peer (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:?usage: scripts/cpu_recipe_compare.sh DATA.txt [max_steps]}
steps=${2:-2000}
out=$(mktemp -d)
start=$(date +%s.%N)
build/alpha train configs/shakespeare_char_cpu.json --quiet --set data.path="$data" --set train.max_steps="$steps" \
  --set optim.decay_steps="$steps" --set out_dir="$out/alpha" --set train.sample_tokens=0
end=$(date +%s.%N)
python3 - "$out/alpha/metrics.jsonl" "$start" "$end" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
ev = [r for r in recs if r["type"] == "eval"][-1]
steps = [r for r in recs if r["type"] == "step"]
ms = sorted(r["step_ms"] for r in steps)[len(steps) // 2]
print(json.dumps(dict(trainer="alpha", step=ev["step"], train_loss=round(ev["train_loss"], 4),
                      val_loss=round(ev["val_loss"], 4), seconds=round(float(sys.argv[3]) - float(sys.argv[2]), 1),
                      median_step_ms=round(ms, 1))))
PY
/usr/bin/python3 scripts/torch_cpu_recipe.py "$data" "$steps" | tail -2
rm -rf "$out"
