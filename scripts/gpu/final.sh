#!/usr/bin/env bash
# GPU machine, one call: the Vulkan suite (the new matmul, attention, AdamW and f16 suites under the validation
# layer too), then `alpha bench gpu` (shakespeare_char f32 and f16, GPT-2 124M f16 with grad_accum 1 and 8, f32)
# next to the PyTorch peers in the same call: torch_gemm.py (same GEMM shapes) and torch_gpt.py speed.
# Usage (carry .gl and gpu): bash gpu/final.sh
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
xz -dk gpu/lib/libopenblas.so.0.xz gpu/layers/libVkLayer_khronos_validation.so.xz 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib VK_LAYER_PATH=$PWD/gpu/layers
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_vk test_vk_gpt test_vk_attention test_vk_adamw test_vk_f16; do
  echo "== $t: $(timeout 120 gpu/$t 2>/dev/null | tail -2 | head -1)"
  echo "== $t + validation: $(ALPHA_VK_VALIDATION=1 timeout 200 gpu/$t 2>/dev/null | tail -2 | head -1)"
done
echo "== test_vk_shapes B=64: $(ALPHA_SHAPES_B=64 timeout 200 gpu/test_vk_shapes 2>/dev/null | tail -2 | head -1)"
B="timeout 150 gpu/alpha bench gpu --peak-tflops 989"
echo "== bench shakespeare_char f32"; $B 2>&1 | tail -26
echo "== bench shakespeare_char f16"; $B --set model.precision=f16 2>&1 | tail -1
echo "== bench gpt2 f16 grad_accum 1"; $B --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 2>&1 | tail -28
echo "== bench gpt2 f16 grad_accum 8"; $B --config gpu/configs/gpt2_124m.json --steps 5 2>&1 | tail -1
echo "== bench gpt2 f32 grad_accum 1"; $B --config gpu/configs/gpt2_124m.json --set model.precision=f32 --set train.grad_accum=1 2>&1 | tail -1
echo "== torch GEMM shakespeare_char"; timeout 100 python3 gpu/torch_gemm.py 2>&1 | tail -13
echo "== torch GEMM gpt2"; timeout 100 python3 gpu/torch_gemm.py 8192 768 50304 2>&1 | tail -13
echo "== gpt2 f16 step profile (alpha train, char data, V=50304)"
CONFIG=gpu/configs/gpt2_124m.json STEPS=8 bash gpu/steps.sh "gpt2_f16|ALPHA_VK_STATS=0|--set optim.device=gpu --set data.tokenizer=char --set train.grad_accum=1 --set data.val_fraction=0.1 --set model.block_size=1024" 2>&1 | cut -c1-900
echo "== torch peer"; timeout 240 python3 gpu/torch_gpt.py speed 2>&1
