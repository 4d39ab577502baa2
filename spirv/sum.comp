// Sum over one dim of x seen as (outer, n, inner), times scale. ROWS (inner == 1): one workgroup per row,
// strided partial sums then a tree reduction. Otherwise one invocation per (outer, inner) output summing
// sequentially over n. Both orders are fixed, so results are deterministic.
#version 450
#include "common.glsl"
#include "push_constants.h"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform Push { SumPC p; };

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };

#ifdef ROWS
shared float red[WG];
#include "reduce.glsl"
void main() {
  const uint r = linear_group();
  if (r >= p.outer) return;  // uniform per workgroup
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.n; j += WG) s += x[r * p.n + j];
  s = wg_sum(s);
  if (gl_LocalInvocationID.x == 0) o[r] = s * p.scale;
}
#else
void main() {
  const uint i = linear_id();
  if (i >= p.outer * p.inner) return;
  const uint ou = i / p.inner, in_ = i % p.inner;
  float s = 0.0;
  for (uint k = 0; k < p.n; ++k) s += x[(ou * p.n + k) * p.inner + in_];
  o[i] = s * p.scale;
}
#endif
