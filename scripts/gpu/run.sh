#!/usr/bin/env bash
# GPU machine: the Vulkan test suite on the NVIDIA driver, then shakespeare_char steps on Vulkan next to the
# PyTorch peer (fp32 and others) in the same call.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
[ -f gpu/lib/libopenblas.so.0 ] || xz -dk gpu/lib/libopenblas.so.0.xz
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== test_vk (validation test needs the layer, absent here)"; timeout 120 gpu/test_vk 2>&1 | tail -3
echo "== test_vk_gpt"; timeout 120 gpu/test_vk_gpt 2>&1 | tail -2
echo "== test_vk_shapes B=64"; ALPHA_SHAPES_B=64 timeout 200 gpu/test_vk_shapes 2>&1 | tail -2
echo "== alpha info"; gpu/alpha info --device vulkan 2>&1 | head -20
echo "== alpha vulkan shakespeare_char (6L 384 T256 B64)"
ALPHA_VK_STATS=1 timeout 240 gpu/alpha train configs/shakespeare_char.json --quiet --set data.path=gpu/tinyshakespeare.txt \
  --set out_dir=$OUT/vk --set train.eval_interval=100000 --set train.eval_iters=1 --set train.sample_tokens=0 \
  --set train.log_interval=1 --set checkpoint.interval=100000 --set device=vulkan --set train.max_steps=15 2>&1 | tail -15
python3 - $OUT/vk/metrics.jsonl <<'PY'
import json, sys
r=[json.loads(l) for l in open(sys.argv[1]) if '"type":"step"' in l]
ms=sorted(x["step_ms"] for x in r[3:]); print("alpha vulkan steps", len(r), "median step ms", round(ms[len(ms)//2],1), "loss", r[0]["loss"], "->", r[-1]["loss"])
print({k: v for k, v in r[-1].items() if k not in ("loss","lr","grad_norm","step","time","elapsed_s")})
PY
echo "== torch peer"; timeout 200 python3 gpu/torch_gpt.py speed 2>&1 | head -6
