// Fused attention on tensor cores with the softmax in registers: the same contract, tiles and math as
// attention_cm.comp (push constants, views, causal shift, dropout mask, f16 P and dS), but scores, P, dP and
// dS never leave the accumulator fragments: each lane works on its own fragment elements and the row
// reductions are quad shuffles. That needs the accumulator layout below (NVIDIA's m16n8k16 layout), which
// vk/attention.cpp checks on the device with coopmat_layout.comp before choosing these kernels.
//   Fragment element e (0..7) of lane l of a 16 x 16 f32 accumulator holds
//     row ROW(e) = l / 4 + 8 * (e / 4),  column COL(e) = 2 * (l % 4) + e % 2 + 8 * ((e / 2) % 2);
//   so a lane holds two rows (half hr = e / 4) and the 4 lanes of a quad share them.
// An accumulator converted to f16 is used directly as the A operand of the next product (P V, dS K, P~^T dO).
// Deterministic: every output element is one subgroup's fixed-order accumulation.
// Built with PF (spirv/CMakeLists.txt), the forward and dk/dv kernels load the next block into registers while the
// current one computes; all three run the longest causal blocks of every head first (BLOCK_OF). With DQS the dk/dv
// kernel also stores dS^T (f16) and the dq kernel computes dQ = scale dS K from it, recomputing nothing.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_NV_cooperative_matrix : require
#define F16
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"
#include "philox.glsl"
#include "attention.glsl"
#ifdef DQ2  // dq from dS with two 16-row groups per subgroup: each K fragment feeds two products (2 subgroups, 64 rows)
#define NSG 2u
#define SG_ROWS 32u
#endif
#ifndef BC
#define BC 32u  // blocks of 32 keys (queries in DKDV): fewer live fragments than 64 (registers 166 -> 136 in the
                // forward) and 9% faster on an H200; 16 was slower (twice the barriers). DKDV also builds with 64
                // (`dkdv64`): 6% faster at T 1024, 5% slower at T 256 (vk/attention.cpp: ALPHA_VK_ATTENTION_DKDV_BLOCK)
#endif
#include "attention_cm.glsl"

// 4-byte views of the f16 outputs: a lane's two adjacent columns of a fragment row leave in one store (2-byte stores
// were the slow way out; every output offset is even: D, H * D and the packed gradients' offsets are).
#if !defined(DQ) && !defined(DKDV)
layout(std430, binding = 3) writeonly buffer O2 { uint o2[]; };
#elif defined(DQ)
layout(std430, binding = 6) writeonly buffer DQO2 { uint dq2[]; };
#else
layout(std430, binding = 6) writeonly buffer DKO2 { uint dk2[]; };
layout(std430, binding = 7) writeonly buffer DVO2 { uint dv2[]; };
#endif
#define PAIR(x, y) packFloat2x16(f16vec2(x, y))  // columns COL(e), COL(e) + 1 for even e

#define HALF(e) ((e) >> 2u)  // which of the lane's two rows element e is in
#define COL(e) (2u * (lane & 3u) + ((e) & 1u) + 8u * (((e) >> 1u) & 1u))

// The max / sum of x over the 4 lanes of a quad (the lanes holding one row).
float quad_max(float x) {
  x = max(x, subgroupShuffleXor(x, 1u));
  return max(x, subgroupShuffleXor(x, 2u));
}
float quad_sum(float x) {
  x += subgroupShuffleXor(x, 1u);
  return x + subgroupShuffleXor(x, 2u);
}

#define TILE_ROWS (BR > BC ? BR : BC)
shared uvec4 As[TILE_ROWS * LDV];  // forward: Q tile, then key blocks; DQ: Q tile / key blocks; DKDV: K tile / query blocks
shared uvec4 Bs[TILE_ROWS * LDV];  // forward: value blocks; DQ: dO tile / value blocks; DKDV: V tile / dO blocks
#ifdef DKDV
shared float ls[BC], drs[BC];  // lse and drow of the query block
#endif
#ifdef DQS
// Per subgroup, the dS^T rows of a query block (its 16 keys x BC queries), staged so that they leave in 16-byte
// pieces: fragment stores straight to global memory write 4-byte pairs of 32-byte rows (~1 TB/s in the GEMMs).
// Rows padded by 4 words: the fragment store's rows g and g + 1..7 fall in distinct banks.
#define DS_ROW (BC / 8u)
#define DS_RS (DS_ROW + 1u)
shared uvec4 dss[(BR / 16u) * 16u * DS_RS];
#endif

#if !defined(DQ) && !defined(DKDV)
// ---------------------------------------------------------------------------------------------- forward
void main() {
  const uint nqb = (p.tq + BR - 1u) / BR;
  BLOCK_OF(nqb, bh, slot);
  const uint qb = nqb - 1u - slot;  // causal: the last rows see the most keys
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = qb * BR, r0 = q0 + 16u * sg;           // first row of the tile / of this subgroup
  const uint kend = visible(min(p.tq, q0 + BR) - 1u);    // keys any row of the tile sees
  const uint sg_keys = r0 < p.tq ? visible(min(p.tq, r0 + 16u) - 1u) : 0u;  // ... any row of this subgroup
  const uint sg_all = r0 < p.tq ? visible(r0) : 0u;  // keys every row of this subgroup sees (the first row's)
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];

  STAGE_ROWS(As, q8, p.q[0] + b * p.q[1] + h * p.q[2], p.q[3], q0, p.tq, BR);
  barrier();  // RAW: the Q tile is staged before subgroups load their fragments
  F16MAT fq[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) coopMatLoadNV(fq[d], As, (16u * sg) * LDV + 2u * d, LDV, false);

  uint row[2], vis[2];  // this lane's two rows and their visible keys
  float m[2], l[2];
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
    row[hr] = r0 + (lane >> 2u) + 8u * hr;
    vis[hr] = row[hr] < p.tq ? visible(row[hr]) : 0u;
    m[hr] = NEG_INF;
    l[hr] = 0.0;
  }
  F32MAT acc[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) acc[d] = F32MAT(0.0);

#ifdef PF
  uvec4 kn[PF_N], vn[PF_N];  // the next K/V block, in flight
  LOAD_ROWS(kn, k8, kbase, p.k[3], 0u, p.tk);
  LOAD_ROWS(vn, v8, vbase, p.v[3], 0u, p.tk);
#endif
  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous K/V block (and the Q fragments' loads)
#ifdef PF
    STORE_ROWS(As, kn);
    STORE_ROWS(Bs, vn);
    barrier();  // RAW: the whole block is staged before any subgroup reads it
    if (j0 + BC < kend) {  // the next block's loads run under this block's products
      LOAD_ROWS(kn, k8, kbase, p.k[3], j0 + BC, p.tk);
      LOAD_ROWS(vn, v8, vbase, p.v[3], j0 + BC, p.tk);
    }
#else
    STAGE_ROWS(As, k8, kbase, p.k[3], j0, p.tk, BC);
    STAGE_ROWS(Bs, v8, vbase, p.v[3], j0, p.tk, BC);
    barrier();  // RAW: the whole block is staged before any subgroup reads it
#endif
    if (j0 >= sg_keys) continue;  // no row of this subgroup sees the block (subgroup-uniform)

    F32MAT s[BC / 16u];  // S (16 x BC) = Q K^T in 16-key fragments; K^T is K read column-major
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {
      s[n] = F32MAT(0.0);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fk;
        coopMatLoadNV(fk, As, (16u * n) * LDV + 2u * d, LDV, true);
        s[n] = coopMatMulAddNV(fq[d], fk, s[n]);
      }
    }
    // Every row of the subgroup sees the whole block and nothing drops (subgroup-uniform): the per-element mask and
    // dropout tests are skipped, the values (and bits) are the general path's. These tests were the kernels' limit
    // (the forward -32%, dk/dv -24% per GPT-2 layer on an H200: docs/PERFORMANCE.md, session 19).
    const bool plain = j0 + BC <= sg_all && p.threshold == 0u;
    float mx[2] = {NEG_INF, NEG_INF};
    if (plain) {
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
          const float x = s[n][e] * p.scale;
          s[n][e] = x;
          mx[HALF(e)] = max(mx[HALF(e)], x);
        }
    } else {
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
          const float x = j0 + 16u * n + COL(e) < vis[HALF(e)] ? s[n][e] * p.scale : NEG_INF;
          s[n][e] = x;
          mx[HALF(e)] = max(mx[HALF(e)], x);
        }
    }
    float mref[2], corr[2], ps[2];
    [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
      const float mn = max(m[hr], quad_max(mx[hr]));
      mref[hr] = mn == NEG_INF ? 0.0 : mn;  // no inf - inf for rows that see nothing yet
      corr[hr] = exp(m[hr] - mref[hr]);     // m = -inf: 0 (acc and l are 0 anyway)
      m[hr] = mn;
      ps[hr] = 0.0;
    }
    if (plain) {
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
          const float pr = exp(s[n][e] - mref[HALF(e)]);
          ps[HALF(e)] += pr;
          s[n][e] = pr;  // the general path's pr * 1
        }
    } else {
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
          const float pr = exp(s[n][e] - mref[HALF(e)]);  // masked: exp(-inf) = 0
          ps[HALF(e)] += pr;                               // the normalizer counts dropped probabilities too
          s[n][e] = pr == 0.0 ? 0.0 : pr * keep_factor(bh, row[HALF(e)], j0 + 16u * n + COL(e));
        }
    }
    [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) l[hr] = l[hr] * corr[hr] + quad_sum(ps[hr]);
    [[unroll]] for (uint d = 0u; d < NF; ++d)
      [[unroll]] for (uint e = 0u; e < 8u; ++e) acc[d][e] *= corr[HALF(e)];
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {  // O += P V, P rounded to f16 as in attention_cm.comp
      const F16MAT fp = F16MAT(s[n]);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fv;
        coopMatLoadNV(fv, Bs, (16u * n) * LDV + 2u * d, LDV, false);
        acc[d] = coopMatMulAddNV(fp, fv, acc[d]);
      }
    }
  }
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
    if (row[hr] >= p.tq) continue;
    const float inv = 1.0 / l[hr];
    const uint obase = ((b * p.tq + row[hr]) * p.H + h) * HD;
    [[unroll]] for (uint d = 0u; d < NF; ++d)
      [[unroll]] for (uint e = 0u; e < 8u; e += 2u)
        if (HALF(e) == hr) o2[(obase + 16u * d + COL(e)) / 2u] = PAIR(acc[d][e] * inv, acc[d][e + 1u] * inv);
    if ((lane & 3u) == 0u) lse[bh * p.tq + row[hr]] = m[hr] + log(l[hr]);
  }
}

#elif defined(DQ) && defined(DQS)
// ---------------------------------------------------------------------------------------------- dq from dS
// dQ = scale dS K with the dS^T the dk/dv kernel stored (its tiles hold every key block a query tile reads, zeros
// where masked): no recomputation of S and dP, no exp, no V or dO. A subgroup owns RG groups of 16 query rows;
// with DQ2 (RG 2) each K fragment loaded feeds two products, 6 fragment loads per 8 products instead of 5 per 4.
#define DBC 64u  // keys per block: nothing is recomputed here, so fewer, larger blocks (4% faster than 32 on an H200)
#define RG (SG_ROWS / 16u)
void main() {
  const uint nqb = (p.tq + BR - 1u) / BR;
  BLOCK_OF(nqb, bh, slot);
  const uint qb = nqb - 1u - slot;  // causal: the last rows see the most keys
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = qb * BR, r0 = q0 + SG_ROWS * sg;
  const uint kend = visible(min(p.tq, q0 + BR) - 1u);
  // Keys any row of this subgroup sees (its last group's; rows past tq see none).
  const uint rl = min(p.tq, r0 + SG_ROWS) - 1u, sg_keys = r0 < p.tq ? visible(rl) : 0u;
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2];
  const uint tqp = PAD64(p.tq), dbase = bh * PAD64(p.tk) * tqp + q0;  // this tile's columns of dS^T
  F32MAT acc[RG * NF];  // group g, columns d: acc[g * NF + d]
  [[unroll]] for (uint i = 0u; i < RG * NF; ++i) acc[i] = F32MAT(0.0);

  for (uint j0 = 0u; j0 < kend; j0 += DBC) {
    barrier();  // WAR: every subgroup is done with the previous K / dS^T block
    STAGE_ROWS(As, k8, kbase, p.k[3], j0, p.tk, DBC);
    STAGE_ROWS(Bs, ds8, dbase, tqp, j0, p.tk, DBC);  // dS^T rows j0.. (keys) x the tile's 64 queries
    barrier();  // RAW: both blocks are staged before any subgroup reads them
    if (j0 >= sg_keys) continue;  // subgroup-uniform; a group that sees none of the block reads zeros of dS^T
    [[unroll]] for (uint n = 0u; n < DBC / 16u; ++n) {  // keys [j0 + 16 n, j0 + 16 n + 16)
      F16MAT fds[RG];
      [[unroll]] for (uint g = 0u; g < RG; ++g)  // dS: group g's 16 queries x 16 keys
        coopMatLoadNV(fds[g], Bs, (16u * n) * LDV + 2u * (RG * sg + g), LDV, true);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fk;
        coopMatLoadNV(fk, As, (16u * n) * LDV + 2u * d, LDV, false);  // K rows n, columns d
        [[unroll]] for (uint g = 0u; g < RG; ++g) acc[g * NF + d] = coopMatMulAddNV(fds[g], fk, acc[g * NF + d]);
      }
    }
  }
  [[unroll]] for (uint g = 0u; g < RG; ++g)
    [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
      const uint row = r0 + 16u * g + (lane >> 2u) + 8u * hr;
      if (row >= p.tq) continue;
      const uint obase = p.out_off[0] + (b * p.tq + row) * p.out_row + h * HD;
      [[unroll]] for (uint d = 0u; d < NF; ++d)
        [[unroll]] for (uint e = 0u; e < 8u; e += 2u)
          if (HALF(e) == hr)
            dq2[(obase + 16u * d + COL(e)) / 2u] =
                PAIR(acc[g * NF + d][e] * p.scale, acc[g * NF + d][e + 1u] * p.scale);
    }
}

#elif defined(DQ)
// ---------------------------------------------------------------------------------------------- dq
void main() {
  const uint nqb = (p.tq + BR - 1u) / BR;
  BLOCK_OF(nqb, bh, slot);
  const uint qb = nqb - 1u - slot;  // causal: the last rows see the most keys
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = qb * BR, r0 = q0 + 16u * sg;
  const uint kend = visible(min(p.tq, q0 + BR) - 1u);
  const uint sg_keys = r0 < p.tq ? visible(min(p.tq, r0 + 16u) - 1u) : 0u;
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];

  STAGE_ROWS(As, q8, p.q[0] + b * p.q[1] + h * p.q[2], p.q[3], q0, p.tq, BR);
  STAGE_ROWS(Bs, g8, p.g[0] + b * p.g[1] + h * p.g[2], p.g[3], q0, p.tq, BR);
  barrier();  // RAW: Q and dO tiles are staged before subgroups load their fragments
  F16MAT fq[NF], fg[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatLoadNV(fq[d], As, (16u * sg) * LDV + 2u * d, LDV, false);
    coopMatLoadNV(fg[d], Bs, (16u * sg) * LDV + 2u * d, LDV, false);
  }
  uint row[2], vis[2];
  float L[2], dr[2];
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
    row[hr] = r0 + (lane >> 2u) + 8u * hr;
    const bool live = row[hr] < p.tq;
    vis[hr] = live ? visible(row[hr]) : 0u;
    L[hr] = live ? lse[bh * p.tq + row[hr]] : 0.0;
    dr[hr] = live ? drow[bh * p.tq + row[hr]] : 0.0;
  }
  F32MAT acc[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) acc[d] = F32MAT(0.0);

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous K/V block (and the tiles' fragment loads)
    STAGE_ROWS(As, k8, kbase, p.k[3], j0, p.tk, BC);  // no prefetch here: it cost dq 26% (registers 160 -> 178)
    STAGE_ROWS(Bs, v8, vbase, p.v[3], j0, p.tk, BC);
    barrier();  // RAW: the whole block is staged before any subgroup reads it
    if (j0 >= sg_keys) continue;  // subgroup-uniform
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {  // keys [j0 + 16 n, j0 + 16 n + 16)
      F32MAT s = F32MAT(0.0), dp = F32MAT(0.0);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fk, fv;
        coopMatLoadNV(fk, As, (16u * n) * LDV + 2u * d, LDV, true);  // K^T
        coopMatLoadNV(fv, Bs, (16u * n) * LDV + 2u * d, LDV, true);  // V^T
        s = coopMatMulAddNV(fq[d], fk, s);
        dp = coopMatMulAddNV(fg[d], fv, dp);
      }
      [[unroll]] for (uint e = 0u; e < 8u; ++e) {  // s becomes dS = P (dP * mult - drow)
        const uint hr = HALF(e), j = j0 + 16u * n + COL(e);
        const float pr = j < vis[hr] ? exp(s[e] * p.scale - L[hr]) : 0.0;
        s[e] = pr == 0.0 ? 0.0 : pr * (dp[e] * keep_factor(bh, row[hr], j) - dr[hr]);
      }
      const F16MAT fds = F16MAT(s);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fk;
        coopMatLoadNV(fk, As, (16u * n) * LDV + 2u * d, LDV, false);  // K rows n, columns d
        acc[d] = coopMatMulAddNV(fds, fk, acc[d]);
      }
    }
  }
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
    if (row[hr] >= p.tq) continue;
    const uint obase = p.out_off[0] + (b * p.tq + row[hr]) * p.out_row + h * HD;
    [[unroll]] for (uint d = 0u; d < NF; ++d)
      [[unroll]] for (uint e = 0u; e < 8u; e += 2u)
        if (HALF(e) == hr) dq2[(obase + 16u * d + COL(e)) / 2u] = PAIR(acc[d][e] * p.scale, acc[d][e + 1u] * p.scale);
  }
}

#else
// ---------------------------------------------------------------------------------------------- dk, dv
void main() {
  const uint nkb = (p.tk + BR - 1u) / BR;
  BLOCK_OF(nkb, bh, kb);  // causal: the first keys are seen by the most queries
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint k0 = kb * BR, s0 = k0 + 16u * sg;  // first key of the tile / of this subgroup
  const uint qbase = p.q[0] + b * p.q[1] + h * p.q[2], gbase = p.g[0] + b * p.g[1] + h * p.g[2];

  STAGE_ROWS(As, k8, p.k[0] + b * p.k[1] + h * p.k[2], p.k[3], k0, p.tk, BR);
  STAGE_ROWS(Bs, v8, p.v[0] + b * p.v[1] + h * p.v[2], p.v[3], k0, p.tk, BR);
  barrier();  // RAW: K and V tiles are staged before subgroups load their fragments
  F16MAT fk[NF], fv[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatLoadNV(fk[d], As, (16u * sg) * LDV + 2u * d, LDV, false);
    coopMatLoadNV(fv[d], Bs, (16u * sg) * LDV + 2u * d, LDV, false);
  }
  uint key[2];  // this lane's two keys (the fragments' rows)
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) key[hr] = s0 + (lane >> 2u) + 8u * hr;
  F32MAT adk[NF], adv[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) adk[d] = adv[d] = F32MAT(0.0);

  // First query row that sees key k0: i + shift >= k0. DQS starts at the query tile holding it (64 rows), so every
  // (key, query) pair of the tiles the dq kernel reads is stored.
#ifdef DQS
  const uint istart = k0 > p.shift ? k0 - p.shift : 0u, ifirst = (istart / BR) * BR, me = gl_LocalInvocationID.x;
  const uint tqp = PAD64(p.tq), dsbase = bh * PAD64(p.tk) * tqp + s0 * tqp;  // this subgroup's rows of dS^T
#else
  const uint istart = k0 > p.shift ? k0 - p.shift : 0u;
  const uint ifirst = (istart / BC) * BC, me = gl_LocalInvocationID.x;
#endif
#ifdef PF
  uvec4 qn[PF_N], gn[PF_N];  // the next query block's Q and dO rows, lse and drow, in flight
  LOAD_ROWS(qn, q8, qbase, p.q[3], ifirst, p.tq);
  LOAD_ROWS(gn, g8, gbase, p.g[3], ifirst, p.tq);
  float ln = 0.0, dn = 0.0;
  if (me < BC && ifirst + me < p.tq) ln = lse[bh * p.tq + ifirst + me], dn = drow[bh * p.tq + ifirst + me];
#endif
  for (uint i0 = ifirst; i0 < p.tq; i0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous query block (and the tiles' fragment loads)
#ifdef PF
    STORE_ROWS(As, qn);
    STORE_ROWS(Bs, gn);
    if (me < BC) ls[me] = ln, drs[me] = dn;
    barrier();  // RAW: the whole query block is staged before any subgroup reads it
    if (i0 + BC < p.tq) {  // the next block's loads run under this block's products
      LOAD_ROWS(qn, q8, qbase, p.q[3], i0 + BC, p.tq);
      LOAD_ROWS(gn, g8, gbase, p.g[3], i0 + BC, p.tq);
      const uint r = i0 + BC + me;
      if (me < BC) ln = r < p.tq ? lse[bh * p.tq + r] : 0.0, dn = r < p.tq ? drow[bh * p.tq + r] : 0.0;
    }
#else
    STAGE_ROWS(As, q8, qbase, p.q[3], i0, p.tq, BC);
    STAGE_ROWS(Bs, g8, gbase, p.g[3], i0, p.tq, BC);
    if (me < BC) {
      const uint r = i0 + me;
      ls[me] = r < p.tq ? lse[bh * p.tq + r] : 0.0;
      drs[me] = r < p.tq ? drow[bh * p.tq + r] : 0.0;
    }
    barrier();  // RAW: the whole query block is staged before any subgroup reads it
#endif
    // No row of the block sees this subgroup's first key (subgroup-uniform): nothing to add (DQS: dS^T is 0 there).
    if (s0 >= p.tk || s0 >= visible(min(p.tq, i0 + BC) - 1u)) {
#ifdef DQS
      if (s0 < p.tk)
        [[unroll]] for (uint q = 0u; q < 16u * DS_ROW / 32u; ++q) {
          const uint e = lane + 32u * q;
          dsw4[(dsbase + (e / DS_ROW) * tqp + i0) / 8u + e % DS_ROW] = uvec4(0u);
        }
#endif
      continue;
    }
    // Every query of the block is live and sees every key of this subgroup, and nothing drops (subgroup-uniform).
    const bool plain = i0 + BC <= p.tq && s0 + 16u <= p.tk && s0 + 16u <= i0 + p.shift + 1u && p.threshold == 0u;
    // The test sits outside the 16-query sub-blocks, so each path is one straight run of code: the compiler can
    // overlap one sub-block's products with the other's exponentials. Same operations, same order per accumulator.
    F32MAT st[BC / 16u], dpt[BC / 16u];  // S^T = K Q^T, dP^T = V dO^T (keys as rows), per 16-query sub-block
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {  // queries [i0 + 16 n, i0 + 16 n + 16)
      st[n] = F32MAT(0.0);
      dpt[n] = F32MAT(0.0);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fq, fg;
        coopMatLoadNV(fq, As, (16u * n) * LDV + 2u * d, LDV, true);  // Q^T
        coopMatLoadNV(fg, Bs, (16u * n) * LDV + 2u * d, LDV, true);  // dO^T
        st[n] = coopMatMulAddNV(fk[d], fq, st[n]);
        dpt[n] = coopMatMulAddNV(fv[d], fg, dpt[n]);
      }
    }
    if (plain) {  // the general path's values (multiplying by 1 is exact) without its per-element tests
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {
          const uint qi = 16u * n + COL(e);
          const float pr = exp(st[n][e] * p.scale - ls[qi]);
          st[n][e] = pr;
          dpt[n][e] = pr * (dpt[n][e] - drs[qi]);
        }
    } else {
      [[unroll]] for (uint n = 0u; n < BC / 16u; ++n)
        [[unroll]] for (uint e = 0u; e < 8u; ++e) {  // st becomes P~^T, dpt becomes dS^T
          const uint qi = 16u * n + COL(e), i = i0 + qi, j = key[HALF(e)];
          const bool seen = i < p.tq && j < p.tk && j < visible(i);
          const float pr = seen ? exp(st[n][e] * p.scale - ls[qi]) : 0.0;
          const float mult = pr == 0.0 ? 0.0 : keep_factor(bh, i, j);
          st[n][e] = pr * mult;
          dpt[n][e] = pr * (dpt[n][e] * mult - drs[qi]);
        }
    }
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {
      const F16MAT fp = F16MAT(st[n]), fs = F16MAT(dpt[n]);
#ifdef DQS
      coopMatStoreNV(fs, dss, 16u * sg * DS_RS + 2u * n, DS_RS, false);  // dS^T rows: this subgroup's 16 keys
#endif
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fg, fq;
        coopMatLoadNV(fg, Bs, (16u * n) * LDV + 2u * d, LDV, false);  // dO rows n, columns d
        coopMatLoadNV(fq, As, (16u * n) * LDV + 2u * d, LDV, false);  // Q rows n, columns d
        adv[d] = coopMatMulAddNV(fp, fg, adv[d]);
        adk[d] = coopMatMulAddNV(fs, fq, adk[d]);
      }
    }
#ifdef DQS
    // Hazard: every lane's part of the staged rows is in shared memory before lanes read across them.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint q = 0u; q < 16u * DS_ROW / 32u; ++q) {
      const uint e = lane + 32u * q;  // consecutive lanes: consecutive pieces of a row (tqp, i0: multiples of 8)
      dsw4[(dsbase + (e / DS_ROW) * tqp + i0) / 8u + e % DS_ROW] = dss[16u * sg * DS_RS + (e / DS_ROW) * DS_RS + e % DS_ROW];
    }
    // Hazard: the reads finish before the next query block's rows overwrite the staging.
    subgroupBarrier();
#endif
  }
  [[unroll]] for (uint hr = 0u; hr < 2u; ++hr) {
    if (key[hr] >= p.tk) continue;
    const uint r = (b * p.tk + key[hr]) * p.out_row + h * HD;
    [[unroll]] for (uint d = 0u; d < NF; ++d)
      [[unroll]] for (uint e = 0u; e < 8u; e += 2u)
        if (HALF(e) == hr) {
          dk2[(p.out_off[1] + r + 16u * d + COL(e)) / 2u] = PAIR(adk[d][e] * p.scale, adk[d][e + 1u] * p.scale);
          dv2[(p.out_off[2] + r + 16u * d + COL(e)) / 2u] = PAIR(adv[d][e], adv[d][e + 1u]);
        }
  }
}
#endif
