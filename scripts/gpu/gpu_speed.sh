#!/usr/bin/env bash
# GPU machine: `alpha bench gpu` (GEMM per kernel family, memory-bound kernels, one training step) for
# shakespeare_char (f32, f16) and GPT-2 124M (f16 with grad_accum 1 and 8, f32), attention kernels auto vs simt,
# beside the PyTorch peers in the same call: torch_gemm.py (same GEMM shapes) and torch_gpt.py speed.
# Usage (carry .gl and gpu): bash gpu/gpu_speed.sh
set -u
source "$(dirname "$0")/setup.sh"
B="timeout 150 gpu/alpha bench gpu --peak-tflops ${PEAK_TFLOPS:-989}"
G=gpu/configs/gpt2_124m.json
echo "== bench shakespeare_char f32"; $B 2>&1 | tail -26
for mode in auto simt; do
  echo "== attention $mode: bench shakespeare_char f16"; ALPHA_VK_ATTENTION=$mode $B --set model.precision=f16 2>&1 | tail -1
  echo "== attention $mode: bench gpt2 f16 grad_accum 1"
  ALPHA_VK_ATTENTION=$mode $B --config $G --set train.grad_accum=1 2>&1 | tail -28
done
echo "== bench gpt2 f16 grad_accum 8"; $B --config $G --steps 5 2>&1 | tail -1
echo "== bench gpt2 f32 grad_accum 1"; $B --config $G --set model.precision=f32 --set train.grad_accum=1 2>&1 | tail -1
echo "== torch GEMM shakespeare_char"; timeout 100 python3 gpu/torch_gemm.py 2>&1 | tail -13
echo "== torch GEMM gpt2"; timeout 100 python3 gpu/torch_gemm.py 8192 768 50304 2>&1 | tail -13
echo "== torch peer"; timeout 240 python3 gpu/torch_gpt.py speed 2>&1
