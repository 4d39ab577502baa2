// Probe of a fused fma() (vk/adamw.cpp): ffloat.glsl's two_prod on its FUSED_FMA path for n pairs (a, b). The host
// checks p == a * b and e == the product's exact error, which holds only where fma() rounds once.
#version 450
#define FUSED_FMA
#include "common.glsl"
#include "ffloat.glsl"

layout(std430, binding = 0) readonly buffer In { vec2 ab[]; };
layout(std430, binding = 1) writeonly buffer Out { vec2 pe[]; };
layout(push_constant) uniform Push { uint n; } p;

void main() {
  const uint i = linear_id();
  if (i < p.n) pe[i] = two_prod(ab[i].x, ab[i].y);
}
