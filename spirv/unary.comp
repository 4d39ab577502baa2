// Element-wise unary ops: OP specialization constant 0 neg, 1 exp, 2 log, 3 sqrt, 4 affine (x*mul+add).
// Variants: VEC4 (4 elements per invocation), F16 (f16 storage, f32 math).
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(constant_id = 1) const uint OP = 0;
layout(push_constant) uniform Push { UnaryPC p; };

#ifdef VEC4
#define T vec4
#else
#define T float
#endif
#ifdef F16
#define BUF_T ST
#else
#define BUF_T T
#endif
layout(std430, binding = 0) readonly buffer X { BUF_T x[]; };
layout(std430, binding = 1) writeonly buffer O { BUF_T o[]; };

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const T v = T(x[i]);
  T r;
  if (OP == 0) r = -v;
  else if (OP == 1) r = exp(v);
  else if (OP == 2) r = log(v);
  else if (OP == 3) r = sqrt(v);
  else r = v * p.mul + p.add;
  o[i] = BUF_T(r);
}
