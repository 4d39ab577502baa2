#!/usr/bin/env bash
# nanoGPT CPU recipe, 4 seeds x {Alpha, PyTorch}, 2 threads each, concurrently on the GPU machine's 16-core CPU.
# Final eval with 200 batches (low noise) and the recipe's 20-batch evals every 250 steps.
[ -f gpu/lib/libopenblas.so.0 ] || xz -dk gpu/lib/libopenblas.so.0.xz
export LD_LIBRARY_PATH=$PWD/gpu/lib
nproc; python3 -c "import torch; print('torch', torch.__version__)"
for s in 1 2 3 4; do
  ALPHA_NUM_THREADS=2 gpu/alpha train configs/shakespeare_char_cpu.json --quiet --set seed=$s \
    --set data.path=gpu/tinyshakespeare.txt --set out_dir=$OUT/a$s --set train.sample_tokens=0 \
    --set checkpoint.interval=100000 > $OUT/a$s.log 2>&1 &
  SEED=$s THREADS=2 python3 scripts/torch_cpu_recipe.py gpu/tinyshakespeare.txt > $OUT/t$s.log 2>&1 &
done
wait
for s in 1 2 3 4; do echo "alpha seed $s: $(grep '"type":"eval"' $OUT/a$s/metrics.jsonl | tail -1)"; echo "torch seed $s: $(tail -2 $OUT/t$s.log | tr '\n' ' ')"; done
