#!/usr/bin/env bash
# GPU machine: every Vulkan kernel against the CPU oracle on the NVIDIA driver: the Vulkan test suites (matmul,
# attention, AdamW, f16, tiny-GPT parity), each also under the Khronos validation layer (VALIDATION=0 skips
# that), and test_vk_shapes at the real batch (B=64). Usage (carry .gl and gpu): bash gpu/gpu_suite.sh [TEST...]
set -u
source "$(dirname "$0")/setup.sh"
tests=${*:-test_vk test_vk_gpt test_vk_attention test_vk_adamw test_vk_muon test_vk_f16}
for t in $tests; do
  echo "== $t: $(timeout 120 gpu/$t 2>/dev/null | tail -2 | head -1)"
  [ "${VALIDATION:-1}" = 0 ] ||
    echo "== $t + validation: $(ALPHA_VK_VALIDATION=1 timeout 200 gpu/$t 2>/dev/null | tail -2 | head -1)"
done
echo "== test_vk_shapes B=64: $(ALPHA_SHAPES_B=64 timeout 200 gpu/test_vk_shapes 2>/dev/null | tail -2 | head -1)"
