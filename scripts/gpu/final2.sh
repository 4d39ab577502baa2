#!/usr/bin/env bash
# GPU machine, one call, after the coopmat kernel's K step went to 64 (f16, 16-byte loads): matmul checks, then
# `alpha bench gpu` (shakespeare_char f16; GPT-2 124M f16, grad_accum 1 and 8) next to the PyTorch peers in the
# same call (torch_gemm.py, torch_gpt.py speed). Usage (carry .gl and gpu): bash gpu/final2.sh
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
xz -dk gpu/lib/libopenblas.so.0.xz 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== test_vk matmul: $(timeout 60 gpu/test_vk -tc='vk matmul*' 2>/dev/null | tail -2 | head -1)"
B="timeout 150 gpu/alpha bench gpu --peak-tflops 989"
echo "== bench shakespeare_char f16"; $B --set model.precision=f16 2>&1 | tail -25
echo "== bench gpt2 f16 grad_accum 1"; $B --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 2>&1 | tail -1
echo "== bench gpt2 f16 grad_accum 8"; $B --config gpu/configs/gpt2_124m.json --steps 5 2>&1 | tail -1
echo "== torch GEMM"; timeout 100 python3 gpu/torch_gemm.py 2>&1 | head -3
echo "== torch peer"; timeout 240 python3 gpu/torch_gpt.py speed 2>&1
