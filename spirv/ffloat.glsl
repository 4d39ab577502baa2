// Float-float helpers shared by adamw.comp and muon.comp. Include after common.glsl; define FFLOAT_REDUCE (and
// have WG) for the workgroup float-float sum.
// The CPU's float ops are correctly rounded and its std::fma is fused; on the GPU fma() may be unfused (lavapipe),
// a / b may be a * (1 / b) and sqrt may go through rsqrt (Vulkan allows ~2.5 ulp). So: an exact product by
// Veltkamp/Dekker splitting (plain `precise` mul/add), a fused multiply-add built on it, and division and sqrt
// corrected with an exact residual (Markstein). The update then matches the CPU's bits except in rare
// double-rounding cases.
// FUSED_FMA (the `_ffma` twins, run where vk/adamw.cpp's probe finds fma() fused): the product's error as one
// fma, 2 operations instead of 17. The error is exact either way, so both give the same bits (subnormal errors aside).
vec2 two_prod(float a, float b) {  // a*b == hi + lo exactly (no overflow for |a|, |b| < 2^100)
  precise float p = a * b;
#ifdef FUSED_FMA
  precise float fe = fma(a, b, -p);
  return vec2(p, fe);
#endif
  precise float ca = 4097.0 * a;
  precise float ah = ca - (ca - a);
  precise float al = a - ah;
  precise float cb = 4097.0 * b;
  precise float bh = cb - (cb - b);
  precise float bl = b - bh;
  precise float e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return vec2(p, e);
}
float fma_rn(float a, float b, float c) {
  const vec2 pr = two_prod(a, b);
  precise float s = pr.x + c;
  precise float bb = s - pr.x;
  precise float t = (pr.x - (s - bb)) + (c - bb);
  precise float r = s + (t + pr.y);
  return r;
}
float div_rn(float a, float b) {
  precise float q = a / b;
  if (q == 0.0 || isinf(q) || isnan(q)) return q;
  precise float r = fma_rn(-q, b, a);
  precise float q1 = q + r / b;
  return q1;
}
float sqrt_rn(float x) {
  precise float s = sqrt(x);
  if (!(s > 0.0) || isinf(s)) return s;
  precise float r = fma_rn(-s, s, x);
  precise float s1 = s + r / (2.0 * s);
  return s1;
}

#ifdef FFLOAT_REDUCE
// Float-float arithmetic (hi + lo); `precise` forbids contraction and reassociation, which would break it.
vec2 dd_add(vec2 a, vec2 b) {
  precise float s = a.x + b.x;
  precise float bb = s - a.x;
  precise float e = (a.x - (s - bb)) + (b.x - bb);
  precise float lo = e + (a.y + b.y);
  precise float hi = s + lo;
  precise float lo2 = lo - (hi - s);
  return vec2(hi, lo2);
}
vec2 dd_square(float x) { return two_prod(x, x); }  // x*x exactly as hi + lo
shared vec2 red2[WG];
vec2 wg_dd_sum(vec2 v) {
  const uint t = gl_LocalInvocationID.x;
  red2[t] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red2[t] = dd_add(red2[t], red2[t + s]);
    barrier();
  }
  return red2[0];
}
#endif

