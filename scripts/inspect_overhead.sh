#!/usr/bin/env bash
# Cost of metrics.inspect_interval (issue 19) on this machine: the default config on the CPU, two runs in one
# invocation, interleaved off/on/off/on (the same seed and batches): run time with inspect records every N steps over
# run time without, plus, inside each "on" run, the inspected steps' step_ms over the median of the other steps.
# Usage: scripts/inspect_overhead.sh [steps=600] [interval=100]   (needs build/alpha and data/fortunes.txt: ./dev run)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-600}
interval=${2:-100}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for rep in 1 2; do
  for iv in 0 "$interval"; do
    build/alpha train configs/default.json --quiet --set device=cpu --set out_dir="$out/r$rep-$iv" \
      --set train.max_steps="$steps" --set train.log_interval=1 --set train.eval_interval=1000000000 \
      --set train.sample_tokens=0 --set checkpoint.interval=1000000000 --set metrics.inspect_interval="$iv"
  done
done
python3 - "$out" "$interval" <<'PY'
import json, os, statistics, sys
out, interval = sys.argv[1], int(sys.argv[2])
def load(d):
    return [json.loads(l) for l in open(os.path.join(out, d, "metrics.jsonl"))]
def train_ms(recs):  # the training steps only (the final eval and checkpoint are the same in both)
    return sum(r["step_ms"] for r in recs if r["type"] == "step")
off = [train_ms(load(f"r{i}-0")) for i in (1, 2)]
on_runs = [load(f"r{i}-{interval}") for i in (1, 2)]
on = [train_ms(r) for r in on_runs]
inspected = [s for r in on_runs for s in r if s["type"] == "step" and (s["step"] % interval == 0)]
others = [s["step_ms"] for r in on_runs for s in r if s["type"] == "step" and s["step"] % interval != 0]
med = statistics.median(others)
extra = statistics.mean(s["step_ms"] for s in inspected) - med
print(json.dumps({"steps": len(others) // 2 + len(inspected) // 2, "inspect_interval": interval,
                  "train_ms_off": [round(x) for x in off], "train_ms_on": [round(x) for x in on],
                  "ratio_on_off": round(sum(on) / sum(off), 4),
                  "median_step_ms": round(med, 2), "inspected_step_extra_ms": round(extra, 2),
                  "overhead_from_inspected_steps": round(extra / interval / med, 4)}))
PY
