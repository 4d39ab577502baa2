// f32 <-> f64 through bit patterns (uvec2: low word, high word) for devices without shaderFloat64:
// lets kernels read/write the f64 tensors the CPU contract uses (cross-entropy lse) while computing in f32.
// f32 denormals become signed zero; inf and NaN are preserved; f64 -> f32 rounds to nearest even.
#ifndef ALPHA_F64BITS_GLSL
#define ALPHA_F64BITS_GLSL

uvec2 f32_to_f64_bits(float f) {
  const uint b = floatBitsToUint(f);
  const uint sign = b & 0x80000000u, e = (b >> 23) & 0xFFu, m = b & 0x7FFFFFu;
  if (e == 0u) return uvec2(0u, sign);
  const uint e64 = e == 0xFFu ? 0x7FFu : e + 896u;  // rebias 127 -> 1023
  return uvec2(m << 29, sign | (e64 << 20) | (m >> 3));
}

float f64_bits_to_f32(uvec2 d) {
  const uint sign = d.y & 0x80000000u, e64 = (d.y >> 20) & 0x7FFu;
  const uint mant = ((d.y & 0xFFFFFu) << 3) | (d.x >> 29), rest = d.x & 0x1FFFFFFFu;
  if (e64 == 0x7FFu) return uintBitsToFloat(sign | 0x7F800000u | mant | (rest != 0u ? 1u : 0u));  // inf/NaN
  if (e64 <= 896u) return uintBitsToFloat(sign);                  // below f32's normal range
  if (e64 >= 896u + 255u) return uintBitsToFloat(sign | 0x7F800000u);  // overflow
  uint bits = sign | ((e64 - 896u) << 23) | mant;
  if (rest > 0x10000000u || (rest == 0x10000000u && (mant & 1u) != 0u)) bits += 1u;  // carry may bump exponent
  return uintBitsToFloat(bits);
}

#endif
