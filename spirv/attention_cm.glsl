// Shared by the tensor-core attention kernels (attention_cm.comp: scores through shared memory;
// attention_cmr.comp: scores in registers): tile sizes, fragment types, staging and the buffer bindings.
// Each kernel source enables the extensions itself; -DDQ / -DDKDV pick the backward kernels' bindings.
//
// Dimension legend: BR rows of a tile, BC keys (or queries) per inner block, HD head size, NF = HD / 16.
#ifndef ALPHA_ATTENTION_CM_GLSL
#define ALPHA_ATTENTION_CM_GLSL

#define HD 64u
#define NF 4u       // HD / 16
#define BR 64u      // rows per workgroup
#define BC 64u      // keys (queries in DKDV) per inner block
#define LDH 72u     // halves per staged row: HD + 8 keeps rows 16-byte aligned and shifts banks per row
#define LDV 9u      // LDH in uvec4 (8 halves)
#define NEG_INF (-1.0 / 0.0)

#define F16MAT fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32MAT fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

// The tile's 64 rows [row0, row0 + 64) of a (rows, HD) f16 view (element base + row * stride) into a shared
// [64][LDH] array, 16 bytes per load; rows at or past `limit` are zero. All 128 invocations take part.
#define STAGE(dst, src, base, stride, row0, limit)                                          \
  [[unroll]] for (uint e_ = 0u; e_ < 4u; ++e_) {                                            \
    const uint idx_ = gl_LocalInvocationID.x + 128u * e_, r_ = idx_ / 8u, c_ = idx_ % 8u;   \
    dst[r_ * LDV + c_] = (row0) + r_ < (limit) ? src[((base) + ((row0) + r_) * (stride)) / 8u + c_] : uvec4(0u); \
  }

layout(std430, binding = 0) readonly buffer Q { uvec4 q8[]; };
layout(std430, binding = 1) readonly buffer K { uvec4 k8[]; };
layout(std430, binding = 2) readonly buffer V { uvec4 v8[]; };
#if !defined(DQ) && !defined(DKDV)
layout(std430, binding = 3) writeonly buffer O { float16_t o[]; };
layout(std430, binding = 4) writeonly buffer LSE { float lse[]; };
#else
layout(std430, binding = 3) readonly buffer G { uvec4 g8[]; };
layout(std430, binding = 4) readonly buffer LSE { float lse[]; };
layout(std430, binding = 5) readonly buffer DR { float drow[]; };
#if defined(DQ)
layout(std430, binding = 6) writeonly buffer DQO { float16_t dq[]; };
#else
layout(std430, binding = 6) writeonly buffer DKO { float16_t dk[]; };
layout(std430, binding = 7) writeonly buffer DVO { float16_t dv[]; };
#endif
#endif

#endif
