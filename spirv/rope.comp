// Rotary position embedding, rotate-half convention (core/ops.h): one invocation per (row, head, pair i < D/2)
// of x (B*T rows, H heads, D); cos/sin tables (P, D/2) f32, computed in f64 on the host (a GPU sin/cos of
// large angles is imprecise). sign = -1 rotates back (the backward); heads >= rot_heads are copied (the v heads
// of a fused qkv pass through in the same pass). F16: x, y stored f16; math f32. VEC4 (with F16, D/2 % 4 == 0):
// 4 pairs per invocation through 8-byte f16vec4 loads, each computed as the scalar kernel does.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { RopePC p; };

#ifdef VEC4
#define W 4u
#define VT f16vec4
#define FT vec4
#else
#define W 1u
#define VT ST
#define FT float
#endif
// Offsets below are in elements of these arrays (W values each).
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) readonly buffer Cos { FT cos_t[]; };
layout(std430, binding = 2) readonly buffer Sin { FT sin_t[]; };
layout(std430, binding = 3) writeonly buffer Y { VT y[]; };

void main() {
  const uint i = linear_id(), hw = p.half_d / W;  // pairs, and vectors per half row
  if (i >= p.rows * p.heads * hw) return;
  const uint k = i % hw, rh = i / hw, r = rh / p.heads;
  const uint base = rh * 2 * hw + k;
  if (rh % p.heads >= p.rot_heads) {
    y[base] = x[base];
    y[base + hw] = x[base + hw];
    return;
  }
  const uint tab = (p.pos0 + r % p.t_len) * hw + k;
  const FT c = cos_t[tab], s = p.sign * sin_t[tab];
  const FT a = FT(x[base]), b = FT(x[base + hw]);
  y[base] = VT(a * c - b * s);
  y[base + hw] = VT(b * c + a * s);
}
