// GELU, tanh approximation (GPT-2): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// u is clamped to +-10 (tanh rounds to +-1 in f32 there), as on the CPU, so exp-based tanh cannot overflow.
// BACKWARD: dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)); the second term is
// 0 where u is clamped (also for u = +-inf from an overflowing x^3, which would otherwise give 0 * inf).
// F16: f16 storage, f32 math.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { GeluPC p; };

const float K0 = 0.7978845608028654;  // sqrt(2/pi)
const float K1 = 0.044715;
const float LIM = 10.0;  // core/cpu/gelu.cpp's f32 clamp

#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer X { ST x[]; };
layout(std430, binding = 2) writeonly buffer DX { ST dx[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const float v = float(x[i]);
  const float u = K0 * (v + K1 * v * v * v);
  const float t = tanh(clamp(u, -LIM, LIM));
  float d = 0.5 * (1.0 + t);
  if (abs(u) < LIM) d += 0.5 * v * (1.0 - t * t) * K0 * (1.0 + 3.0 * K1 * v * v);
  dx[i] = ST(float(dy[i]) * d);
}
#else
layout(std430, binding = 0) readonly buffer X { ST x[]; };
layout(std430, binding = 1) writeonly buffer Y { ST y[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const float v = float(x[i]);
  y[i] = ST(0.5 * v * (1.0 + tanh(clamp(K0 * (v + K1 * v * v * v), -LIM, LIM))));
}
#endif
