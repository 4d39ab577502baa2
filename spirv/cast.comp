// Dtype cast between f32 and f16 storage: o[i] = x[i] converted (round to nearest even; inf/NaN kept).
// TO_F16: f32 -> f16, else f16 -> f32. VEC4: 4 elements per invocation (n counts vectors), the same conversions.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { GeluPC p; };  // just n

#ifdef VEC4
#define F32_T vec4
#define F16_T f16vec4
#else
#define F32_T float
#define F16_T float16_t
#endif
#ifdef TO_F16
layout(std430, binding = 0) readonly buffer X { F32_T x[]; };
layout(std430, binding = 1) writeonly buffer O { F16_T o[]; };
#else
layout(std430, binding = 0) readonly buffer X { F16_T x[]; };
layout(std430, binding = 1) writeonly buffer O { F32_T o[]; };
#endif

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
#ifdef TO_F16
  o[i] = F16_T(x[i]);
#else
  o[i] = F32_T(x[i]);
#endif
}
