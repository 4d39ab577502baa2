// Philox4x32-10 as in core/rng.{h,cpp} (same as dropout.comp's copy), plus a 64-bit stream position helper.
#ifndef ALPHA_PHILOX_GLSL
#define ALPHA_PHILOX_GLSL

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

// (lo, hi) of base + a * b + c as 64-bit integers (base = (base_lo, base_hi)).
uvec2 pos64(uint base_lo, uint base_hi, uint a, uint b, uint c) {
  uint hi, lo, carry1, carry2;
  umulExtended(a, b, hi, lo);
  lo = uaddCarry(lo, c, carry1);
  lo = uaddCarry(lo, base_lo, carry2);
  return uvec2(lo, hi + base_hi + carry1 + carry2);
}

// One cached Philox block per invocation: consecutive positions reuse the 4 words of their block.
uvec2 philox_cached_block = uvec2(0xFFFFFFFFu, 0xFFFFFFFFu);
uvec4 philox_cached_words = uvec4(0u);

uint philox_word(uvec2 key, uvec2 pos) {
  const uvec2 block = uvec2((pos.x >> 2) | (pos.y << 30), pos.y >> 2);
  if (block != philox_cached_block) {
    philox_cached_block = block;
    philox_cached_words = philox4x32(key, block);
  }
  return philox_cached_words[pos.x & 3u];
}

#endif
