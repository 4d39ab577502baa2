// Cross-entropy on integer targets. Forward: one workgroup per row writes lse = max + log(sum exp(x - max))
// and the row loss lse - x[target] (0 for ignored rows); vk/ then sums row losses / count. One pass over the row
// (online softmax: each invocation keeps a running max and its sum, rescaled to the row max at the end), so a
// GPT-2 row of 50304 logits is read once, not twice. VEC4 (cols % 4 == 0): 4 logits per load.
// BACKWARD: one invocation per element: dx = scale * (exp(x - lse) - [j == target]), 0 on ignored rows.
// lse is an f64 tensor (core/ops.h), read and written through its bit pattern (f64bits.glsl).
// F16: logits and dx stored f16 (lse, row losses stay f32/f64); math f32. VEC4 (BACKWARD F16): 8 per invocation.
// FUSED (F16 VEC4): the forward also writes the backward's dx for the seed in p.scale (= dloss / count), from the
// row it keeps in registers (CE_FUSED_KEEP vectors per invocation): one read of the logits instead of two. Its lse
// sums in another order than the forward's (so its last bits may differ); dx is the backward's expression on it.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#ifdef FUSED
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require  // f16vec4 registers (shaderFloat16)
#endif
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"
#include "f64bits.glsl"

layout(push_constant) uniform Push { CrossEntropyPC p; };

#if defined(VEC4) && defined(F16)
layout(std430, binding = 0) readonly buffer X { f16vec4 x4[]; };
#elif defined(VEC4)
layout(std430, binding = 0) readonly buffer X { vec4 x4[]; };
#else
layout(std430, binding = 0) readonly buffer X { ST x[]; };
#endif
layout(std430, binding = 1) readonly buffer T { int target[]; };

#if defined(BACKWARD) && defined(VEC4)
// 4 elements of one row per vector (cols % 4 == 0) through 8-byte f16vec4 loads; same per-element math. Two vectors
// per invocation, i and i + ceil(n / 2), their logits loaded first (more bytes in flight: binary.comp).
layout(std430, binding = 2) readonly buffer L { uvec2 lse[]; };
layout(std430, binding = 3) writeonly buffer DX { f16vec4 dx4[]; };
f16vec4 grad4(uint i, vec4 v) {
  const uint r = (4 * i) / p.cols, j = (4 * i) % p.cols;
  const int t = target[r];
  if (t == p.ignore_index) return f16vec4(0.0);
  const float l = f64_bits_to_f32(lse[r]);
  vec4 d;
  for (int e = 0; e < 4; ++e) d[e] = p.scale * (exp(v[e] - l) - (int(j) + e == t ? 1.0 : 0.0));
  return f16vec4(d);
}
void main() {
  const uint n = p.rows * p.cols / 4, i = linear_id(), h = (n + 1u) / 2u;
  if (i >= h) return;
  const uint k = i + h < n ? i + h : i;
  const vec4 v0 = vec4(x4[i]), v1 = vec4(x4[k]);
  dx4[i] = grad4(i, v0);
  if (k != i) dx4[k] = grad4(k, v1);
}
#elif defined(BACKWARD)
layout(std430, binding = 2) readonly buffer L { uvec2 lse[]; };
layout(std430, binding = 3) writeonly buffer DX { ST dx[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.rows * p.cols) return;
  const uint r = i / p.cols, j = i % p.cols;
  const int t = target[r];
  if (t == p.ignore_index) {
    dx[i] = ST(0.0);
    return;
  }
  dx[i] = ST(p.scale * (exp(float(x[i]) - f64_bits_to_f32(lse[r])) - (int(j) == t ? 1.0 : 0.0)));
}
#else
layout(std430, binding = 2) writeonly buffer L { uvec2 lse[]; };
layout(std430, binding = 3) writeonly buffer RL { float row_loss[]; };
#ifdef FUSED
layout(std430, binding = 4) writeonly buffer DX { f16vec4 dx4[]; };
#endif
shared float red[WG];
#include "reduce.glsl"
// Adds logit x to a running (max m, sum s of exp(logit - m)). NaN stays: x > m is false and exp(NaN) joins s.
void add_logit(float x, inout float m, inout float s) {
  if (x > m) {
    s = s * exp(m - x) + 1.0;
    m = x;
  } else {
    s += exp(x - m);
  }
}

void main() {
  const uint r = linear_group();
  if (r >= p.rows) return;
  float m = -1.0 / 0.0, s = 0.0;
#if defined(FUSED)
  // (cols / 4) vectors of the row, vector j = invocation + k * WG kept in keep[k]: registers (the loops unroll).
  const uint base4 = r * (p.cols / 4u), n4 = p.cols / 4u;
  f16vec4 keep[CE_FUSED_KEEP];
  [[unroll]] for (uint k = 0; k < CE_FUSED_KEEP; ++k) {
    const uint j = gl_LocalInvocationID.x + k * WG;
    keep[k] = f16vec4(0.0);
    if (j < n4) keep[k] = x4[base4 + j];
  }
  // Max first, then the exps against it: independent exps, not add_logit's serial chain (few warps per SM here).
  [[unroll]] for (uint k = 0; k < CE_FUSED_KEEP; ++k) {
    if (gl_LocalInvocationID.x + k * WG < n4) {
      const vec4 v = vec4(keep[k]);
      m = max(m, max(max(v.x, v.y), max(v.z, v.w)));  // NaN: max keeps m; exp(NaN - m) below joins s
    }
  }
  [[unroll]] for (uint k = 0; k < CE_FUSED_KEEP; ++k) {
    if (gl_LocalInvocationID.x + k * WG < n4) {
      const vec4 e = exp(vec4(keep[k]) - m);
      s += (e.x + e.y) + (e.z + e.w);
    }
  }
#elif defined(VEC4)
  const uint base4 = r * (p.cols / 4u);
  for (uint j = gl_LocalInvocationID.x; j < p.cols / 4u; j += WG) {
    const vec4 v = vec4(x4[base4 + j]);
    for (int e = 0; e < 4; ++e) add_logit(v[e], m, s);
  }
#else
  const uint base = r * p.cols;
  for (uint j = gl_LocalInvocationID.x; j < p.cols; j += WG) add_logit(float(x[base + j]), m, s);
#endif
  const float mx = wg_max(m);
  const float l = mx + log(wg_sum(s * exp(m - mx)));  // an invocation without logits: 0 * exp(-inf) = 0
  if (gl_LocalInvocationID.x == 0) {
    const int t = target[r];
    lse[r] = f32_to_f64_bits(l);
#ifdef VEC4
    const float xt = t == p.ignore_index ? 0.0 : vec4(x4[base4 + uint(t) / 4u])[uint(t) % 4u];
#else
    const float xt = t == p.ignore_index ? 0.0 : float(x[base + uint(t)]);
#endif
    row_loss[r] = t == p.ignore_index ? 0.0 : l - xt;
  }
#ifdef FUSED
  // The backward kernel's dx (BACKWARD VEC4 grad4): lse through its f64 bits as that kernel reads it.
  const int t = target[r];
  const float lb = f64_bits_to_f32(f32_to_f64_bits(l));
  [[unroll]] for (uint k = 0; k < CE_FUSED_KEEP; ++k) {
    const uint j = gl_LocalInvocationID.x + k * WG;
    if (j < n4) {
      const vec4 v = vec4(keep[k]);
      vec4 d;
      for (int e = 0; e < 4; ++e) d[e] = p.scale * (exp(v[e] - lb) - (int(4 * j) + e == t ? 1.0 : 0.0));
      dx4[base4 + j] = t == p.ignore_index ? f16vec4(0.0) : f16vec4(d);
    }
  }
#endif
}
#endif
