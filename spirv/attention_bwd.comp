// Fused attention backward (FlashAttention-2 style, deterministic: every output element is accumulated by one
// invocation in a fixed order, no atomics). P_ij = exp(scale q_i.k_j - lse_i) is recomputed from q, k, lse.
//   ROWDOT: drow_i = sum_d dO_id * O_id, one invocation per row (O read through the q slot).
//   DQ:     one workgroup per (b, h, WG query rows): dq_i = scale * sum_j dS_ij k_j over key blocks.
//   DKDV:   one workgroup per (b, h, WG keys): dv_j = sum_i P~_ij dO_i, dk_j = scale * sum_i dS_ij q_i over
//           query blocks, where P~ = P * dropout multiplier and dS_ij = P_ij (dO_i.v_j * mult_ij - drow_i).
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"
#include "philox.glsl"
#include "attention.glsl"

#if defined(ROWDOT)
// VEC4 (every offset and stride of O and dO a multiple of 4; vk/attention.cpp checks): 8/16-byte loads, a quarter of
// the load instructions of rows that sit H*D elements apart, and the same adds in the same order. `precise`: no
// fused multiply-add in either variant, so both give the same bits on every driver. VEC8 (F16, multiples of 8):
// 16-byte loads of 8 halves, unpacked in element order: half VEC4's load instructions, the same adds.
#if defined(VEC8) && defined(F16)
#define VT uvec4
#elif defined(VEC4) && defined(F16)
#define VT f16vec4
#elif defined(VEC4)
#define VT vec4
#else
#define VT ST
#endif
layout(std430, binding = 0) readonly buffer O { VT o[]; };
layout(std430, binding = 1) readonly buffer G { VT g[]; };
layout(std430, binding = 2) writeonly buffer DR { float drow[]; };

void main() {
  const uint r = linear_id();
  if (r >= p.rows) return;
  const uint bh = r / p.tq, i = r % p.tq, b = bh / p.H, h = bh % p.H;
  const uint ob = p.q[0] + b * p.q[1] + h * p.q[2] + i * p.q[3], gb = p.g[0] + b * p.g[1] + h * p.g[2] + i * p.g[3];
  precise float s = 0.0;
#if defined(VEC8) && defined(F16)
  for (uint c = 0; c < HEAD_DIM / 8u; ++c) {
    const uvec4 a = o[ob / 8u + c], b = g[gb / 8u + c];
    [[unroll]] for (uint e = 0; e < 4u; ++e) {
      const vec2 x = unpackHalf2x16(a[e]), y = unpackHalf2x16(b[e]);  // elements 2e, 2e + 1 (x: the low half)
      s += x.x * y.x;
      s += x.y * y.y;
    }
  }
#elif defined(VEC4)
  for (uint c = 0; c < D4; ++c) {
    const vec4 x = vec4(o[ob / 4u + c]), y = vec4(g[gb / 4u + c]);
    s += x.x * y.x;
    s += x.y * y.y;
    s += x.z * y.z;
    s += x.w * y.w;
  }
#else
  for (uint c = 0; c < HEAD_DIM; ++c) s += LOAD(o[ob + c]) * LOAD(g[gb + c]);
#endif
  drow[r] = s;
}

#else
layout(std430, binding = 0) readonly buffer Q { ST q[]; };
layout(std430, binding = 1) readonly buffer K { ST k[]; };
layout(std430, binding = 2) readonly buffer V { ST v[]; };
layout(std430, binding = 3) readonly buffer G { ST g[]; };
layout(std430, binding = 4) readonly buffer LSE { float lse[]; };
layout(std430, binding = 5) readonly buffer DR { float drow[]; };

vec4 load4(uint which, uint a) {
  if (which == 0u) return vec4(LOAD(q[a]), LOAD(q[a + 1u]), LOAD(q[a + 2u]), LOAD(q[a + 3u]));
  if (which == 1u) return vec4(LOAD(k[a]), LOAD(k[a + 1u]), LOAD(k[a + 2u]), LOAD(k[a + 3u]));
  if (which == 2u) return vec4(LOAD(v[a]), LOAD(v[a + 1u]), LOAD(v[a + 2u]), LOAD(v[a + 3u]));
  return vec4(LOAD(g[a]), LOAD(g[a + 1u]), LOAD(g[a + 2u]), LOAD(g[a + 3u]));
}

#if defined(DQ)
layout(std430, binding = 6) writeonly buffer DQO { ST dq[]; };

shared vec4 ks[BLOCK * D4];
shared vec4 vs[BLOCK * D4];

void main() {
  const uint nqb = (p.tq + WG - 1u) / WG;
  const uint grp = linear_group(), bh = grp / nqb, qb = grp % nqb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, t = gl_LocalInvocationID.x, i = qb * WG + t;
  const bool live = i < p.tq;
  const uint vis = live ? visible(i) : 0u;
  const uint kend = visible(min(p.tq, qb * WG + WG) - 1u);

  vec4 qr[D4], gr[D4], acc[D4];
  const uint qbase = p.q[0] + b * p.q[1] + h * p.q[2] + i * p.q[3];
  const uint gbase = p.g[0] + b * p.g[1] + h * p.g[2] + i * p.g[3];
  for (uint c = 0; c < D4; ++c) {
    acc[c] = vec4(0.0);
    qr[c] = live ? load4(0u, qbase + 4u * c) * p.scale : vec4(0.0);  // scaled as in the forward
    gr[c] = live ? load4(3u, gbase + 4u * c) : vec4(0.0);
  }
  const float L = live ? lse[bh * p.tq + i] : 0.0, dr = live ? drow[bh * p.tq + i] : 0.0;
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];
  for (uint j0 = 0; j0 < kend; j0 += BLOCK) {
    barrier();  // WAR: every invocation finished reading the previous block from ks/vs before it is overwritten
    for (uint e = t; e < BLOCK * D4; e += WG) {
      const uint key = j0 + e / D4, c = 4u * (e % D4);
      const bool in_range = key < p.tk;
      ks[e] = in_range ? load4(1u, kbase + key * p.k[3] + c) : vec4(0.0);
      vs[e] = in_range ? load4(2u, vbase + key * p.v[3] + c) : vec4(0.0);
    }
    barrier();  // RAW: the whole block is in shared memory before any invocation reads it
    if (!live || j0 >= vis) continue;  // barriers above stay uniform: the loop bounds are per workgroup
    [[dont_unroll]] for (uint jj = 0; jj < BLOCK; ++jj) {
      if (j0 + jj >= vis) break;
      vec4 s4 = vec4(0.0), dp4 = vec4(0.0);  // independent FMA chains (dot() per c would chain all D products)
      for (uint c = 0; c < D4; ++c) {
        s4 += qr[c] * ks[jj * D4 + c];
        dp4 += gr[c] * vs[jj * D4 + c];
      }
      const float s = (s4.x + s4.y) + (s4.z + s4.w), dp = (dp4.x + dp4.y) + (dp4.z + dp4.w);
      const float pr = exp(s - L);
      const float ds = pr * (dp * keep_factor(bh, i, j0 + jj) - dr);
      for (uint c = 0; c < D4; ++c) acc[c] += ds * ks[jj * D4 + c];
    }
  }
  if (!live) return;
  const uint obase = p.out_off[0] + (b * p.tq + i) * p.out_row + h * HEAD_DIM;
  for (uint c = 0; c < D4; ++c) {
    const vec4 r = acc[c] * p.scale;
    dq[obase + 4u * c] = STORE(r.x);
    dq[obase + 4u * c + 1u] = STORE(r.y);
    dq[obase + 4u * c + 2u] = STORE(r.z);
    dq[obase + 4u * c + 3u] = STORE(r.w);
  }
}

#elif defined(DKDV)
layout(std430, binding = 6) writeonly buffer DKO { ST dk[]; };
layout(std430, binding = 7) writeonly buffer DVO { ST dv[]; };

shared vec4 vown[WG * (D4 + 1u)];  // each invocation's own v row, padded so rows start in different banks
shared vec4 qs[BLOCK * D4];        // the query block, pre-scaled like the forward's q
shared vec4 gs[BLOCK * D4];        // dO of the query block
shared float ls[BLOCK], drs[BLOCK];

void main() {
  const uint nkb = (p.tk + WG - 1u) / WG;
  const uint grp = linear_group(), bh = grp / nkb, kb = grp % nkb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, t = gl_LocalInvocationID.x, j = kb * WG + t;
  const bool live = j < p.tk;

  vec4 kr[D4], dka[D4], dva[D4];
  const uint kaddr = p.k[0] + b * p.k[1] + h * p.k[2] + j * p.k[3];
  const uint vaddr = p.v[0] + b * p.v[1] + h * p.v[2] + j * p.v[3];
  for (uint c = 0; c < D4; ++c) {
    dka[c] = vec4(0.0);
    dva[c] = vec4(0.0);
    kr[c] = live ? load4(1u, kaddr + 4u * c) : vec4(0.0);
    vown[t * (D4 + 1u) + c] = live ? load4(2u, vaddr + 4u * c) : vec4(0.0);  // read only by invocation t
  }
  // First query row that sees key kb*WG: i + shift >= kb*WG.
  const uint j0 = kb * WG, istart = j0 > p.shift ? j0 - p.shift : 0u;
  const uint qbase = p.q[0] + b * p.q[1] + h * p.q[2], gbase = p.g[0] + b * p.g[1] + h * p.g[2];
  for (uint i0 = (istart / BLOCK) * BLOCK; i0 < p.tq; i0 += BLOCK) {
    barrier();  // WAR: every invocation finished reading the previous query block before it is overwritten
    for (uint e = t; e < BLOCK * D4; e += WG) {
      const uint row = i0 + e / D4, c = 4u * (e % D4);
      const bool in_range = row < p.tq;
      qs[e] = in_range ? load4(0u, qbase + row * p.q[3] + c) * p.scale : vec4(0.0);
      gs[e] = in_range ? load4(3u, gbase + row * p.g[3] + c) : vec4(0.0);
    }
    for (uint e = t; e < BLOCK; e += WG) {
      const bool in_range = i0 + e < p.tq;
      ls[e] = in_range ? lse[bh * p.tq + i0 + e] : 0.0;
      drs[e] = in_range ? drow[bh * p.tq + i0 + e] : 0.0;
    }
    barrier();  // RAW: the whole query block is in shared memory before any invocation reads it
    if (!live) continue;
    [[dont_unroll]] for (uint ii = 0; ii < BLOCK; ++ii) {
      const uint i = i0 + ii;
      if (i >= p.tq) break;
      if (j >= visible(i)) continue;  // masked: row i does not see key j
      vec4 s4 = vec4(0.0), dp4 = vec4(0.0);  // independent FMA chains (dot() per c would chain all D products)
      for (uint c = 0; c < D4; ++c) {
        s4 += qs[ii * D4 + c] * kr[c];
        dp4 += gs[ii * D4 + c] * vown[t * (D4 + 1u) + c];
      }
      const float s = (s4.x + s4.y) + (s4.z + s4.w), dp = (dp4.x + dp4.y) + (dp4.z + dp4.w);
      const float pr = exp(s - ls[ii]), mult = keep_factor(bh, i, j);
      const float ds = pr * (dp * mult - drs[ii]);
      const float pk = pr * mult;
      for (uint c = 0; c < D4; ++c) {
        dva[c] += pk * gs[ii * D4 + c];
        dka[c] += ds * qs[ii * D4 + c];  // qs carries the scale: dk = scale * sum_i dS_ij q_i
      }
    }
  }
  if (!live) return;
  const uint row = (b * p.tk + j) * p.out_row + h * HEAD_DIM, kb0 = p.out_off[1] + row, vb0 = p.out_off[2] + row;
  for (uint c = 0; c < D4; ++c) {
    dk[kb0 + 4u * c] = STORE(dka[c].x);
    dk[kb0 + 4u * c + 1u] = STORE(dka[c].y);
    dk[kb0 + 4u * c + 2u] = STORE(dka[c].z);
    dk[kb0 + 4u * c + 3u] = STORE(dka[c].w);
    dv[vb0 + 4u * c] = STORE(dva[c].x);
    dv[vb0 + 4u * c + 1u] = STORE(dva[c].y);
    dv[vb0 + 4u * c + 2u] = STORE(dva[c].z);
    dv[vb0 + 4u * c + 3u] = STORE(dva[c].w);
  }
}
#endif
#endif
