// GELU (tanh approximation, gelu.glsl) over n elements; BACKWARD: dx = dy * gelu'(x).
// F16: f16 storage, f32 math. VEC4 (with F16): 4 elements per invocation through 8-byte f16vec4 loads, each
// converted as the scalar kernel does (same bits); n counts vectors.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"
#include "gelu.glsl"

layout(push_constant) uniform Push { GeluPC p; };

#ifdef VEC4
#define VT f16vec4
#define W 4
#else
#define VT ST
#define W 1
#endif

#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) writeonly buffer DX { VT dx[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
#if W == 1
  dx[i] = ST(float(dy[i]) * gelu_grad(float(x[i])));
#else
  const vec4 v = vec4(x[i]), g = vec4(dy[i]);
  dx[i] = VT(vec4(g.x * gelu_grad(v.x), g.y * gelu_grad(v.y), g.z * gelu_grad(v.z), g.w * gelu_grad(v.w)));
#endif
}
#else
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) writeonly buffer Y { VT y[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
#if W == 1
  y[i] = ST(gelu(float(x[i])));
#else
  const vec4 v = vec4(x[i]);
  y[i] = VT(vec4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w)));
#endif
}
#endif
