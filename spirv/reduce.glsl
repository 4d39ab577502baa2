// Workgroup tree reductions over shared memory (fixed order: deterministic for a fixed WG size).
// Needs: WG (common.glsl's workgroup-size constant, a power of two) and `shared float red[WG];` declared by the
// includer.
#ifndef ALPHA_REDUCE_GLSL
#define ALPHA_REDUCE_GLSL

// A workgroup of one 32-wide subgroup (the row kernels' WG for rows up to 1024 columns) reduces by xor shuffles
// instead: no shared memory or barriers, and the same bits as the tree (lane 0 adds the tree's pairs in its order,
// and every lane's x + shuffle is its partner's shuffle + x). Includers enable GL_KHR_shader_subgroup_shuffle.
bool one_subgroup() { return WG == 32u && gl_SubgroupSize == 32u; }

float wg_sum(float v) {
  if (one_subgroup()) {
    [[unroll]] for (uint s = 16u; s > 0u; s >>= 1u) v += subgroupShuffleXor(v, s);
    return v;
  }
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
  if (one_subgroup()) {
    [[unroll]] for (uint s = 16u; s > 0u; s >>= 1u) v = max(v, subgroupShuffleXor(v, s));
    return v;
  }
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
