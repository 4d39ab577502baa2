// Element-wise binary ops: out[i] = a[i % an] OP b[i % bn]. OP is a specialization constant
// (0 add, 1 sub, 2 mul, 3 div). Variants: F16 (f16 storage, f32 math), VEC4 (4 elements per invocation; with
// F16, 8-byte f16vec4 loads converted element by element, so the bits equal the scalar F16 kernel's; and two
// vectors per invocation, i and i + ceil(n / 2), both loaded before either is computed: 8 bytes in flight per
// operand and invocation left f16 element-wise kernels at ~2.5 TB/s on an H200).
#version 450
#ifdef F16
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "common.glsl"
#include "push_constants.h"

layout(constant_id = 1) const uint OP = 0;
layout(push_constant) uniform Push { BinaryPC p; };

#if defined(VEC4) && defined(F16)
#define STORE_T f16vec4
#define LOAD(v) vec4(v)
#define STORE(v) f16vec4(v)
#elif defined(VEC4)
#define STORE_T vec4
#define LOAD(v) (v)
#define STORE(v) (v)
#elif defined(F16)
#define STORE_T float16_t
#define LOAD(v) float(v)
#define STORE(v) float16_t(v)
#else
#define STORE_T float
#define LOAD(v) (v)
#define STORE(v) (v)
#endif

layout(std430, binding = 0) readonly buffer A { STORE_T a[]; };
layout(std430, binding = 1) readonly buffer B { STORE_T b[]; };
layout(std430, binding = 2) writeonly buffer O { STORE_T o[]; };

#if defined(VEC4)
#define VAL vec4
#else
#define VAL float
#endif
VAL op(VAL x, VAL y) {
  if (OP == 0) return x + y;
  if (OP == 1) return x - y;
  if (OP == 2) return x * y;
  return x / y;
}

#if defined(VEC4) && defined(F16)
void main() {  // vectors i and j = i + ceil(n / 2) (j == i when past the end: loaded twice, stored once)
  const uint i = linear_id(), h = (p.n + 1u) / 2u;
  if (i >= h) return;
  const uint j = i + h < p.n ? i + h : i;
  const VAL x0 = LOAD(a[p.an == p.n ? i : i % p.an]), y0 = LOAD(b[p.bn == p.n ? i : i % p.bn]);
  const VAL x1 = LOAD(a[p.an == p.n ? j : j % p.an]), y1 = LOAD(b[p.bn == p.n ? j : j % p.bn]);
  o[i] = STORE(op(x0, y0));
  if (j != i) o[j] = STORE(op(x1, y1));
}
#else
void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint ia = p.an == p.n ? i : i % p.an;
  const uint ib = p.bn == p.n ? i : i % p.bn;
  o[i] = STORE(op(LOAD(a[ia]), LOAD(b[ib])));
}
#endif
