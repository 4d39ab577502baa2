// Sum over one dim of x seen as (outer, n, inner), times scale. ROWS (inner == 1): one workgroup per row,
// strided partial sums then a tree reduction. COLS_WG (long columns): a workgroup of 16 row lanes x 16 column units
// per (outer, chunk of rows, block of columns); each lane sums every 16th row of the chunk, then a fixed tree adds the
// 16 lanes. Otherwise (short columns: split-K partials) one invocation per (outer, chunk, column unit) sums its rows
// sequentially. vk/ sums chunk partials again; every order is fixed, so results are deterministic (and bounded
// loops: lavapipe stops any loop after 65535 iterations). IN_F16: f16 input (output f32). VEC4 (inner % 4 == 0): a
// column unit is 4 adjacent columns (8/16-byte loads and stores), each column in the scalar kernel's order.
// LAST (COLS_WG over several chunks): the last workgroup of each (outer, column block) to finish, counted by an
// atomic, sums the block's chunk partials into the output in the order a second pass would (one dispatch, not two).
// OUT2: the output is two buffers, the second from output unit p.split on (e.g. a weight's and a bias's gradients,
// or a norm's dw and db, summed in one dispatch); the values and their order are the one-buffer kernel's.
#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

#ifdef LAST
layout(push_constant) uniform Push { SumLastPC p; };
#else
layout(push_constant) uniform Push { SumPC p; };
#endif

layout(std430, binding = 0) readonly buffer X {
#if defined(IN_F16) && defined(VEC4)
  f16vec4 x[];
#elif defined(IN_F16)
  float16_t x[];
#elif defined(VEC4)
  vec4 x[];
#else
  float x[];
#endif
};
#ifdef VEC4
#define T vec4
#define U 4u  // columns per unit
#else
#define T float
#define U 1u
#endif
#ifdef LAST
// The chunk partials, read back by another workgroup: coherent, so its loads miss no other SM's stores.
layout(std430, binding = 1) coherent buffer O { T o[]; };
layout(std430, binding = 2) writeonly buffer R { T r[]; };
layout(std430, binding = 3) coherent buffer C { uint counters[]; };
shared bool last_group;
#ifdef OUT2
layout(std430, binding = 4) writeonly buffer R2 { T r2[]; };
void put(uint i, T v) {
  if (i < p.split) r[i] = v;
  else r2[i - p.split] = v;
}
#else
void put(uint i, T v) { r[i] = v; }
#endif
#else
layout(std430, binding = 1) writeonly buffer O { T o[]; };
#ifdef OUT2
layout(std430, binding = 2) writeonly buffer O2 { T o2[]; };
void put(uint i, T v) {
  if (i < p.split) o[i] = v;
  else o2[i - p.split] = v;
}
#else
void put(uint i, T v) { o[i] = v; }
#endif
#endif

#ifdef ROWS
shared float red[WG];
#include "reduce.glsl"
void main() {
  const uint r = linear_group();
  if (r >= p.outer) return;  // uniform per workgroup
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < p.n; j += WG) s += float(x[r * p.n + j]);
  s = wg_sum(s);
  if (gl_LocalInvocationID.x == 0) o[r] = s * p.scale;
}
#elif defined(COLS_WG)
#define LANES 16u  // row lanes; WG / LANES column units per workgroup
shared T red[WG];
void main() {
  const uint q = p.inner / U, cw = WG / LANES, blocks = (q + cw - 1) / cw, chunks = (p.n + p.chunk - 1) / p.chunk;
  const uint g = linear_group(), cb = g % blocks, t = g / blocks;  // t = (outer, chunk)
  if (t >= p.outer * chunks) return;  // uniform per workgroup (grid padding)
  const uint kc = t % chunks, ou = t / chunks, lid = gl_LocalInvocationID.x;
  const uint lane = lid / cw, cu = cb * cw + lid % cw;
  const uint k1 = min(p.n, (kc + 1) * p.chunk), base = ou * p.n;
  T s = T(0.0);
  if (cu < q) {
    uint k = kc * p.chunk + lane;
    // Four independent loads in flight, added in row order.
    for (; k + 3u * LANES < k1; k += 4u * LANES) {
      const T a = T(x[(base + k) * q + cu]), b = T(x[(base + k + LANES) * q + cu]);
      const T c = T(x[(base + k + 2u * LANES) * q + cu]), d = T(x[(base + k + 3u * LANES) * q + cu]);
      s += a;
      s += b;
      s += c;
      s += d;
    }
    for (; k < k1; k += LANES) s += T(x[(base + k) * q + cu]);
  }
  red[gl_LocalInvocationID.x] = s;
  // Hazard (each step): the lanes' partials are in shared memory before the tree reads them.
  barrier();
  for (uint h = LANES / 2u; h > 0u; h /= 2u) {
    if (lane < h) red[gl_LocalInvocationID.x] += red[gl_LocalInvocationID.x + h * cw];
    barrier();
  }
#ifndef LAST
  if (lane == 0u && cu < q) put(t * q + cu, red[gl_LocalInvocationID.x] * p.scale);
#else
  if (lane == 0u && cu < q) o[t * q + cu] = red[gl_LocalInvocationID.x];
  // Hazard: this workgroup's partials reach device scope before its arrival is counted (release) ...
  memoryBarrierBuffer();
  barrier();
  const uint ctr = p.counter_off + ou * blocks + cb;
  if (lid == 0u) last_group = atomicAdd(counters[ctr], 1u) == chunks - 1u;
  barrier();
  if (!last_group) return;  // uniform per workgroup
  // ... and the last one sees every chunk's partials after it (acquire).
  memoryBarrierBuffer();
  const uint rows = ou * chunks;
  if (p.seq != 0u) {  // lane 0 adds the chunks in order
    if (lane == 0u && cu < q) {
      T a = T(0.0);
      for (uint c = 0u; c < chunks; ++c) a += o[(rows + c) * q + cu];
      put(ou * q + cu, a * p.scale);
    }
  } else {  // 16 lanes over every 16th chunk, then the fixed tree
    T a = T(0.0);
    if (cu < q)
      for (uint c = lane; c < chunks; c += LANES) a += o[(rows + c) * q + cu];
    red[lid] = a;
    // Hazard (each step): the lanes' sums are in shared memory before the tree reads them.
    barrier();
    for (uint h = LANES / 2u; h > 0u; h /= 2u) {
      if (lane < h) red[lid] += red[lid + h * cw];
      barrier();
    }
    if (lane == 0u && cu < q) put(ou * q + cu, red[lid] * p.scale);
  }
  if (lid == 0u) counters[ctr] = 0u;  // zero again for the next dispatch that takes this window
#endif
}
#else
void main() {
  const uint chunks = (p.n + p.chunk - 1) / p.chunk, q = p.inner / U;  // q: column units per row
  const uint i = linear_id();
  if (i >= p.outer * chunks * q) return;
  const uint cu = i % q, t = i / q, kc = t % chunks, ou = t / chunks;
  const uint k1 = min(p.n, (kc + 1) * p.chunk), base = ou * p.n;
  T s = T(0.0);
  uint k = kc * p.chunk;
  // Four independent loads in flight, added in row order (one load per add left a split-K sum latency-bound).
  for (; k + 4u <= k1; k += 4u) {
    const T a = T(x[(base + k) * q + cu]), b = T(x[(base + k + 1u) * q + cu]);
    const T c = T(x[(base + k + 2u) * q + cu]), d = T(x[(base + k + 3u) * q + cu]);
    s += a;
    s += b;
    s += c;
    s += d;
  }
  for (; k < k1; ++k) s += T(x[(base + k) * q + cu]);
  put(i, s * p.scale);  // (outer, chunk) row t, unit cu
}
#endif
