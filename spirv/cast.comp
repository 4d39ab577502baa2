// Dtype cast between f32 and f16 storage: o[i] = x[i] converted (round to nearest even; inf/NaN kept).
// TO_F16: f32 -> f16, else f16 -> f32.
#version 450
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { GeluPC p; };  // just n

#ifdef TO_F16
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { float16_t o[]; };
#else
layout(std430, binding = 0) readonly buffer X { float16_t x[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
#endif

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
#ifdef TO_F16
  o[i] = float16_t(x[i]);
#else
  o[i] = float(x[i]);
#endif
}
