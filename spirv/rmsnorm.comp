// RMSNorm over the last dim (Llama). Default (forward): one workgroup per row, rstd = 1/sqrt(mean(x^2) + eps),
// y = x * rstd * w; saves rstd. BACKWARD: dx per row, dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w,
// xhat = x * rstd. PARAMS: dw[c] = sum_r dy * xhat as partial sums over chunks of rows, (chunks, cols), one
// invocation per (chunk, column), rows in order (vk/ sums the chunks: deterministic, no atomics).
// F16: x, w, y, dy, dx stored f16; rstd and the dw partials stay f32; math f32.
// VEC4 (cols % 4 == 0; forward and dx also cols <= 4 * WG * MAXQ, vk/ checks): 8/16-byte loads; forward and dx
// keep the row's quads in registers (one read); PARAMS sums four columns per invocation in the scalar order (same
// bits).
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
#define MAXQ 8u  // VEC4 rows: quads per invocation (rows of up to 1024 columns with 32-wide workgroups)

#if defined(PARAMS)
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) readonly buffer R { float rstd[]; };
layout(std430, binding = 3) writeonly buffer DW { float dw[]; };
#ifdef VEC4
void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk, q = p.cols / 4u;
  const uint i = linear_id();
  if (i >= chunks * q) return;
  const uint c4 = i % q, ch = i / q, r1 = min(p.rows, (ch + 1) * p.chunk);
  precise vec4 s = vec4(0.0);  // precise: no fused multiply-add in either variant (same bits)
  for (uint r = ch * p.chunk; r < r1; ++r) s += vec4(dy[r * q + c4]) * vec4(x[r * q + c4]) * rstd[r];
  for (uint e = 0u; e < 4u; ++e) dw[ch * p.cols + 4u * c4 + e] = s[e];
}
#else
void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk;
  const uint i = linear_id();
  if (i >= chunks * p.cols) return;
  const uint c = i % p.cols, r1 = min(p.rows, (i / p.cols + 1) * p.chunk);
  precise float s = 0.0;
  for (uint r = (i / p.cols) * p.chunk; r < r1; ++r) s += float(dy[r * p.cols + c]) * float(x[r * p.cols + c]) * rstd[r];
  dw[i] = s;
}
#endif
#elif defined(BACKWARD)
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) readonly buffer R { float rstd[]; };
layout(std430, binding = 3) readonly buffer W { VT w[]; };  // a dummy when !has_w
layout(std430, binding = 4) writeonly buffer DX { VT dx[]; };
shared float red[WG];
#include "reduce.glsl"
#ifdef VEC4
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint q = p.cols / 4u, base = r * q, t = gl_LocalInvocationID.x;
  const float rs = rstd[r];
  vec4 gs[MAXQ], xh[MAXQ];  // g = dy * w and xhat = x * rstd per quad
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
    const bool in_row = j < q;
    gs[k] = in_row ? vec4(dy[base + j]) * (p.has_w != 0 ? vec4(w[j]) : vec4(1.0)) : vec4(0.0);
    xh[k] = in_row ? vec4(x[base + j]) * rs : vec4(0.0);
    const vec4 gx = gs[k] * xh[k];
    s += (gx.x + gx.y) + (gx.z + gx.w);
  }
  const float m = wg_sum(s) / float(p.cols);
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
    if (j < q) dx[base + j] = VT(rs * (gs[k] - xh[k] * m));
  }
}
#else
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
#endif
#else
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) readonly buffer W { VT w[]; };  // a dummy when !has_w
layout(std430, binding = 2) writeonly buffer Y { VT y[]; };
layout(std430, binding = 3) writeonly buffer R { float rstd_out[]; };
shared float red[WG];
#include "reduce.glsl"
#ifdef VEC4
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint q = p.cols / 4u, base = r * q, t = gl_LocalInvocationID.x;
  vec4 v[MAXQ];
  float s = 0.0;
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    v[k] = t + k * WG < q ? vec4(x[base + t + k * WG]) : vec4(0.0);
    s += (v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w);
  }
  const float rs = 1.0 / sqrt(wg_sum(s) / float(p.cols) + p.eps);
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
    if (j < q) y[base + j] = VT(v[k] * rs * (p.has_w != 0 ? vec4(w[j]) : vec4(1.0)));
  }
  if (t == 0) rstd_out[r] = rs;
}
#else
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
#endif  // VEC4
#endif
