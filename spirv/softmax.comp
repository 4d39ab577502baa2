// Row softmax over the last dim, one workgroup per row (max-subtracted). Causal: row r sees columns
// j <= r % tq + (cols - tq); masked columns get 0. BACKWARD: dx = y * (dy - sum(dy * y)).
// F16: f16 storage, f32 math.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { SoftmaxPC p; };

shared float red[WG];
#include "reduce.glsl"

#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer Y { ST y[]; };
layout(std430, binding = 2) writeonly buffer DX { ST dx[]; };

void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) s += float(dy[base + j]) * float(y[base + j]);
  const float dot_ = wg_sum(s);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) dx[base + j] = ST(float(y[base + j]) * (float(dy[base + j]) - dot_));
}
#else
layout(std430, binding = 0) readonly buffer X { ST x[]; };
layout(std430, binding = 1) writeonly buffer Y { ST y[]; };

void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  const uint visible = p.causal != 0 ? (r % p.tq) + (p.cols - p.tq) + 1 : p.cols;
  float m = -1.0 / 0.0;
  for (uint j = gl_LocalInvocationID.x; j < visible; j += WG) m = max(m, float(x[base + j]));
  m = wg_max(m);
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < visible; j += WG) s += exp(float(x[base + j]) - m);
  const float inv = 1.0 / wg_sum(s);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG)
    y[base + j] = ST(j < visible ? exp(float(x[base + j]) - m) * inv : 0.0);
}
#endif
