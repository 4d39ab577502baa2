// GPU-resident AdamW (vk/adamw.cpp), mirroring optim/adamw.cpp, optim/clip.cpp and optim/loss_scale.cpp.
// stats: [0] loss sum, [1] grad norm, [2] grad coefficient (unscale x clip), [3] skip flag (1 = step vetoed).
// Variants:
//   (default)  UPDATE: one invocation per element of one param; nothing when stats[3] is set (a vetoed step
//              leaves p, m, v bit-identical); else g = grad * stats[2] (the unscale and clip coefficient), then
//              p = p * decay (>= 2-D params only); m = fma(1-b1, g, m*b1); v = fma((1-b2)*g, g, v*b2) (exact);
//              p = p + (neg_step * m) / (sqrt(v) / bc2_sqrt + eps), in the CPU's operation order. VEC4: four
//              elements per invocation through 16-byte loads (n % 4 == 0), each updated as the scalar kernel does.
//              H16: also writes the f16 copy of the updated param (ops::cast_cached's copy; the cast's rounding).
//   NORM_PARTIAL: sum of squares of each grad (up to ADAMW_NORM_GRADS per dispatch) times inv_scale (f16 loss
//              scaling: the unscaled grad, like LossScaler::unscale; 1 otherwise), one (hi, lo) float-float partial
//              per workgroup of CHUNK elements, written at partials[out_offset + group]. Float-float (~44-bit)
//              sums track the CPU's double sum.
//   NORM_FINAL: one workgroup sums every partial in a fixed order; stats[1] = norm, stats[2] = inv_scale * clip
//              scale (max_norm / (norm + 1e-6) when max_norm > 0 and norm > max_norm, else 1, like
//              clip_grad_norm), stats[3] = 1 when the norm (or, with check_loss, the loss sum) is not finite:
//              the numerics guard's skip and the loss scaler's overflow, decided before the update runs.
//   LOSS:      stats[0] = (first ? 0 : stats[0]) + loss[0]: the step's loss summed over micro-batches.
//   MULTI:     UPDATE with VEC4 and H16 for up to ADAMW_MULTI (6) params per dispatch (each param's workgroups from
//              first[w]), per-param decay and f16-copy flags: one dispatch where GPT-2's ~100 small params (biases,
//              norms) each took one, and the same operations per element (same bits).
// Every reduction has a fixed order (no atomics), so results are bit-identical run to run.
#version 450
#extension GL_EXT_control_flow_attributes : require
#if defined(H16) || defined(MULTI)
#extension GL_EXT_shader_16bit_storage : require
#endif
#include "common.glsl"
#include "push_constants.h"

#if defined(NORM_PARTIAL) || defined(NORM_FINAL)
#define FFLOAT_REDUCE
#endif
#include "ffloat.glsl"

#if !defined(NORM_PARTIAL) && !defined(NORM_FINAL) && !defined(LOSS)
// One element's update with coefficients c, in optim/adamw.cpp's operation order: (p, g, m, v) -> (p, m, v).
void update(inout float pv, float g0, inout float mv, inout float vv, float gscale, bool decay, AdamWPC c) {
  if (decay) pv = pv * c.decay;
  precise float gi = g0 * gscale;
  precise float mi = fma_rn(c.omb1, gi, mv * c.b1);
  precise float vi = fma_rn(c.omb2 * gi, gi, vv * c.b2);
  precise float denom = div_rn(sqrt_rn(vi), c.bc2_sqrt) + c.eps;
  pv = pv + div_rn(c.neg_step * mi, denom);
  mv = mi;
  vv = vi;
}
#endif

#if defined(NORM_PARTIAL)
layout(push_constant) uniform Push { AdamWNormPC p; };
// Up to ADAMW_NORM_GRADS grads per dispatch (unused bindings repeat the last one); grad w's partials are the
// groups [first[w], first[w] + ceil(n[w] / CHUNK)), written at out_offset + group as with one grad per dispatch.
layout(std430, binding = 0) readonly buffer G0 { float g0[]; };
layout(std430, binding = 1) readonly buffer G1 { float g1[]; };
layout(std430, binding = 2) readonly buffer G2 { float g2[]; };
layout(std430, binding = 3) readonly buffer G3 { float g3[]; };
layout(std430, binding = 4) readonly buffer G4 { float g4[]; };
layout(std430, binding = 5) readonly buffer G5 { float g5[]; };
layout(std430, binding = 6) readonly buffer G6 { float g6[]; };
layout(std430, binding = 7) readonly buffer G7 { float g7[]; };
layout(std430, binding = ADAMW_NORM_GRADS) buffer P { vec2 partials[]; };
void main() {
  const uint grp = linear_group();
  uint w = 0u;
  for (uint k = 1u; k < ADAMW_NORM_GRADS; ++k)
    if (k < p.count && grp >= p.first[k]) w = k;
  const uint base = (grp - p.first[w]) * WG * ADAMW_NORM_ITEMS;
  if (base >= p.n[w]) return;  // uniform per workgroup (grid padding)
  // Every load of the chunk in flight first, then the float-float sum in the same order. One switch around all the
  // loads (not one per load), so no branch sits between them.
  float gv[ADAMW_NORM_ITEMS];
#define LOAD_CHUNK(buf)                                                  \
  [[unroll]] for (uint k = 0; k < ADAMW_NORM_ITEMS; ++k) {               \
    const uint i = base + k * WG + gl_LocalInvocationID.x;               \
    gv[k] = i < p.n[w] ? buf[i] : 0.0;                                   \
  }
  switch (w) {
    case 0u: LOAD_CHUNK(g0) break;
    case 1u: LOAD_CHUNK(g1) break;
    case 2u: LOAD_CHUNK(g2) break;
    case 3u: LOAD_CHUNK(g3) break;
    case 4u: LOAD_CHUNK(g4) break;
    case 5u: LOAD_CHUNK(g5) break;
    case 6u: LOAD_CHUNK(g6) break;
    default: LOAD_CHUNK(g7) break;
  }
#undef LOAD_CHUNK
  vec2 acc = vec2(0.0);
  [[unroll]] for (uint k = 0; k < ADAMW_NORM_ITEMS; ++k) {
    // inv_scale is a power of two in practice, so g * inv_scale is exact, as on the CPU.
    if (base + k * WG + gl_LocalInvocationID.x >= p.n[w]) continue;
    precise float gi = gv[k] * p.inv_scale;
    acc = dd_add(acc, dd_square(gi));
  }
  acc = wg_dd_sum(acc);
  if (gl_LocalInvocationID.x == 0) partials[p.out_offset + grp] = acc;
}
#elif defined(NORM_FINAL)
const float FLT_MAX = 3.40282347e38;
layout(push_constant) uniform Push { AdamWFinalPC p; };
layout(std430, binding = 0) readonly buffer P { vec2 partials[]; };
layout(std430, binding = 1) buffer S { float stats[]; };
void main() {
  vec2 acc = vec2(0.0);
  for (uint i = gl_LocalInvocationID.x; i < p.parts; i += WG) acc = dd_add(acc, partials[i]);
  acc = wg_dd_sum(acc);
  if (gl_LocalInvocationID.x != 0) return;
  // sqrt(hi + lo) with one Newton step in float-float: the f32 norm the CPU's double sqrt rounds to.
  precise float s = sqrt_rn(acc.x);
  precise float r = fma_rn(-s, s, acc.x) + acc.y;
  precise float norm = s > 0.0 && s <= FLT_MAX ? s + div_rn(r, 2.0 * s) : s;  // inf stays inf (not NaN)
  float scale = 1.0;
  if (p.max_norm > 0.0 && norm > p.max_norm) scale = div_rn(p.max_norm, norm + 1e-6);
  // !(|x| <= max) is true for inf and NaN alike, without isnan (which a compiler may assume false).
  const bool skip = !(abs(norm) <= FLT_MAX) || (p.check_loss != 0 && !(abs(stats[0]) <= FLT_MAX));
  precise float coef = p.inv_scale * scale;  // exact for a power-of-two inv_scale: (g * inv) * c == g * (inv * c)
  stats[1] = norm;
  stats[2] = coef;
  stats[3] = skip ? 1.0 : 0.0;
}
#elif defined(LOSS)
layout(push_constant) uniform Push { AdamWLossPC p; };
layout(std430, binding = 0) readonly buffer L { float loss[]; };
layout(std430, binding = 1) buffer S { float stats[]; };
void main() {
  if (linear_id() != 0) return;
  stats[0] = (p.first != 0 ? 0.0 : stats[0]) + loss[0];
}
#elif defined(MULTI)
layout(push_constant) uniform Push { AdamWMultiPC p; };
// Param w's p, g, m, v and f16 copy at bindings w, 6 + w, 12 + w, 18 + w, 24 + w (ADAMW_MULTI = 6: lavapipe binds
// 32 storage buffers per stage; unused slots repeat the last param's; a param without an f16 copy binds a
// placeholder that is never written); stats at 30.
#define DECL6(first, qual, T, name) \
  layout(std430, binding = first + 0) qual buffer name##B0 { T name##0[]; }; \
  layout(std430, binding = first + 1) qual buffer name##B1 { T name##1[]; }; \
  layout(std430, binding = first + 2) qual buffer name##B2 { T name##2[]; }; \
  layout(std430, binding = first + 3) qual buffer name##B3 { T name##3[]; }; \
  layout(std430, binding = first + 4) qual buffer name##B4 { T name##4[]; }; \
  layout(std430, binding = first + 5) qual buffer name##B5 { T name##5[]; };
DECL6(0, , vec4, prm)
DECL6(6, readonly, vec4, grd)
DECL6(12, , vec4, mom)
DECL6(18, , vec4, vel)
DECL6(24, writeonly, f16vec4, hlf)
layout(std430, binding = 30) readonly buffer S { float stats[]; };
// Element i of param w's buffers (w is workgroup-uniform): switches, so every binding is indexed statically.
#define GET6(name) \
  vec4 get_##name(uint w, uint i) { \
    switch (w) { \
      case 0u: return name##0[i]; case 1u: return name##1[i]; case 2u: return name##2[i]; \
      case 3u: return name##3[i]; case 4u: return name##4[i]; default: return name##5[i]; \
    } \
  }
#define SET6(name, T) \
  void set_##name(uint w, uint i, vec4 x) { \
    switch (w) { \
      case 0u: name##0[i] = T(x); break; case 1u: name##1[i] = T(x); break; case 2u: name##2[i] = T(x); break; \
      case 3u: name##3[i] = T(x); break; case 4u: name##4[i] = T(x); break; default: name##5[i] = T(x); break; \
    } \
  }
GET6(prm)
GET6(grd)
GET6(mom)
GET6(vel)
SET6(prm, vec4)
SET6(mom, vec4)
SET6(vel, vec4)
SET6(hlf, f16vec4)
void main() {
  const uint grp = linear_group();
  uint w = 0u;
  for (uint k = 1u; k < ADAMW_MULTI; ++k)
    if (k < p.count && grp >= p.first[k]) w = k;
  const uint i = (grp - p.first[w]) * WG + gl_LocalInvocationID.x;
  if (i >= p.n[w] / 4u) return;
  precise vec4 pv = get_prm(w, i), mv = get_mom(w, i), vv = get_vel(w, i);
  const vec4 gv = get_grd(w, i);
  if (stats[3] != 0.0) return;  // a vetoed step (non-finite grads or loss) changes nothing
  const float gscale = stats[2];
  const bool decay = ((p.decay_mask >> w) & 1u) != 0u;
  for (uint e = 0u; e < 4u; ++e) {
    precise float pe = pv[e], me = mv[e], ve = vv[e];
    update(pe, gv[e], me, ve, gscale, decay, p.c);
    pv[e] = pe;
    mv[e] = me;
    vv[e] = ve;
  }
  set_prm(w, i, pv);
  set_mom(w, i, mv);
  set_vel(w, i, vv);
  if (((p.h16_mask >> w) & 1u) != 0u) set_hlf(w, i, pv);  // the cast's rounding, as H16
}
#else
layout(push_constant) uniform Push { AdamWPC p; };
#ifdef VEC4  // 16-byte loads, four elements per invocation (n % 4 == 0), each with the scalar kernel's operations
#define T vec4
#define W 4u
#else
#define T float
#define W 1u
#endif
layout(std430, binding = 0) buffer Prm { T prm[]; };
layout(std430, binding = 1) readonly buffer G { T g[]; };
layout(std430, binding = 2) buffer M { T m[]; };
layout(std430, binding = 3) buffer V { T v[]; };
layout(std430, binding = 4) readonly buffer S { float stats[]; };
#ifdef H16
#ifdef VEC4
#define HT f16vec4
#else
#define HT float16_t
#endif
layout(std430, binding = 5) writeonly buffer H { HT h[]; };
#endif
void main() {
  const uint i = linear_id();
  if (i >= p.n / W) return;
  // The operands' loads go out with the coefficient's (not after it: one memory latency per invocation, not two).
  precise T pv = prm[i], mv = m[i], vv = v[i];
  const T gv = g[i];
  if (stats[3] != 0.0) return;  // a vetoed step (non-finite grads or loss) changes nothing
  const float gscale = stats[2];
#ifdef VEC4
  for (uint e = 0u; e < 4u; ++e) {
    precise float pe = pv[e], me = mv[e], ve = vv[e];
    update(pe, gv[e], me, ve, gscale, p.apply_decay != 0, p);
    pv[e] = pe;
    mv[e] = me;
    vv[e] = ve;
  }
#else
  update(pv, gv, mv, vv, gscale, p.apply_decay != 0, p);
#endif
  prm[i] = pv;
  m[i] = mv;
  v[i] = vv;
#ifdef H16
  h[i] = HT(pv);
#endif
}
#endif
