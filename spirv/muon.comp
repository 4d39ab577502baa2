// GPU-resident Muon (vk/muon.cpp), mirroring optim/muon.cpp's float loops. Muon matrices of the same shape (after
// orienting each wide: m = min(rows, cols) rows) are stacked in one (G, m, n) buffer so the Newton-Schulz matmuls
// between NORMALIZE and UPDATE (through the op dispatcher: the GPU's GEMMs) run batched, a few dispatches per shape
// instead of per matrix. stats is GpuAdamW's f32[4] (adamw.comp): [2] the grad coefficient (f16 unscale x clip),
// [3] the skip flag (1 = step vetoed: nothing changes). Element i of a (rows, cols) param is (r, c) = (i / cols,
// i % cols); in the stack it sits at offset + (transpose ? c * rows + r : i).
// Variants:
//   MOMENTUM:  g' = g * stats[2]; m = lerp(m, g', 1 - momentum); u = nesterov ? lerp(g', m, momentum) : m (torch.lerp's
//              two forms as optim/muon.cpp has them), u written into the stack. A vetoed step leaves m as it is (u = 0).
//   PARTIAL:   per matrix z of the stack, float-float sums of squares of CHUNK elements per workgroup.
//   NORMALIZE: per matrix z, out = x / (|x|_F + 1e-7), |x|_F from its partials (every workgroup sums the same
//              partials in the same order: no atomics, same bits run to run).
//   UPDATE:    p = (decay ? p * (1 - lr*wd) : p) + neg_lr * (o * shape_scale), o read from the stack; nothing on a
//              vetoed step.
#version 450
#include "common.glsl"
#include "push_constants.h"
#if defined(PARTIAL) || defined(NORMALIZE)
#define FFLOAT_REDUCE
#endif
#include "ffloat.glsl"

#if defined(MOMENTUM)
layout(push_constant) uniform Push { MuonMomentumPC p; };
layout(std430, binding = 0) readonly buffer G { float g[]; };
layout(std430, binding = 1) buffer M { float m[]; };
layout(std430, binding = 2) writeonly buffer U { float u[]; };
layout(std430, binding = 3) readonly buffer S { float stats[]; };
float lerp_torch(float self, float end, float w) {  // torch.lerp: self + w*(end-self) for |w| < 0.5
  precise float r = abs(w) < 0.5 ? self + w * (end - self) : end - (end - self) * (1.0 - w);
  return r;
}
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint at = p.transpose != 0 ? (i % p.cols) * p.rows + i / p.cols : i;
  if (stats[3] != 0.0) {  // a vetoed step keeps the momentum; zeros keep the skipped Newton-Schulz finite
    u[p.offset + at] = 0.0;
    return;
  }
  precise float gi = g[i] * stats[2];
  const float mi = lerp_torch(m[i], gi, p.w_in);
  m[i] = mi;
  u[p.offset + at] = p.nesterov != 0 ? lerp_torch(gi, mi, p.w_nes) : mi;
}
#elif defined(PARTIAL)
layout(push_constant) uniform Push { MuonNormPC p; };
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer P { vec2 partials[]; };
void main() {
  const uint grp = linear_group(), base = grp * WG * ADAMW_NORM_ITEMS, z = gl_WorkGroupID.z;
  if (base >= p.mn) return;  // uniform per workgroup
  vec2 acc = vec2(0.0);
  for (uint k = 0; k < ADAMW_NORM_ITEMS; ++k) {
    const uint i = base + k * WG + gl_LocalInvocationID.x;
    if (i < p.mn) acc = dd_add(acc, two_prod(x[z * p.mn + i], x[z * p.mn + i]));
  }
  acc = wg_dd_sum(acc);
  if (gl_LocalInvocationID.x == 0) partials[z * p.parts + grp] = acc;
}
#elif defined(NORMALIZE)
layout(push_constant) uniform Push { MuonNormPC p; };
layout(std430, binding = 0) readonly buffer P { vec2 partials[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
void main() {
  const uint z = gl_WorkGroupID.z;
  vec2 acc = vec2(0.0);
  for (uint k = gl_LocalInvocationID.x; k < p.parts; k += WG) acc = dd_add(acc, partials[z * p.parts + k]);
  acc = wg_dd_sum(acc);
  precise float norm = sqrt_rn(acc.x + acc.y) + 1e-7;
  const uint i = linear_id();
  if (i < p.mn) o[z * p.mn + i] = div_rn(x[z * p.mn + i], norm);
}
#else
layout(push_constant) uniform Push { MuonUpdatePC p; };
layout(std430, binding = 0) buffer Prm { float prm[]; };
layout(std430, binding = 1) readonly buffer O { float o[]; };
layout(std430, binding = 2) readonly buffer S { float stats[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n || stats[3] != 0.0) return;  // a vetoed step changes nothing
  precise float pv = prm[i];
  if (p.apply_decay != 0) pv = pv * p.decay;
  const uint at = p.transpose != 0 ? (i % p.cols) * p.rows + i / p.cols : i;
  precise float step = o[p.offset + at] * p.shape_scale;
  prm[i] = pv + p.neg_lr * step;
}
#endif
