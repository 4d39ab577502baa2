// Sum over one dim of x seen as (outer, n, inner), times scale. ROWS (inner == 1): one workgroup per row,
// strided partial sums then a tree reduction. Otherwise one invocation per (outer, chunk of n, inner) output
// summing its chunk sequentially (bounded loops: lavapipe stops any loop after 65535 iterations); vk/ sums
// the partials again. Both orders are fixed, so results are deterministic. IN_F16: f16 input (output f32).
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { SumPC p; };

layout(std430, binding = 0) readonly buffer X {
#ifdef IN_F16
  float16_t x[];
#else
  float x[];
#endif
};
layout(std430, binding = 1) writeonly buffer O { float o[]; };

#ifdef ROWS
shared float red[WG];
#include "reduce.glsl"
void main() {
  const uint r = linear_group();
  if (r >= p.outer) return;  // uniform per workgroup
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.n; j += WG) s += float(x[r * p.n + j]);
  s = wg_sum(s);
  if (gl_LocalInvocationID.x == 0) o[r] = s * p.scale;
}
#else
void main() {
  const uint chunks = (p.n + p.chunk - 1) / p.chunk;
  const uint i = linear_id();
  if (i >= p.outer * chunks * p.inner) return;
  const uint in_ = i % p.inner, t = i / p.inner, kc = t % chunks, ou = t / chunks;
  const uint k1 = min(p.n, (kc + 1) * p.chunk);
  float s = 0.0;
  for (uint k = kc * p.chunk; k < k1; ++k) s += float(x[(ou * p.n + k) * p.inner + in_]);
  o[i] = s * p.scale;
}
#endif
