// Sum over one dim of x seen as (outer, n, inner), times scale. ROWS (inner == 1): one workgroup per row,
// strided partial sums then a tree reduction. Otherwise one invocation per (outer, chunk of n, inner) output
// summing its chunk sequentially (bounded loops: lavapipe stops any loop after 65535 iterations); vk/ sums
// the partials again. Both orders are fixed, so results are deterministic. IN_F16: f16 input (output f32).
// VEC4 (inner % 4 == 0): each invocation sums 4 adjacent columns with 8/16-byte loads, each column in the same
// order as the scalar kernel, so the bits are the same.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { SumPC p; };

layout(std430, binding = 0) readonly buffer X {
#if defined(IN_F16) && defined(VEC4)
  f16vec4 x[];
#elif defined(IN_F16)
  float16_t x[];
#elif defined(VEC4)
  vec4 x[];
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
#elif defined(VEC4)
void main() {
  const uint chunks = (p.n + p.chunk - 1) / p.chunk, q = p.inner / 4u;  // q: column quads per row
  const uint i = linear_id();
  if (i >= p.outer * chunks * q) return;
  const uint c4 = i % q, t = i / q, kc = t % chunks, ou = t / chunks;
  const uint k1 = min(p.n, (kc + 1) * p.chunk);
  vec4 s = vec4(0.0);
  for (uint k = kc * p.chunk; k < k1; ++k) s += vec4(x[(ou * p.n + k) * q + c4]);
  const uint o0 = t * p.inner + 4u * c4;  // the scalar kernel's output index of column 4 * c4
  for (uint e = 0u; e < 4u; ++e) o[o0 + e] = s[e] * p.scale;
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
