// Shared by the tensor-core attention kernels (attention_cm.comp: scores through shared memory;
// attention_cmr.comp: scores in registers): tile sizes, fragment types, staging and the buffer bindings.
// Each kernel source enables the extensions itself; -DDQ / -DDKDV pick the backward kernels' bindings.
//
// Dimension legend: BR rows of a tile, BC keys (or queries) per inner block, HD head size, NF = HD / 16.
#ifndef ALPHA_ATTENTION_CM_GLSL
#define ALPHA_ATTENTION_CM_GLSL

#define HD 64u
#define NF 4u       // HD / 16
#ifndef NSG
#define NSG 4u      // subgroups of 32 per workgroup, SG_ROWS rows (keys in DKDV) each
#endif
#ifndef SG_ROWS
#define SG_ROWS 16u  // rows (keys in DKDV) per subgroup: one fragment row; attention_cmr.comp's DQ2 has two
#endif
#define BR (SG_ROWS * NSG)  // rows per workgroup
#ifndef BC
#define BC 64u      // keys (queries in DKDV) per inner block (attention_cmr.comp: 32)
#endif
#define LDH 72u     // halves per staged row: HD + 8 keeps rows 16-byte aligned and shifts banks per row
#define LDV 9u      // LDH in uvec4 (8 halves)
#define NEG_INF (-1.0 / 0.0)

#define F16MAT fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define F32MAT fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

// `nrows` rows [row0, row0 + nrows) (a multiple of 16) of a (rows, HD) f16 view (element base + row * stride) into
// a shared [nrows][LDH] array, 16 bytes per load; rows at or past `limit` are zero. All 32 * NSG invocations take
// part (nrows * 8 a multiple of that).
#define STAGE(dst, src, base, stride, row0, limit) STAGE_ROWS(dst, src, base, stride, row0, limit, 64u)
#define STAGE_ROWS(dst, src, base, stride, row0, limit, nrows)                              \
  [[unroll]] for (uint e_ = 0u; e_ < (nrows) * 8u / (32u * NSG); ++e_) {                   \
    const uint idx_ = gl_LocalInvocationID.x + 32u * NSG * e_, r_ = idx_ / 8u, c_ = idx_ % 8u; \
    dst[r_ * LDV + c_] = (row0) + r_ < (limit) ? src[((base) + ((row0) + r_) * (stride)) / 8u + c_] : uvec4(0u); \
  }

// This workgroup's batch*head and block slot (0 = the longest of nb causal blocks): the longest blocks of every
// head run first, so the grid ends on short ones (10% faster than head by head on an H200, whose blocks differ up
// to nb-fold). Padding workgroups return whole: no barrier is skipped by part of a workgroup.
#define BLOCK_OF(nb, bh, slot)                                 \
  const uint nbh_ = p.rows / p.tq, grp_ = linear_group();    \
  const uint bh = grp_ % nbh_, slot = grp_ / nbh_;           \
  if (slot >= (nb)) return;

// Split staging for the register prefetch (attention_cmr.comp's PF variants): LOAD_ROWS reads a block's rows into
// PF_N uvec4 per invocation while the previous block computes; STORE_ROWS writes them to shared memory.
#define PF_N (BC * 8u / (32u * NSG))
#define LOAD_ROWS(regs, src, base, stride, row0, limit)                                     \
  [[unroll]] for (uint e_ = 0u; e_ < PF_N; ++e_) {                                          \
    const uint idx_ = gl_LocalInvocationID.x + 32u * NSG * e_, r_ = idx_ / 8u, c_ = idx_ % 8u; \
    regs[e_] = (row0) + r_ < (limit) ? src[((base) + ((row0) + r_) * (stride)) / 8u + c_] : uvec4(0u); \
  }
#define STORE_ROWS(dst, regs)                                                               \
  [[unroll]] for (uint e_ = 0u; e_ < PF_N; ++e_) {                                          \
    const uint idx_ = gl_LocalInvocationID.x + 32u * NSG * e_;                             \
    dst[(idx_ / 8u) * LDV + idx_ % 8u] = regs[e_];                                          \
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
#ifdef DQS
layout(std430, binding = 7) readonly buffer DSR { uvec4 ds8[]; };  // dS^T from the dk/dv kernel
#endif
#else
layout(std430, binding = 6) writeonly buffer DKO { float16_t dk[]; };
layout(std430, binding = 7) writeonly buffer DVO { float16_t dv[]; };
#ifdef DQS
layout(std430, binding = 8) writeonly buffer DSW { uvec4 dsw4[]; };  // dS^T for the dq kernel, in 16-byte pieces
#endif
#endif
// DQS: dS^T of head bh is a (PAD64(tk), PAD64(tq)) f16 matrix at bh * PAD64(tk) * PAD64(tq): keys as rows.
#define PAD64(x) (((x) + 63u) & ~63u)
#endif

#endif
