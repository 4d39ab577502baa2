// Shared by attention.comp and attention_bwd.comp: spec constants, storage type macros and view indexing.
// Spec constants: 0 WG (common.glsl; rows or keys owned by a workgroup, one per invocation), 1 HEAD_DIM (D, a
// multiple of 4, <= 128), 2 BLOCK (rows/keys staged in shared memory per step).
#ifndef ALPHA_ATTENTION_GLSL
#define ALPHA_ATTENTION_GLSL

layout(constant_id = 1) const uint HEAD_DIM = 64;
layout(constant_id = 2) const uint BLOCK = 32;
const uint D4 = HEAD_DIM / 4;

// Storage type ST of q, k, v, dO, out and the gradients comes from f16.glsl (-DF16: f16 storage); math is f32,
// lse and the row dots stay f32.
#define LOAD(x) float(x)
#define STORE(x) ST(x)

layout(push_constant) uniform Push { AttentionPC p; };

// Visible keys of query row i: [0, visible(i)).
uint visible(uint i) { return min(p.tk, i + p.shift + 1u); }

// Dropout multiplier of probability (bh, i, j): keep_scale or 0; 1 when dropout is off.
float keep_factor(uint bh, uint i, uint j) {
  if (p.threshold == 0u) return 1.0;
  const uint w = philox_word(uvec2(p.seed_lo, p.seed_hi), pos64(p.off_lo, p.off_hi, bh * p.tq + i, p.tk, j));
  return (w >> 8) >= p.threshold ? p.keep_scale : 0.0;
}

#endif
