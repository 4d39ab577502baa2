// Workgroup tree reductions over shared memory (fixed order: deterministic for a fixed WG size).
// Needs: WG (common.glsl's workgroup-size constant, a power of two) and `shared float red[WG];` declared by the
// includer.
#ifndef ALPHA_REDUCE_GLSL
#define ALPHA_REDUCE_GLSL

float wg_sum(float v) {
  const uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  const float r = red[0];
  barrier();  // red is reused by the next reduction
  return r;
}

float wg_max(float v) {
  const uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] = max(red[t], red[t + s]);
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

#endif
