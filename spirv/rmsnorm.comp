// RMSNorm over the last dim (Llama). Default (forward): one workgroup per row, rstd = 1/sqrt(mean(x^2) + eps),
// y = x * rstd * w; saves rstd. BACKWARD: dx per row, dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w,
// xhat = x * rstd. PARAMS: dw[c] = sum_r dy * xhat as partial sums over chunks of rows, (chunks, cols), one
// invocation per (chunk, column), rows in order (vk/ sums the chunks: deterministic, no atomics).
// F16: x, w, y, dy, dx stored f16; rstd and the dw partials stay f32; math f32.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { LayerNormPC p; };

#if defined(PARAMS)
layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer X { ST x[]; };
layout(std430, binding = 2) readonly buffer R { float rstd[]; };
layout(std430, binding = 3) writeonly buffer DW { float dw[]; };
void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk;
  const uint i = linear_id();
  if (i >= chunks * p.cols) return;
  const uint c = i % p.cols, r1 = min(p.rows, (i / p.cols + 1) * p.chunk);
  float s = 0.0;
  for (uint r = (i / p.cols) * p.chunk; r < r1; ++r) s += float(dy[r * p.cols + c]) * float(x[r * p.cols + c]) * rstd[r];
  dw[i] = s;
}
#elif defined(BACKWARD)
layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer X { ST x[]; };
layout(std430, binding = 2) readonly buffer R { float rstd[]; };
layout(std430, binding = 3) readonly buffer W { ST w[]; };  // a dummy when !has_w
layout(std430, binding = 4) writeonly buffer DX { ST dx[]; };
shared float red[WG];
#include "reduce.glsl"
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  const float rs = rstd[r];
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG)
    s += float(dy[base + j]) * (p.has_w != 0 ? float(w[j]) : 1.0) * float(x[base + j]) * rs;
  const float m = wg_sum(s) / float(p.cols);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float g = float(dy[base + j]) * (p.has_w != 0 ? float(w[j]) : 1.0);
    dx[base + j] = ST(rs * (g - float(x[base + j]) * rs * m));
  }
}
#else
layout(std430, binding = 0) readonly buffer X { ST x[]; };
layout(std430, binding = 1) readonly buffer W { ST w[]; };  // a dummy when !has_w
layout(std430, binding = 2) writeonly buffer Y { ST y[]; };
layout(std430, binding = 3) writeonly buffer R { float rstd_out[]; };
shared float red[WG];
#include "reduce.glsl"
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint base = r * p.cols;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) {
    const float v = float(x[base + j]);
    s += v * v;
  }
  const float rs = 1.0 / sqrt(wg_sum(s) / float(p.cols) + p.eps);
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG)
    y[base + j] = ST(float(x[base + j]) * rs * (p.has_w != 0 ? float(w[j]) : 1.0));
  if (gl_LocalInvocationID.x == 0) rstd_out[r] = rs;
}
#endif
