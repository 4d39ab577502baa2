#!/usr/bin/env bash
# GPU machine: whether two builds train to the same bits: STEPS (default 30) steps of `alpha train` on the char corpus
# (CONFIG, default shakespeare_char f16, GPU AdamW) with each binary, then every step's loss and grad norm compared
# exactly. Extra args are --set overrides for both runs (e.g. --set model.dropout=0.2).
# Usage (carry .gl and gpu): bash gpu/same_bits.sh BASE NEW [--set k=v ...]
set -u
source "$(dirname "$0")/setup.sh"
[ $# -ge 2 ] || { echo "usage: same_bits.sh BASE NEW [--set k=v ...]"; exit 2; }
base=$1 new=$2; shift 2
for bin in "$base" "$new"; do
  [ -x "$bin" ] || { echo "[same_bits] $bin is not an executable"; exit 2; }
  dir=$(mktemp -d)
  timeout 300 "$bin" train "${CONFIG:-gpu/configs/shakespeare_char.json}" --quiet --set data.path=gpu/tinyshakespeare.txt \
    --set data.tokenizer=char --set data.val_fraction=0.1 --set device=vulkan --set model.precision=f16 \
    --set optim.device=gpu --set out_dir=$dir --set train.eval_interval=100000 --set train.eval_iters=1 \
    --set train.sample_tokens=0 --set train.log_interval=1 --set checkpoint.interval=100000 \
    --set train.max_steps=${STEPS:-30} "$@" > $dir.log 2>&1 || { echo "[same_bits] $bin failed"; tail -5 $dir.log; exit 1; }
  cp $dir/metrics.jsonl "${OUT:-/tmp}/bits_$(basename "$bin").jsonl"
  dirs+=("$dir")
done
python3 - "${dirs[0]}/metrics.jsonl" "${dirs[1]}/metrics.jsonl" <<'PY'
import json, sys
def steps(p): return [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if r.get("type") == "step"]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
diff = [(x, y) for x, y in zip(a, b) if x != y]
print(f"[same_bits] {len(a)} / {len(b)} steps; last {a[-1]} / {b[-1]};",
      "SAME BITS" if a == b else f"DIFFERENT from step {diff[0][0][0] if diff else len(min(a, b, key=len))}")
PY
