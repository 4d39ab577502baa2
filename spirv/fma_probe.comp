// Is fma() fused on this device? r[i] = fma(a[i], b[i], c[i]) for triples vk/adamw.cpp compares with the CPU's
// std::fma bit for bit (Vulkan lets fma() round the product first, as lavapipe does); the FUSED_FMA variants of
// adamw.comp run only where every one matches.
#version 450
#include "common.glsl"

layout(std430, binding = 0) readonly buffer In { float abc[]; };  // (a, b, c) per triple
layout(std430, binding = 1) writeonly buffer Out { float r[]; };
layout(push_constant) uniform Push { uint n; } p;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= p.n) return;
  precise float f = fma(abc[3 * i], abc[3 * i + 1], abc[3 * i + 2]);
  r[i] = f;
}
