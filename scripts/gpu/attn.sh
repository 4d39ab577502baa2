#!/usr/bin/env bash
# GPU machine: tensor-core attention (spirv/attention_cm.comp) checks and step times against the SIMT kernels,
# in one call: the attention tests with and without the validation layer, test_vk_f16, then `alpha bench gpu`
# (GPT-2 124M f16 and shakespeare_char f16) with ALPHA_VK_ATTENTION=auto and =simt, and the per-kernel GPU
# time of GPT-2 training steps. Usage (carry .gl and gpu): bash gpu/attn.sh
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
xz -dk gpu/lib/libopenblas.so.0.xz gpu/layers/libVkLayer_khronos_validation.so.xz 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== test_vk_attention"; timeout 120 gpu/test_vk_attention 2>&1 | grep -vE "^\[vk stats\]" | grep -E "MESSAGE|ERROR|FATAL|CHECK|test cases|assertions|values" | head -40
echo "== test_vk_attention, validation"; ALPHA_VK_VALIDATION=1 VK_LAYER_PATH=$PWD/gpu/layers timeout 200 gpu/test_vk_attention 2>&1 | grep -E "test cases|assertions|VUID|rror" | head -10
echo "== test_vk_f16"; timeout 120 gpu/test_vk_f16 2>&1 | grep -E "test cases|assertions|ERROR" | head -10
echo "== test_vk_gpt"; timeout 120 gpu/test_vk_gpt 2>&1 | grep -E "test cases|assertions|ERROR" | head -10
B="timeout 150 gpu/alpha bench gpu --peak-tflops 989"
for mode in auto simt; do
  echo "== ALPHA_VK_ATTENTION=$mode bench gpt2 f16"; ALPHA_VK_ATTENTION=$mode $B --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 2>&1 | tail -1
  echo "== ALPHA_VK_ATTENTION=$mode bench shakespeare_char f16"; ALPHA_VK_ATTENTION=$mode $B --set model.precision=f16 2>&1 | tail -1
done
S="--set data.tokenizer=char --set data.val_fraction=0.1 --set train.grad_accum=1 --set optim.device=gpu"
CONFIG=gpu/configs/gpt2_124m.json STEPS=8 bash gpu/steps.sh "gpt2_cm||$S" "gpt2_simt|ALPHA_VK_ATTENTION=simt|$S" 2>&1
