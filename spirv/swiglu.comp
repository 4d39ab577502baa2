// MLP activations of Llama-style blocks, one invocation per element (core/cpu/swiglu.cpp states the math):
// SWIGLU y = silu(g) * u; with BACKWARD dg = dy * u * s * (1 + g * (1 - s)), du = dy * g * s, s = sigmoid(g).
// RELU2 y = max(x, 0)^2; with BACKWARD dx = 2 * max(x, 0) * dy. F16: f16 storage, f32 math. SwiGLU reads g and
// u (and writes dg, du) at SwiGLUPC's index: separate tensors, or the two halves of one packed gate/up tensor.
// VEC4 (RELU2 with F16): 4 elements per invocation through 8-byte f16vec4 loads, each computed as the scalar kernel
// does (same bits); n counts vectors.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

#ifdef SWIGLU
layout(push_constant) uniform Push { SwiGLUPC p; };
uint gate_index(uint i) { return (i / p.cols) * p.row_stride + i % p.cols; }
#else
layout(push_constant) uniform Push { GeluPC p; };
#endif

float sigmoid(float g) { return 1.0 / (1.0 + exp(-g)); }

#if defined(SWIGLU) && defined(BACKWARD)
layout(std430, binding = 0) readonly buffer DY { ST dy[]; };
layout(std430, binding = 1) readonly buffer G { ST g[]; };
layout(std430, binding = 2) readonly buffer U { ST u[]; };
layout(std430, binding = 3) writeonly buffer DG { ST dg[]; };
layout(std430, binding = 4) writeonly buffer DU { ST du[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint j = gate_index(i);
  const float gv = float(g[j]), d = float(dy[i]), s = sigmoid(gv);
  dg[j] = ST(d * float(u[j + p.up_off]) * s * (1.0 + gv * (1.0 - s)));
  du[j + p.up_off] = ST(d * gv * s);
}
#elif defined(SWIGLU)
layout(std430, binding = 0) readonly buffer G { ST g[]; };
layout(std430, binding = 1) readonly buffer U { ST u[]; };
layout(std430, binding = 2) writeonly buffer Y { ST y[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint j = gate_index(i);
  const float gv = float(g[j]);
  y[i] = ST(gv * sigmoid(gv) * float(u[j + p.up_off]));
}
#else
#ifdef VEC4
#define VT f16vec4
#define FT vec4
#else
#define VT ST
#define FT float
#endif
#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer DY { VT dy[]; };
layout(std430, binding = 1) readonly buffer X { VT x[]; };
layout(std430, binding = 2) writeonly buffer DX { VT dx[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  dx[i] = VT(2.0 * max(FT(x[i]), FT(0.0)) * FT(dy[i]));
}
#else
layout(std430, binding = 0) readonly buffer X { VT x[]; };
layout(std430, binding = 1) writeonly buffer Y { VT y[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const FT v = max(FT(x[i]), FT(0.0));
  y[i] = VT(v * v);
}
#endif
#endif
