#!/usr/bin/env bash
# GPU machine, one call, after the tensor-core attention (spirv/attention_cm.comp) and the "auto" dispatch
# thresholds: `alpha bench gpu` (shakespeare_char f16 and GPT-2 124M f16, attention kernels auto vs simt), GPT-2
# training-loop steps with the default thresholds vs the old fixed ones, the PyTorch peers (torch_gpt.py speed,
# torch_gemm.py) in the same call, then the f16 quality recipe to step 2000 (its schedule is the 5000-step one).
# Usage (carry .gl and gpu): bash scripts/gpu/final3.sh
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
xz -dk gpu/lib/libopenblas.so.0.xz 2>/dev/null
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
B="timeout 150 gpu/alpha bench gpu --peak-tflops 989"
for mode in auto simt; do
  echo "== attention $mode: bench shakespeare_char f16"; ALPHA_VK_ATTENTION=$mode $B --set model.precision=f16 2>&1 | tail -1
  echo "== attention $mode: bench gpt2 f16"; ALPHA_VK_ATTENTION=$mode $B --config gpu/configs/gpt2_124m.json --set train.grad_accum=1 2>&1 | tail -1
done
echo "== bench gpt2 f16 grad_accum 8"; $B --config gpu/configs/gpt2_124m.json --steps 5 2>&1 | tail -1
S="--set data.tokenizer=char --set data.val_fraction=0.1 --set train.grad_accum=1 --set optim.device=gpu"
CONFIG=gpu/configs/gpt2_124m.json STEPS=10 PROFILE=false timeout 120 bash scripts/gpu/steps.sh "gpt2_auto||$S" \
  "gpt2_fixed||$S --set dispatch.threshold=1048576 --set dispatch.matmul_threshold=16777216" 2>&1 | grep -v "^   {"
echo "== torch GEMM"; timeout 100 python3 gpu/torch_gemm.py 2>&1 | head -3
echo "== torch peer"; timeout 240 python3 gpu/torch_gpt.py speed 2>&1
echo "== quality (f16, tensor-core attention), steps 0-2000 of the 5000-step recipe"
timeout 200 bash scripts/gpu/quality.sh --set train.max_steps=2000 2>&1 | tail -12
