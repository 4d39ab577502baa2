// Probe of fma(): o[i] = fma(x[3i], x[3i + 1], x[3i + 2]) with `precise`, for vk/adamw.cpp to compare with std::fma:
// where every triple matches (fused, correctly rounded), the AdamW kernels run with FUSED_FMA (spirv/ffloat.glsl).
#version 450
#include "common.glsl"
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { float o[]; };
void main() {
  const uint i = gl_GlobalInvocationID.x;
  precise float r = fma(x[3u * i], x[3u * i + 1u], x[3u * i + 2u]);
  o[i] = r;
}
