// GELU, tanh approximation (GPT-2): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// u is clamped to +-10 (tanh rounds to +-1 in f32 there), as on the CPU, so exp-based tanh cannot overflow.
// BACKWARD: dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)); the second term is
// 0 where u is clamped (also for u = +-inf from an overflowing x^3, which would otherwise give 0 * inf).
// F16: f16 storage, f32 math. VEC4 (with F16): 4 elements per invocation through 8-byte f16vec4 loads, each
// converted as the scalar kernel does (same bits); n counts vectors, and each invocation takes two, i and
// i + ceil(n / 2), loaded before either is computed (more bytes in flight: binary.comp).
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { GeluPC p; };

const float K0 = 0.7978845608028654;  // sqrt(2/pi)
const float K1 = 0.044715;
const float LIM = 10.0;  // core/cpu/gelu.cpp's f32 clamp

#ifdef VEC4
#define VT f16vec4
#define W 4
#else
#define VT ST
#define W 1
#endif

float gelu_grad(float v) {
  const float u = K0 * (v + K1 * v * v * v);
  const float t = tanh(clamp(u, -LIM, LIM));
  float d = 0.5 * (1.0 + t);
  if (abs(u) < LIM) d += 0.5 * v * (1.0 - t * t) * K0 * (1.0 + 3.0 * K1 * v * v);
  return d;
}
float gelu(float v) { return 0.5 * v * (1.0 + tanh(clamp(K0 * (v + K1 * v * v * v), -LIM, LIM))); }

#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) writeonly buffer DX { VT dx[]; };
#if W == 1
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  dx[i] = ST(float(dy[i]) * gelu_grad(float(x[i])));
}
#else
vec4 grad4(vec4 v, vec4 g) {
  return vec4(g.x * gelu_grad(v.x), g.y * gelu_grad(v.y), g.z * gelu_grad(v.z), g.w * gelu_grad(v.w));
}
void main() {
  const uint i = linear_id(), h = (p.n + 1u) / 2u;
  if (i >= h) return;
  const uint j = i + h < p.n ? i + h : i;
  const vec4 v0 = vec4(x[i]), g0 = vec4(dy[i]), v1 = vec4(x[j]), g1 = vec4(dy[j]);
  dx[i] = VT(grad4(v0, g0));
  if (j != i) dx[j] = VT(grad4(v1, g1));
}
#endif
#else
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) writeonly buffer Y { VT y[]; };
#if W == 1
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  y[i] = ST(gelu(float(x[i])));
}
#else
vec4 gelu4(vec4 v) { return vec4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w)); }
void main() {
  const uint i = linear_id(), h = (p.n + 1u) / 2u;
  if (i >= h) return;
  const uint j = i + h < p.n ? i + h : i;
  const vec4 v0 = vec4(x[i]), v1 = vec4(x[j]);
  y[i] = VT(gelu4(v0));
  if (j != i) y[j] = VT(gelu4(v1));
}
#endif
#endif
