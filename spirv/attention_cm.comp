// Fused attention on tensor cores (GL_NV_cooperative_matrix: f16 operands, f32 accumulation), FlashAttention-2
// style, head size 64, f16 storage; the same push constants, views, causal shift and dropout mask as
// attention.comp / attention_bwd.comp (their SIMT kernels are the fallback and share attention.glsl).
// One workgroup = 4 subgroups of 32 = a tile of 64 rows, 16 per subgroup; products are 16x16x16 fragments; the
// softmax and dropout run per element (SIMT) on f32 scores passed through shared memory.
//   (default) forward, per 64 query rows: S = Q K^T per key block of 64, online softmax (2 lanes per row, rows
//             in registers), O += P V with P rounded to f16; out (B, Tq, H, D) and lse (B, H, Tq).
//   DQ:       per 64 query rows: dq = scale * sum over key blocks of dS K, dS = P (dO V^T * mult - drow).
//   DKDV:     per 64 keys: dv = sum over query blocks of P~^T dO, dk = scale * sum of dS^T Q (keys as rows).
// Deterministic: every output element is one subgroup's fixed-order accumulation. vk/attention.cpp requires
// f16, D = 64, and offsets and row/head/batch strides that are multiples of 8 (16-byte staging loads).
//
// Tile sizes, staging and bindings: attention_cm.glsl (shared with attention_cmr.comp, the register variant).
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
#include "attention_cm.glsl"

#define SLD 68u     // floats per row of a subgroup's 16 x 64 f32 scratch (forward)

#if !defined(DQ) && !defined(DKDV)
// ---------------------------------------------------------------------------------------------- forward

shared uvec4 Ks[BC * LDV];          // key block (the Q tile before the loop)
shared uvec4 Vs[BC * LDV];          // value block
shared float Ss[4u * 16u * SLD];    // per subgroup: scores S, then the block's P V
shared float16_t Ps[4u * 16u * LDH];  // per subgroup: P (dropped, f16), the A operand of P V

void main() {
  const uint nqb = (p.tq + BR - 1u) / BR;
  const uint grp = linear_group(), bh = grp / nqb, qb = grp % nqb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = qb * BR, r0 = q0 + 16u * sg;           // first row of the tile / of this subgroup
  const uint kend = visible(min(p.tq, q0 + BR) - 1u);    // keys any row of the tile sees
  const uint sg_keys = r0 < p.tq ? visible(min(p.tq, r0 + 16u) - 1u) : 0u;  // ... any row of this subgroup
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];

  STAGE(Ks, q8, p.q[0] + b * p.q[1] + h * p.q[2], p.q[3], q0, p.tq);
  barrier();  // RAW: the Q tile is staged before subgroups load their fragments
  F16MAT fq[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) coopMatLoadNV(fq[d], Ks, (16u * sg) * LDV + 2u * d, LDV, false);

  // Softmax lanes: row r of the subgroup's 16, columns [32 hc, 32 hc + 32) of a block (and of the output).
  const uint r = lane >> 1u, hc = lane & 1u, i = r0 + r, vis = i < p.tq ? visible(i) : 0u;
  const uint srow = (16u * sg + r) * SLD + 32u * hc, prow = (16u * sg + r) * LDH + 32u * hc;
  float acc[32];
  [[unroll]] for (uint c = 0u; c < 32u; ++c) acc[c] = 0.0;
  float m = NEG_INF, l = 0.0;

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous K/V block (and the Q fragments' loads)
    STAGE(Ks, k8, kbase, p.k[3], j0, p.tk);
    STAGE(Vs, v8, vbase, p.v[3], j0, p.tk);
    barrier();  // RAW: the whole block is staged before any subgroup reads it
    if (j0 >= sg_keys) continue;  // no row of this subgroup sees the block (subgroup-uniform)

    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {  // S (16 x 64) = Q K^T: K^T is K read column-major
      F32MAT s = F32MAT(0.0);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fk;
        coopMatLoadNV(fk, Ks, (16u * n) * LDV + 2u * d, LDV, true);
        s = coopMatMulAddNV(fq[d], fk, s);
      }
      coopMatStoreNV(s, Ss, 16u * sg * SLD + 16u * n, SLD, false);
    }
    // Hazard: every lane's part of S is in shared memory before lanes read across it.
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    float sv[32], mx = NEG_INF;
    [[unroll]] for (uint c = 0u; c < 32u; ++c) {
      sv[c] = j0 + 32u * hc + c < vis ? Ss[srow + c] * p.scale : NEG_INF;
      mx = max(mx, sv[c]);
    }
    mx = max(mx, subgroupShuffleXor(mx, 1u));  // the row's other half
    const float mn = max(m, mx), mref = mn == NEG_INF ? 0.0 : mn;  // mref: no inf - inf for unseen rows
    const float corr = exp(m - mref);                                // m = -inf: 0 (acc and l are 0 anyway)
    float ps = 0.0;
    [[unroll]] for (uint c = 0u; c < 32u; ++c) {
      const float pr = exp(sv[c] - mref);  // masked: exp(-inf) = 0
      ps += pr;                            // the normalizer counts dropped probabilities too
      Ps[prow + c] = float16_t(pr == 0.0 ? 0.0 : pr * keep_factor(bh, i, j0 + 32u * hc + c));
    }
    l = l * corr + ps + subgroupShuffleXor(ps, 1u);
    m = mn;
    // Hazard: P is complete, and every lane has read its S, before P V overwrites Ss.
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    F16MAT fp[BC / 16u];
    [[unroll]] for (uint kk = 0u; kk < BC / 16u; ++kk) coopMatLoadNV(fp[kk], Ps, (16u * sg) * LDH + 16u * kk, LDH, false);
    [[unroll]] for (uint d = 0u; d < NF; ++d) {  // (P V)(16 x 64), column block d
      F32MAT pv = F32MAT(0.0);
      [[unroll]] for (uint kk = 0u; kk < BC / 16u; ++kk) {
        F16MAT fv;
        coopMatLoadNV(fv, Vs, (16u * kk) * LDV + 2u * d, LDV, false);
        pv = coopMatMulAddNV(fp[kk], fv, pv);
      }
      coopMatStoreNV(pv, Ss, 16u * sg * SLD + 16u * d, SLD, false);
    }
    // Hazard: the block's P V is in shared memory before lanes read their rows of it.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint c = 0u; c < 32u; ++c) acc[c] = acc[c] * corr + Ss[srow + c];
  }
  if (i >= p.tq) return;
  const float inv = 1.0 / l;
  const uint obase = ((b * p.tq + i) * p.H + h) * HD + 32u * hc;
  [[unroll]] for (uint c = 0u; c < 32u; ++c) o[obase + c] = float16_t(acc[c] * inv);
  if (hc == 0u) lse[bh * p.tq + i] = m + log(l);
}

#else
// ---------------------------------------------------------------------------------------------- backward

shared uvec4 As[BC * LDV];              // DQ: key block; DKDV: query block
shared uvec4 Bs[BC * LDV];              // DQ: value block; DKDV: dO block
shared float Sc[4u * 512u];             // per subgroup: a 16 x 16 score fragment and its dP partner
shared float16_t Xs[4u * 16u * LDH];    // per subgroup, 16 x 64: DQ dS; DKDV P~^T
#ifdef DKDV
shared float16_t Ys[4u * 16u * LDH];    // DKDV: dS^T
shared float ls[BC], drs[BC];           // DKDV: lse and drow of the query block
#endif

// Scratch lanes: element (r, 8 hc + u) of a 16 x 16 fragment, r = lane / 2, hc = lane % 2, u = 0..7.

#if defined(DQ)

void main() {
  const uint nqb = (p.tq + BR - 1u) / BR;
  const uint grp = linear_group(), bh = grp / nqb, qb = grp % nqb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint q0 = qb * BR, r0 = q0 + 16u * sg;
  const uint kend = visible(min(p.tq, q0 + BR) - 1u);
  const uint sg_keys = r0 < p.tq ? visible(min(p.tq, r0 + 16u) - 1u) : 0u;
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];

  STAGE(As, q8, p.q[0] + b * p.q[1] + h * p.q[2], p.q[3], q0, p.tq);
  STAGE(Bs, g8, p.g[0] + b * p.g[1] + h * p.g[2], p.g[3], q0, p.tq);
  barrier();  // RAW: Q and dO tiles are staged before subgroups load their fragments
  F16MAT fq[NF], fg[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatLoadNV(fq[d], As, (16u * sg) * LDV + 2u * d, LDV, false);
    coopMatLoadNV(fg[d], Bs, (16u * sg) * LDV + 2u * d, LDV, false);
  }
  const uint r = lane >> 1u, hc = lane & 1u, i = r0 + r;
  const bool live = i < p.tq;
  const uint vis = live ? visible(i) : 0u;
  const float L = live ? lse[bh * p.tq + i] : 0.0, dr = live ? drow[bh * p.tq + i] : 0.0;
  F32MAT acc[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) acc[d] = F32MAT(0.0);

  for (uint j0 = 0u; j0 < kend; j0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous K/V block (and the tiles' fragment loads)
    STAGE(As, k8, kbase, p.k[3], j0, p.tk);
    STAGE(Bs, v8, vbase, p.v[3], j0, p.tk);
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
      coopMatStoreNV(s, Sc, 512u * sg, 16u, false);
      coopMatStoreNV(dp, Sc, 512u * sg + 256u, 16u, false);
      // Hazard: both fragments are in shared memory before lanes read across them.
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint u = 0u; u < 8u; ++u) {
        const uint c = 8u * hc + u, j = j0 + 16u * n + c, e = 512u * sg + 16u * r + c;
        const float pr = j < vis ? exp(Sc[e] * p.scale - L) : 0.0;
        Xs[(16u * sg + r) * LDH + 16u * n + c] = float16_t(pr == 0.0 ? 0.0 : pr * (Sc[e + 256u] * keep_factor(bh, i, j) - dr));
      }
      // Hazard: every lane has read the scratch before the next chunk overwrites it.
      subgroupBarrier();
    }
    // Hazard: dS is complete in shared memory before it is loaded as fragments.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    F16MAT fds[BC / 16u];
    [[unroll]] for (uint kk = 0u; kk < BC / 16u; ++kk) coopMatLoadNV(fds[kk], Xs, (16u * sg) * LDH + 16u * kk, LDH, false);
    [[unroll]] for (uint d = 0u; d < NF; ++d)
      [[unroll]] for (uint kk = 0u; kk < BC / 16u; ++kk) {
        F16MAT fk;
        coopMatLoadNV(fk, As, (16u * kk) * LDV + 2u * d, LDV, false);  // K rows kk, columns d
        acc[d] = coopMatMulAddNV(fds[kk], fk, acc[d]);
      }
    // Hazard: the dS fragments are loaded before the next block's chunks overwrite Xs.
    subgroupBarrier();
  }
  const uint obase = p.out_off[0] + (b * p.tq + i) * p.out_row + h * HD;
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatStoreNV(acc[d], Sc, 512u * sg, 16u, false);
    // Hazard: the fragment is in shared memory before lanes read across it.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (live)
      [[unroll]] for (uint u = 0u; u < 8u; ++u)
        dq[obase + 16u * d + 8u * hc + u] = float16_t(Sc[512u * sg + 16u * r + 8u * hc + u] * p.scale);
    // Hazard: reads finish before the next fragment overwrites the scratch.
    subgroupBarrier();
  }
}

#else  // DKDV

void main() {
  const uint nkb = (p.tk + BR - 1u) / BR;
  const uint grp = linear_group(), bh = grp / nkb, kb = grp % nkb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint k0 = kb * BR, s0 = k0 + 16u * sg;  // first key of the tile / of this subgroup
  const uint qbase = p.q[0] + b * p.q[1] + h * p.q[2], gbase = p.g[0] + b * p.g[1] + h * p.g[2];

  STAGE(As, k8, p.k[0] + b * p.k[1] + h * p.k[2], p.k[3], k0, p.tk);
  STAGE(Bs, v8, p.v[0] + b * p.v[1] + h * p.v[2], p.v[3], k0, p.tk);
  barrier();  // RAW: K and V tiles are staged before subgroups load their fragments
  F16MAT fk[NF], fv[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatLoadNV(fk[d], As, (16u * sg) * LDV + 2u * d, LDV, false);
    coopMatLoadNV(fv[d], Bs, (16u * sg) * LDV + 2u * d, LDV, false);
  }
  const uint r = lane >> 1u, hc = lane & 1u, j = s0 + r;  // this lane's key
  F32MAT adk[NF], adv[NF];
  [[unroll]] for (uint d = 0u; d < NF; ++d) adk[d] = adv[d] = F32MAT(0.0);

  // First query row that sees key k0: i + shift >= k0.
  const uint istart = k0 > p.shift ? k0 - p.shift : 0u;
  for (uint i0 = (istart / BC) * BC; i0 < p.tq; i0 += BC) {
    barrier();  // WAR: every subgroup is done with the previous query block (and the tiles' fragment loads)
    STAGE(As, q8, qbase, p.q[3], i0, p.tq);
    STAGE(Bs, g8, gbase, p.g[3], i0, p.tq);
    if (gl_LocalInvocationID.x < BC) {
      const uint e = gl_LocalInvocationID.x, row = i0 + e;
      ls[e] = row < p.tq ? lse[bh * p.tq + row] : 0.0;
      drs[e] = row < p.tq ? drow[bh * p.tq + row] : 0.0;
    }
    barrier();  // RAW: the whole query block is staged before any subgroup reads it
    // No row of the block sees this subgroup's first key (subgroup-uniform): nothing to add.
    if (s0 >= p.tk || s0 >= visible(min(p.tq, i0 + BC) - 1u)) continue;
    [[unroll]] for (uint n = 0u; n < BC / 16u; ++n) {  // queries [i0 + 16 n, i0 + 16 n + 16)
      F32MAT st = F32MAT(0.0), dpt = F32MAT(0.0);  // S^T = K Q^T, dP^T = V dO^T (keys as rows)
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fq, fg;
        coopMatLoadNV(fq, As, (16u * n) * LDV + 2u * d, LDV, true);  // Q^T
        coopMatLoadNV(fg, Bs, (16u * n) * LDV + 2u * d, LDV, true);  // dO^T
        st = coopMatMulAddNV(fk[d], fq, st);
        dpt = coopMatMulAddNV(fv[d], fg, dpt);
      }
      coopMatStoreNV(st, Sc, 512u * sg, 16u, false);
      coopMatStoreNV(dpt, Sc, 512u * sg + 256u, 16u, false);
      // Hazard: both fragments are in shared memory before lanes read across them.
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint u = 0u; u < 8u; ++u) {
        const uint c = 8u * hc + u, qi = 16u * n + c, i = i0 + qi, e = 512u * sg + 16u * r + c;
        const bool seen = i < p.tq && j < p.tk && j < visible(i);
        const float pr = seen ? exp(Sc[e] * p.scale - ls[qi]) : 0.0;
        const float mult = pr == 0.0 ? 0.0 : keep_factor(bh, i, j);
        const uint x = (16u * sg + r) * LDH + qi;
        Xs[x] = float16_t(pr * mult);
        Ys[x] = float16_t(pr * (Sc[e + 256u] * mult - drs[qi]));
      }
      // Hazard: every lane has read the scratch before the next chunk overwrites it.
      subgroupBarrier();
    }
    // Hazard: P~^T and dS^T are complete in shared memory before they are loaded as fragments.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    [[unroll]] for (uint kk = 0u; kk < BC / 16u; ++kk) {
      F16MAT fp, fs;
      coopMatLoadNV(fp, Xs, (16u * sg) * LDH + 16u * kk, LDH, false);
      coopMatLoadNV(fs, Ys, (16u * sg) * LDH + 16u * kk, LDH, false);
      [[unroll]] for (uint d = 0u; d < NF; ++d) {
        F16MAT fg, fq;
        coopMatLoadNV(fg, Bs, (16u * kk) * LDV + 2u * d, LDV, false);  // dO rows kk, columns d
        coopMatLoadNV(fq, As, (16u * kk) * LDV + 2u * d, LDV, false);  // Q rows kk, columns d
        adv[d] = coopMatMulAddNV(fp, fg, adv[d]);
        adk[d] = coopMatMulAddNV(fs, fq, adk[d]);
      }
    }
    // Hazard: the fragments are loaded before the next block's chunks overwrite Xs and Ys.
    subgroupBarrier();
  }
  const uint row = (b * p.tk + j) * p.out_row + h * HD;
  const bool live = j < p.tk;
  [[unroll]] for (uint d = 0u; d < NF; ++d) {
    coopMatStoreNV(adk[d], Sc, 512u * sg, 16u, false);
    coopMatStoreNV(adv[d], Sc, 512u * sg + 256u, 16u, false);
    // Hazard: the fragments are in shared memory before lanes read across them.
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (live)
      [[unroll]] for (uint u = 0u; u < 8u; ++u) {
        const uint c = 16u * d + 8u * hc + u, e = 512u * sg + 16u * r + 8u * hc + u;
        dk[p.out_off[1] + row + c] = float16_t(Sc[e] * p.scale);
        dv[p.out_off[2] + row + c] = float16_t(Sc[e + 256u]);
      }
    // Hazard: reads finish before the next fragments overwrite the scratch.
    subgroupBarrier();
  }
}
#endif
#endif
