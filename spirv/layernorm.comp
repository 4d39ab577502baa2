// LayerNorm over the last dim, one workgroup per row: mean, biased variance (two passes), rstd =
// 1/sqrt(var + eps), y = (x - mean) * rstd * w + b. Saves mean and rstd for the backward.
// F16: x, w, b, y stored f16; mean and rstd stay f32; math f32.
// VEC4 (cols % 4 == 0, cols <= 4 * WG * MAXQ; vk/ checks): each invocation reads its quads of the row once into
// registers with 8/16-byte loads and keeps them for all three passes.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { LayerNormPC p; };

#if defined(VEC4) && defined(F16)
#define VT f16vec4
#elif defined(VEC4)
#define VT vec4
#else
#define VT ST
#endif
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) readonly buffer W { VT w[]; };  // unused (a dummy) when !has_w
layout(std430, binding = 2) readonly buffer Bi { VT bias[]; };
layout(std430, binding = 3) writeonly buffer Y { VT y[]; };
layout(std430, binding = 4) writeonly buffer M { float mean_out[]; };
layout(std430, binding = 5) writeonly buffer R { float rstd_out[]; };

shared float red[WG];
#include "reduce.glsl"

#ifdef VEC4
#define MAXQ 8u  // quads per invocation: rows of up to 4 * 32 * 8 = 1024 columns with 32-wide workgroups
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint q = p.cols / 4u, base = r * q, t = gl_LocalInvocationID.x;
  vec4 v[MAXQ];
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    v[k] = t + k * WG < q ? vec4(x[base + t + k * WG]) : vec4(0.0);
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float mean = wg_sum(s) / float(p.cols);
  float var = 0.0;
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k)
    if (t + k * WG < q) {
      const vec4 d = v[k] - mean;
      var += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
    }
  const float rstd = 1.0 / sqrt(wg_sum(var) / float(p.cols) + p.eps);
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
    if (j >= q) continue;
    vec4 o = (v[k] - mean) * rstd;
    if (p.has_w != 0) o *= vec4(w[j]);
    if (p.has_b != 0) o += vec4(bias[j]);
    y[base + j] = VT(o);
  }
  if (t == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}
#else
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) s += float(x[base + j]);
  const float mean = wg_sum(s) / float(p.cols);
  float v = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float d = float(x[base + j]) - mean;
    v += d * d;
  }
  const float rstd = 1.0 / sqrt(wg_sum(v) / float(p.cols) + p.eps);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    float t = (float(x[base + j]) - mean) * rstd;
    if (p.has_w != 0) t *= float(w[j]);
    if (p.has_b != 0) t += float(bias[j]);
    y[base + j] = ST(t);
  }
  if (gl_LocalInvocationID.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}
#endif
