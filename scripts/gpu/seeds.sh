#!/usr/bin/env bash
# nanoGPT CPU recipe, one Alpha and one PyTorch run per seed, all at once on the GPU machine's CPU (THREADS each,
# default 1). Per run: the recipe's val loss at step 2000 (20 random batches) and the full-val loss (every
# consecutive non-overlapping 65-token window of the val split: `alpha eval`, FULL_EVAL=1 in the peer).
# GELU=none: the PyTorch peer alone with nanoGPT's exact (erf) GELU instead of tanh (the two last log lines per seed).
# Usage (carry .gl and gpu): bash gpu/seeds.sh SEED...   -> one JSON line per seed
set -u
if [ "${GELU:-}" = none ]; then
  for s in "$@"; do GELU=none SEED=$s THREADS=${THREADS:-2} python3 scripts/torch_cpu_recipe.py gpu/tinyshakespeare.txt > $OUT/g$s.log 2>&1 & done
  wait; for s in "$@"; do tail -2 $OUT/g$s.log | tr '\n' ' '; echo; done
  exit 0
fi
[ -f gpu/lib/libopenblas.so.0 ] || xz -dk gpu/lib/libopenblas.so.0.xz
export LD_LIBRARY_PATH=$PWD/gpu/lib
TH=${THREADS:-1}
nproc; python3 -c "import torch; print('torch', torch.__version__)"
for s in "$@"; do
  ( ALPHA_NUM_THREADS=$TH timeout ${LIMIT:-480} gpu/alpha train configs/shakespeare_char_cpu.json --quiet --set seed=$s \
      --set data.path=gpu/tinyshakespeare.txt --set out_dir=$OUT/a$s --set train.sample_tokens=0 \
      --set checkpoint.interval=100000 > $OUT/a$s.log 2>&1 &&
    ALPHA_NUM_THREADS=$TH gpu/alpha eval $OUT/a$s/$(cat $OUT/a$s/latest 2>/dev/null) >> $OUT/a$s.log 2>&1
    rm -f $OUT/a$s/*.alph ) &
  SEED=$s THREADS=$TH FULL_EVAL=1 timeout ${LIMIT:-480} python3 scripts/torch_cpu_recipe.py gpu/tinyshakespeare.txt > $OUT/t$s.log 2>&1 &
done
wait
for s in "$@"; do
  python3 - $s $OUT <<'PY'
import json, sys
s, out = sys.argv[1], sys.argv[2]
def last_eval(path):
    ev = [json.loads(l) for l in open(path) if '"type":"eval"' in l]
    return ev[-1] if ev else {}
try:
    a = last_eval(f"{out}/a{s}/metrics.jsonl")
    afull = [l for l in open(f"{out}/a{s}.log") if l.startswith("loss ")]
    t = [json.loads(l) for l in open(f"{out}/t{s}.log") if l.startswith("{")]
    row = dict(seed=int(s), alpha_val=a.get("val_loss"), alpha_full=float(afull[-1].split()[1]) if afull else None,
               alpha_s=a.get("elapsed_s"), torch_val=t[-2]["val"], torch_full=t[-1].get("full_val"),
               torch_s=t[-1]["seconds"])
    print(json.dumps(row))
except Exception as e:
    print(json.dumps(dict(seed=int(s), error=repr(e))))
PY
done
