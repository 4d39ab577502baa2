#!/usr/bin/env bash
# GPU machine's CPU: the nanoGPT CPU recipe's step time, Alpha vs the PyTorch peer (scripts/torch_cpu_recipe.py),
# one trainer at a time on an otherwise idle machine, 1 and 2 threads, 300 steps each (medians).
# Usage (carry gpu): bash scripts/gpu/cpu_speed.sh
set -u
[ -f gpu/lib/libopenblas.so.0 ] || xz -dk gpu/lib/libopenblas.so.0.xz
export LD_LIBRARY_PATH=$PWD/gpu/lib
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-160; python3 -c "import torch; print('torch', torch.__version__)"
for th in 1 2; do
  ALPHA_NUM_THREADS=$th timeout 200 gpu/alpha train configs/shakespeare_char_cpu.json --quiet --set data.path=gpu/tinyshakespeare.txt \
    --set out_dir=$OUT/a$th --set train.max_steps=300 --set train.eval_interval=100000 --set train.sample_tokens=0 \
    --set checkpoint.interval=100000 > $OUT/a$th.log 2>&1
  python3 -c "
import json; r=[json.loads(l) for l in open('$OUT/a$th/metrics.jsonl') if '\"type\":\"step\"' in l]
ms=sorted(x['step_ms'] for x in r[10:]); print('alpha threads $th: median ms/step', round(ms[len(ms)//2], 1))"
  rm -f $OUT/a$th/*.alph
  echo "torch threads $th: $(EVAL_INTERVAL=100000 THREADS=$th timeout 200 python3 scripts/torch_cpu_recipe.py gpu/tinyshakespeare.txt 300 | tail -1)"
done
