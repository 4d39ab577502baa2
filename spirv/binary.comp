// Element-wise binary ops: out[i] = a[i % an] OP b[i % bn]. OP is a specialization constant
// (0 add, 1 sub, 2 mul, 3 div). Variants: F16 (f16 storage, f32 math), VEC4 (4 elements per invocation; with
// F16, 8-byte f16vec4 loads converted element by element, so the bits equal the scalar F16 kernel's).
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

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  const uint ia = p.an == p.n ? i : i % p.an;
  const uint ib = p.bn == p.n ? i : i % p.bn;
#ifdef VEC4
  const vec4 x = LOAD(a[ia]), y = LOAD(b[ib]);
  vec4 r;
#else
  const float x = LOAD(a[ia]), y = LOAD(b[ib]);
  float r;
#endif
  if (OP == 0) r = x + y;
  else if (OP == 1) r = x - y;
  else if (OP == 2) r = x * y;
  else r = x / y;
  o[i] = STORE(r);
}
