#!/usr/bin/env bash
# PyTorch peer of the CPU recipe with nanoGPT's exact (erf) GELU, 4 seeds at once on the GPU machine's CPU.
for s in 1 2 3 4; do GELU=none SEED=$s THREADS=2 python3 scripts/torch_cpu_recipe.py gpu/tinyshakespeare.txt > $OUT/g$s.log 2>&1 & done
wait; for s in 1 2 3 4; do tail -2 $OUT/g$s.log | tr '\n' ' '; echo; done
