// SPIR-V rewrite from SPV_NV_cooperative_matrix to SPV_KHR_cooperative_matrix (a build-time step: Debian's glslang 12
// compiles only the NV extension). NV has one matrix type for the A and B operands, so the NVIDIA driver loads every
// fragment in the A layout and transposes each B operand in registers (MOVM) per product; KHR types carry a Use, so
// B fragments load in their own layout (docs/PERFORMANCE.md, session 13).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace alpha::spirv {

struct RewriteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The same module with KHR opcodes: every id holding a matrix (value, array, pointer) is grouped with the ids it
// flows to or from (loads, stores, access chains, phis, copies, composites); a group takes its use from the
// MulAdd operand it reaches (A, B) or from being an accumulator (MulAdd C/result), and the matrix types are split per
// use; a group that reaches no product is an accumulator. A conversion between uses (f32 accumulator -> f16 A
// operand) declares SPV_NV_cooperative_matrix2's CooperativeMatrixConversionsNV (spirv::declares_capability tells
// which twins do). Throws RewriteError for what it does not handle (a group with two uses, an unknown op).
std::vector<uint32_t> nv_to_khr(const std::vector<uint32_t>& words);

}  // namespace alpha::spirv
