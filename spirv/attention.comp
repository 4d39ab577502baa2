// Fused attention forward (flash-attention): one workgroup per (b, h, block of WG query rows), one invocation
// per row. Key/value blocks of BLOCK rows are staged in shared memory; each row keeps its running max m, sum l
// and output accumulator in registers (online softmax), then writes out (B, Tq, H, D) and lse (B, H, Tq).
// Causal rows stop at their diagonal; the workgroup stops at its last row's diagonal.
#version 450
#extension GL_EXT_control_flow_attributes : require
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"
#include "philox.glsl"
#include "attention.glsl"

layout(std430, binding = 0) readonly buffer Q { ST q[]; };
layout(std430, binding = 1) readonly buffer K { ST k[]; };
layout(std430, binding = 2) readonly buffer V { ST v[]; };
layout(std430, binding = 3) writeonly buffer O { ST o[]; };
layout(std430, binding = 4) writeonly buffer LSE { float lse[]; };

shared vec4 ks[BLOCK * D4];
shared vec4 vs[BLOCK * D4];

void main() {
  const uint nqb = (p.tq + WG - 1u) / WG;
  const uint grp = linear_group(), bh = grp / nqb, qb = grp % nqb;
  if (bh * p.tq >= p.rows) return;  // whole workgroup: no barrier is skipped by part of it
  const uint b = bh / p.H, h = bh % p.H, t = gl_LocalInvocationID.x, i = qb * WG + t;
  const bool live = i < p.tq;
  const uint vis = live ? visible(i) : 0u;
  const uint kend = visible(min(p.tq, qb * WG + WG) - 1u);  // keys any row of this workgroup sees

  vec4 qr[D4], acc[D4];
  const uint qbase = p.q[0] + b * p.q[1] + h * p.q[2] + i * p.q[3];
  for (uint c = 0; c < D4; ++c) {
    acc[c] = vec4(0.0);
    qr[c] = live ? vec4(LOAD(q[qbase + 4u * c]), LOAD(q[qbase + 4u * c + 1u]), LOAD(q[qbase + 4u * c + 2u]),
                          LOAD(q[qbase + 4u * c + 3u])) * p.scale
                   : vec4(0.0);
  }
  const uint kbase = p.k[0] + b * p.k[1] + h * p.k[2], vbase = p.v[0] + b * p.v[1] + h * p.v[2];
  float m = -1.0 / 0.0, l = 0.0;
  for (uint j0 = 0; j0 < kend; j0 += BLOCK) {
    barrier();  // WAR: every invocation finished reading the previous block from ks/vs before it is overwritten
    for (uint e = t; e < BLOCK * D4; e += WG) {
      const uint key = j0 + e / D4, c = 4u * (e % D4);
      const bool in_range = key < p.tk;
      const uint ka = kbase + key * p.k[3] + c, va = vbase + key * p.v[3] + c;
      ks[e] = in_range ? vec4(LOAD(k[ka]), LOAD(k[ka + 1u]), LOAD(k[ka + 2u]), LOAD(k[ka + 3u])) : vec4(0.0);
      vs[e] = in_range ? vec4(LOAD(v[va]), LOAD(v[va + 1u]), LOAD(v[va + 2u]), LOAD(v[va + 3u])) : vec4(0.0);
    }
    barrier();  // RAW: the whole block is in shared memory before any invocation reads it
    if (!live || j0 >= vis) continue;  // this row sees no key of the block (barriers above stay uniform)
    // Per key online softmax: rescale only when the running max grows (rare after the first keys), so no
    // per-block score array is needed and the key loop need not be unrolled.
    [[dont_unroll]] for (uint jj = 0; jj < BLOCK; ++jj) {
      if (j0 + jj >= vis) break;
      vec4 s4 = vec4(0.0);  // 4 independent FMA chains (a dot() per c would chain all D products)
      for (uint c = 0; c < D4; ++c) s4 += qr[c] * ks[jj * D4 + c];
      const float sv = (s4.x + s4.y) + (s4.z + s4.w);
      if (sv > m) {
        const float corr = exp(m - sv);  // m = -inf before the first key: corr = 0
        l *= corr;
        for (uint c = 0; c < D4; ++c) acc[c] *= corr;
        m = sv;
      }
      float pr = exp(sv - m);
      l += pr;  // the softmax normalizer counts dropped probabilities too
      pr *= keep_factor(bh, i, j0 + jj);
      if (pr != 0.0)
        for (uint c = 0; c < D4; ++c) acc[c] += pr * vs[jj * D4 + c];
    }
  }
  if (!live) return;
  const float inv = 1.0 / l;
  const uint obase = ((b * p.tq + i) * p.H + h) * HEAD_DIM;
  for (uint c = 0; c < D4; ++c) {
    const vec4 r = acc[c] * inv;
    o[obase + 4u * c] = STORE(r.x);
    o[obase + 4u * c + 1u] = STORE(r.y);
    o[obase + 4u * c + 2u] = STORE(r.z);
    o[obase + 4u * c + 3u] = STORE(r.w);
  }
  lse[bh * p.tq + i] = m + log(l);
}
