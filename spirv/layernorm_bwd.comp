// LayerNorm backward. xhat = (x - mean) * rstd, g = dy * w (w = 1 when absent).
// Default: dx, one workgroup per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// PARAMS: dw[c] = sum_r dy * xhat, db[c] = sum_r dy as partial sums over chunks of rows: one invocation per
// (chunk, column), rows summed in order into (chunks, cols); vk/ sums the chunks (deterministic, no atomics). db's
// partials start at element db_off of their binding (vk/ binds one buffer for both, summed in one pass).
// PARAMS VEC4 (cols % 4 == 0): 4 adjacent columns per invocation through 8/16-byte loads, each column's rows in
// the same order, so the same bits. dx VEC4 (cols % 4 == 0, cols <= 4 * WG * MAXQ): the row's dy and x quads
// read once into registers for both passes.
// F16: dy, x, w, dx stored f16; mean, rstd and the dw/db partials stay f32; math f32.
// ACC (F16 VEC4 dx): dx = acc + dx, dx rounded to f16 first and the pair added in f32 and rounded, as binary.comp's
// f16 add (the residual stream's gradient accumulated in this pass: ag::take_grad).
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
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) readonly buffer M { float mean[]; };
layout(std430, binding = 3) readonly buffer R { float rstd[]; };

#ifdef PARAMS
layout(std430, binding = 4) writeonly buffer DW { float dw[]; };
layout(std430, binding = 5) writeonly buffer DB { float db[]; };  // a dummy when !has_b

#ifdef VEC4
void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk, q = p.cols / 4u;  // q: column quads per row
  const uint i = linear_id();
  if (i >= chunks * q) return;
  const uint c4 = i % q, ch = i / q, r1 = min(p.rows, (ch + 1) * p.chunk);
  precise vec4 sw = vec4(0.0), sb = vec4(0.0);  // precise: no fused multiply-add in either variant
  for (uint r = ch * p.chunk; r < r1; ++r) {
    const vec4 g = vec4(dy[r * q + c4]);
    sw += g * (vec4(x[r * q + c4]) - mean[r]) * rstd[r];
    sb += g;
  }
  const uint o = ch * p.cols + 4u * c4;  // the scalar kernel's index of column 4 * c4
  for (uint e = 0u; e < 4u; ++e) {
    if (p.has_w != 0) dw[o + e] = sw[e];
    if (p.has_b != 0) db[p.db_off + o + e] = sb[e];
  }
}
#else
void main() {
  const uint chunks = (p.rows + p.chunk - 1) / p.chunk;
  const uint i = linear_id();
  if (i >= chunks * p.cols) return;
  const uint c = i % p.cols, r1 = min(p.rows, (i / p.cols + 1) * p.chunk);
  precise float sw = 0.0, sb = 0.0;
  for (uint r = (i / p.cols) * p.chunk; r < r1; ++r) {
    const float g = float(dy[r * p.cols + c]);
    sw += g * (float(x[r * p.cols + c]) - mean[r]) * rstd[r];
    sb += g;
  }
  if (p.has_w != 0) dw[i] = sw;
  if (p.has_b != 0) db[p.db_off + i] = sb;
}
#endif
#else
layout(std430, binding = 4) readonly buffer W { VT w[]; };  // a dummy when !has_w
layout(std430, binding = 5) writeonly buffer DX { VT dx[]; };
#ifdef ACC
#if !defined(F16) || !defined(VEC4)
#error "the accumulating dx is the f16 4-wide kernel's"
#endif
layout(std430, binding = 6) readonly buffer ACCB { VT acc[]; };
#endif

shared float red[WG];
#include "reduce.glsl"

#ifdef VEC4
#define MAXQ 8u  // quads per invocation: rows of up to 1024 columns with 32-wide workgroups
void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  const uint q = p.cols / 4u, base = r * q, t = gl_LocalInvocationID.x;
  const float mu = mean[r], rs = rstd[r];
  vec4 gs[MAXQ], xh[MAXQ];  // g = dy * w and xhat per quad
#ifdef ACC
  vec4 ac[MAXQ];  // loaded with dy and x: no second memory latency after the row's sums
#endif
  float s1 = 0.0, s2 = 0.0;
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
    const bool in_row = j < q;
#ifdef ACC
    ac[k] = in_row ? vec4(acc[base + j]) : vec4(0.0);
#endif
    gs[k] = in_row ? vec4(dy[base + j]) * (p.has_w != 0 ? vec4(w[j]) : vec4(1.0)) : vec4(0.0);
    xh[k] = in_row ? (vec4(x[base + j]) - mu) * rs : vec4(0.0);
    s1 += (gs[k].x + gs[k].y) + (gs[k].z + gs[k].w);
    const vec4 gx = gs[k] * xh[k];
    s2 += (gx.x + gx.y) + (gx.z + gx.w);
  }
  const float mg = wg_sum(s1) / float(p.cols);
  const float mgx = wg_sum(s2) / float(p.cols);
  [[unroll]] for (uint k = 0u; k < MAXQ; ++k) {
    const uint j = t + k * WG;
#ifdef ACC
    if (j < q) {
      // dx rounded to f16 and its bits xor'ed with db_off (0 in this kernel, unknown to the compiler): the H200's
      // compiler folded a plain f16 round trip into the add (1 ulp off the separate add's bits).
      const vec4 r = rs * (gs[k] - mg - xh[k] * mgx);
      const uvec2 h = uvec2(packHalf2x16(r.xy), packHalf2x16(r.zw)) ^ uvec2(p.db_off);
      dx[base + j] = VT(ac[k] + vec4(unpackHalf2x16(h.x), unpackHalf2x16(h.y)));
    }
#else
    if (j < q) dx[base + j] = VT(rs * (gs[k] - mg - xh[k] * mgx));
#endif
  }
}
#else

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
#endif  // VEC4
#endif  // PARAMS
