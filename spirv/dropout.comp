// Dropout with a Philox4x32-10 mask bit-identical to core/rng.{h,cpp}: element i uses word (pos & 3) of
// block pos >> 2, pos = offset + i (64-bit), key = seed. Kept iff (word >> 8) >= threshold (the exact
// integer form of u32_to_unit(word) >= p); kept values are scaled. F16: f16 storage, f32 math.
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { DropoutPC p; };

layout(std430, binding = 0) readonly buffer X { ST x[]; };
layout(std430, binding = 1) writeonly buffer O { ST o[]; };

uvec4 philox4x32(uvec2 key, uvec2 counter) {
  const uint M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint c0 = counter.x, c1 = counter.y, c2 = 0u, c3 = 0u, k0 = key.x, k1 = key.y;
  for (int r = 0; r < 10; ++r) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(M0, c0, hi0, lo0);
    umulExtended(M1, c2, hi1, lo1);
    const uint n0 = hi1 ^ c1 ^ k0;
    const uint n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += W0;
    k1 += W1;
  }
  return uvec4(c0, c1, c2, c3);
}

void main() {
  const uint i = linear_id();
  if (i >= p.n) return;
  uint carry;
  const uint lo = uaddCarry(p.off_lo, i, carry);
  const uint hi = p.off_hi + carry;
  // block = pos >> 2 as a 64-bit (lo, hi) pair
  const uvec2 block = uvec2((lo >> 2) | (hi << 30), hi >> 2);
  const uint word = philox4x32(uvec2(p.seed_lo, p.seed_hi), block)[lo & 3u];
  o[i] = ST((word >> 8) >= p.threshold ? float(x[i]) * p.scale : 0.0);
}
