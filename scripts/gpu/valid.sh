#!/usr/bin/env bash
# The GPU test suite on the H200 with the Khronos validation layer (carried from Debian) enabled.
set -u
for f in .gl/*.deb; do dpkg -x $f / >/dev/null; done; ldconfig
xz -dk gpu/lib/libopenblas.so.0.xz gpu/layers/libVkLayer_khronos_validation.so.xz
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/gpu/lib VK_LAYER_PATH=$PWD/gpu/layers
echo "== test_vk (no validation)"; timeout 120 gpu/test_vk 2>&1 | tail -2
echo "== test_vk with validation"; ALPHA_VK_VALIDATION=1 timeout 200 gpu/test_vk 2>&1 | tail -2
echo "== test_vk_gpt with validation"; ALPHA_VK_VALIDATION=1 timeout 200 gpu/test_vk_gpt 2>&1 | tail -2
echo "== test_vk_shapes B=64 with validation"; ALPHA_VK_VALIDATION=1 ALPHA_SHAPES_B=64 timeout 240 gpu/test_vk_shapes 2>&1 | tail -2
