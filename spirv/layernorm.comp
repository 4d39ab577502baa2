// LayerNorm over the last dim, one workgroup per row: mean, biased variance (two passes), rstd =
// 1/sqrt(var + eps), y = (x - mean) * rstd * w + b. Saves mean and rstd for the backward.
#version 450
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { LayerNormPC p; };

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };  // unused (a dummy) when !has_w
layout(std430, binding = 2) readonly buffer Bi { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) writeonly buffer M { float mean_out[]; };
layout(std430, binding = 5) writeonly buffer R { float rstd_out[]; };

shared float red[WG];
#include "reduce.glsl"

void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) s += x[base + j];
  const float mean = wg_sum(s) / float(p.cols);
  float v = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float d = x[base + j] - mean;
    v += d * d;
  }
  const float rstd = 1.0 / sqrt(wg_sum(v) / float(p.cols) + p.eps);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    float t = (x[base + j] - mean) * rstd;
    if (p.has_w != 0) t *= w[j];
    if (p.has_b != 0) t += bias[j];
    y[base + j] = t;
  }
  if (gl_LocalInvocationID.x == 0) {
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}
