// Probe of the NV cooperative-matrix accumulator layout (one subgroup of 32): loads a 16 x 16 f32 matrix whose
// elements are their own (row, column) and writes, per lane, the fragment length and each element's row and
// column: out[lane * 17] = length, out[lane * 17 + 1 + 2 e] = row, out[lane * 17 + 2 + 2 e] = column (e < 8).
// vk/attention.cpp runs attention_cmr.comp only where this matches the layout that kernel is written for.
// F16: the same for a 16 x 16 f16 matrix (the A/B operand type), for `alpha bench gpu --tiles`.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef F16
#define T float16_t
#define BITS 16
#else
#define T float
#define BITS 32
#endif

layout(local_size_x = 32) in;
layout(std430, binding = 0) writeonly buffer Out { float out_[]; };

shared T ids[512];  // [0, 256): row of (r, c) = r; [256, 512): column of (r, c) = c

void main() {
  const uint lane = gl_LocalInvocationID.x;
  for (uint k = lane; k < 512u; k += 32u) ids[k] = T(k < 256u ? k / 16u : k % 16u);
  barrier();  // RAW: the whole table is written before the fragments load it
  fcoopmatNV<BITS, gl_ScopeSubgroup, 16, 16> rows, cols;
  coopMatLoadNV(rows, ids, 0u, 16u, false);
  coopMatLoadNV(cols, ids, 256u, 16u, false);
  const uint n = uint(rows.length());
  out_[lane * 17u] = float(n);
  [[unroll]] for (uint e = 0u; e < 8u; ++e) {
    out_[lane * 17u + 1u + 2u * e] = e < n ? float(rows[e]) : -1.0;
    out_[lane * 17u + 2u + 2u * e] = e < n ? float(cols[e]) : -1.0;
  }
}
