// LayerNorm backward. xhat = (x - mean) * rstd, g = dy * w (w = 1 when absent).
// Default: dx, one workgroup per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// PARAMS: dw[c] = sum_r dy * xhat, db[c] = sum_r dy as partial sums over chunks of rows: one invocation per
// (chunk, column), rows summed in order into (chunks, cols); vk/ sums the chunks (deterministic, no atomics).
// F16: dy, x, w, dx stored f16; mean, rstd and the dw/db partials stay f32; math f32.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { LayerNormPC p; };

layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer X { ST x[]; };
layout(std430, binding = 2) readonly buffer M { float mean[]; };
layout(std430, binding = 3) readonly buffer R { float rstd[]; };

#ifdef PARAMS
layout(std430, binding = 4) writeonly buffer DW { float dw[]; };
layout(std430, binding = 5) writeonly buffer DB { float db[]; };  // a dummy when !has_b

void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk;
  const uint i = linear_id();
  if (i >= chunks * p.cols) return;
  const uint c = i % p.cols, r1 = min(p.rows, (i / p.cols + 1) * p.chunk);
  float sw = 0.0, sb = 0.0;
  for (uint r = (i / p.cols) * p.chunk; r < r1; ++r) {
    const float g = float(dy[r * p.cols + c]);
    sw += g * (float(x[r * p.cols + c]) - mean[r]) * rstd[r];
    sb += g;
  }
  if (p.has_w != 0) dw[i] = sw;
  if (p.has_b != 0) db[i] = sb;
}
#else
layout(std430, binding = 4) readonly buffer W { ST w[]; };  // a dummy when !has_w
layout(std430, binding = 5) writeonly buffer DX { ST dx[]; };

shared float red[WG];
#include "reduce.glsl"

void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  const float mu = mean[r], rs = rstd[r];
  float s1 = 0.0, s2 = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float g = float(dy[base + j]) * (p.has_w != 0 ? float(w[j]) : 1.0);
    s1 += g;
    s2 += g * (float(x[base + j]) - mu) * rs;
  }
  const float mg = wg_sum(s1) / float(p.cols);
  const float mgx = wg_sum(s2) / float(p.cols);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float g = float(dy[base + j]) * (p.has_w != 0 ? float(w[j]) : 1.0);
    dx[base + j] = ST(rs * (g - mg - (float(x[base + j]) - mu) * rs * mgx));
  }
}
#endif
