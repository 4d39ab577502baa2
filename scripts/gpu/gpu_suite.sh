#!/usr/bin/env bash
# GPU machine: every Vulkan kernel against the CPU oracle on the NVIDIA driver: the Vulkan test suites (matmul,
# attention, AdamW, f16, tiny-GPT parity), each also under the Khronos validation layer (VALIDATION=0 skips
# that), and test_vk_shapes at the real batch (B=64; SHAPES=0 skips it). LIMIT: seconds per suite run (default 300;
# test_vk's CPU oracles take ~2 min on the H200's host). Usage (carry .gl and gpu): bash gpu/gpu_suite.sh [TEST...]
set -u
source "$(dirname "$0")/setup.sh"
tests=${*:-test_vk test_vk_gpt test_vk_attention test_vk_adamw test_vk_muon test_vk_f16 test_vk_llama}
# One suite run: its assertion summary, and on a failure the failing checks (the whole log stays in $OUT).
suite() {
  local label=$1 limit=$2 log="$OUT/${1// /_}.log"; shift 2
  timeout "$limit" "$@" > "$log" 2>&1
  local rc=$? summary
  summary=$(grep -a '^\[doctest\] assertions' "$log" | tail -1)
  echo "== $label: ${summary:-no summary (exit $rc; 124: timed out)}"
  grep -a -A4 'ERROR' "$log" | head -40
}
for t in $tests; do
  suite "$t" "${LIMIT:-300}" gpu/$t
  [ "${VALIDATION:-1}" = 0 ] || ALPHA_VK_VALIDATION=1 suite "$t + validation" "${LIMIT:-300}" gpu/$t
done
[ "${SHAPES:-1}" = 0 ] || ALPHA_SHAPES_B=64 suite "test_vk_shapes B=64" 200 gpu/test_vk_shapes
