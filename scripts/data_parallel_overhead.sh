#!/usr/bin/env bash
# Data-parallel overhead on one machine (issue 17): one process at global batch 2B, one process B x grad_accum 2,
# and 2 MPI ranks x B (same global batch), each on the CPU; medians of step ms and of the all-reduce figures.
# Usage: scripts/data_parallel_overhead.sh [CONFIG] [STEPS] [extra --set ...]   (defaults: configs/default.json 60)
# Ranks use ALPHA_NUM_THREADS=1 each, single processes $(nproc) threads (the same cores in total).
set -euo pipefail
cd "$(dirname "$0")/.."
CFG=${1:-configs/default.json}; STEPS=${2:-60}; shift $(( $# > 2 ? 2 : $# )) || true
B=$(python3 -c "import json,sys; print(json.load(open('$CFG'))['train']['batch_size'])")
OUT=$(mktemp -d); trap 'rm -rf "$OUT"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
S="--quiet --set train.max_steps=$STEPS --set train.log_interval=1 --set train.eval_interval=100000 --set train.eval_iters=1
   --set train.sample_tokens=0 --set checkpoint.interval=100000 $*"
for round in 1 2; do  # interleaved, so a busy machine slows every variant alike
  build/alpha train "$CFG" $S --set out_dir=$OUT/one_2b_$round --set train.batch_size=$((2 * B))
  build/alpha train "$CFG" $S --set out_dir=$OUT/one_bx2_$round --set train.grad_accum=2
  ALPHA_NUM_THREADS=1 mpirun -np 2 --oversubscribe --bind-to none build/alpha train "$CFG" $S --set out_dir=$OUT/two_b_$round
done
python3 - "$OUT" <<'PY'
import json, sys, glob, statistics as st
for name in ("one_2b", "one_bx2", "two_b"):
    recs = []
    for d in sorted(glob.glob(f"{sys.argv[1]}/{name}_*")):
        recs += [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"type":"step"' in l][5:]
    med = lambda k: st.median(r[k] for r in recs) if k in recs[0] else float("nan")
    line = f"{name:8s} steps {len(recs):4d}  median step_ms {med('step_ms'):8.2f}"
    if "allreduce_ms" in recs[0]:
        line += (f"  slowest rank {med('max_rank_step_ms'):8.2f}  allreduce_ms {med('allreduce_ms'):6.2f}"
                 f" ({100 * med('allreduce_ms') / med('step_ms'):.1f}% of the step, on the comm thread)"
                 f"  exposed {med('allreduce_wait_ms'):6.2f} ({100 * med('allreduce_wait_ms') / med('step_ms'):.1f}%)"
                 f"  grad_copy_ms {med('grad_copy_ms'):6.2f}  bytes/step {recs[-1]['allreduce_bytes']}")
    print(line)
PY
