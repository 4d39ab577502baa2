// Rotary position embedding, rotate-half convention (core/ops.h): one invocation per (row, head, pair i < D/2)
// of x (B*T rows, H heads, D); cos/sin tables (P, D/2) f32, computed in f64 on the host (a GPU sin/cos of
// large angles is imprecise). sign = -1 rotates back (the backward); heads >= rot_heads are copied (the v heads
// of a fused qkv pass through in the same pass). F16: x, y stored f16; math f32.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { RopePC p; };

layout(std430, binding = 0) readonly buffer X { ST x[]; };
layout(std430, binding = 1) readonly buffer Cos { float cos_t[]; };
layout(std430, binding = 2) readonly buffer Sin { float sin_t[]; };
layout(std430, binding = 3) writeonly buffer Y { ST y[]; };

void main() {
  const uint i = linear_id();
  if (i >= p.rows * p.heads * p.half_d) return;
  const uint k = i % p.half_d, rh = i / p.half_d, r = rh / p.heads;
  const uint base = rh * 2 * p.half_d + k;
  if (rh % p.heads >= p.rot_heads) {
    y[base] = x[base];
    y[base + p.half_d] = x[base + p.half_d];
    return;
  }
  const uint tab = (p.pos0 + r % p.t_len) * p.half_d + k;
  const float c = cos_t[tab], s = p.sign * sin_t[tab];
  const float a = float(x[base]), b = float(x[base + p.half_d]);
  y[base] = ST(a * c - b * s);
  y[base + p.half_d] = ST(b * c + a * s);
}
