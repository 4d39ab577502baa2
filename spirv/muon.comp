// GPU-resident Muon (vk/muon.cpp), mirroring optim/muon.cpp's float loops; the Newton-Schulz matmuls between
// NORMALIZE and UPDATE go through the op dispatcher (the GPU's GEMMs). stats is GpuAdamW's f32[4] (adamw.comp):
// [2] the grad coefficient (f16 unscale x clip), [3] the skip flag (1 = step vetoed: nothing changes).
// Variants:
//   MOMENTUM:  g' = g * stats[2]; m = lerp(m, g', 1 - momentum); u = nesterov ? lerp(g', m, momentum) : m,
//              with torch.lerp's two forms as optim/muon.cpp has them. A vetoed step leaves m as it is.
//   NORMALIZE: out = x / (|x|_F + 1e-7), |x|_F from the float-float partial sums of squares that
//              adamw_norm_partial_f32 wrote; every workgroup sums the same partials in the same order.
//   UPDATE:    p = (decay ? p * (1 - lr*wd) : p) + neg_lr * (o * shape_scale); nothing on a vetoed step.
#version 450
#include "common.glsl"
#include "push_constants.h"
#ifdef NORMALIZE
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
  if (i >= p.n || stats[3] != 0.0) return;  // a vetoed step keeps the momentum
  precise float gi = g[i] * stats[2];
  const float mi = lerp_torch(m[i], gi, p.w_in);
  m[i] = mi;
  u[i] = p.nesterov != 0 ? lerp_torch(gi, mi, p.w_nes) : mi;
}
#elif defined(NORMALIZE)
layout(push_constant) uniform Push { MuonNormPC p; };
layout(std430, binding = 0) readonly buffer P { vec2 partials[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer O { float o[]; };
void main() {
  vec2 acc = vec2(0.0);
  for (uint k = gl_LocalInvocationID.x; k < p.parts; k += WG) acc = dd_add(acc, partials[k]);
  acc = wg_dd_sum(acc);  // same value in every workgroup: fixed order, no atomics
  precise float norm = sqrt_rn(acc.x + acc.y) + 1e-7;
  const uint i = linear_id();
  if (i < p.n) o[i] = div_rn(x[i], norm);
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
  precise float step = o[i] * p.shape_scale;
  prm[i] = pv + p.neg_lr * step;
}
#endif
