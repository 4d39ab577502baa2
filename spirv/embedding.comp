// Embedding gather: out[i, c] = weight[idx[i], c] (indices range-checked on the host).
// BACKWARD (deterministic, no atomics): the host sorts positions by vocab row (stable), giving
// order[] and starts[V + 1]; one invocation per (s, v, c) sums dout[order[k], c] for k = starts[v] + s,
// + splits, ... in order, into partial s (vk/ sums the splits in order; splits > 1 keeps frequent rows, e.g. a
// character vocabulary's space, from serializing thousands of loads in one invocation).
// F16: weight, out and dout stored f16; dw stays f32 (a parameter gradient summed over positions).
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { EmbeddingPC p; };

#ifdef BACKWARD
layout(std430, binding = 0) readonly buffer D { ST dout[]; };
layout(std430, binding = 1) readonly buffer Ord { int order_[]; };
layout(std430, binding = 2) readonly buffer St { int starts[]; };
layout(std430, binding = 3) writeonly buffer DW { float dw[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.splits * p.vocab * p.cols) return;
  const uint vc = i % (p.vocab * p.cols), v = vc / p.cols, c = vc % p.cols;
  float s = 0.0;
  for (int k = starts[v] + int(i / (p.vocab * p.cols)); k < starts[v + 1]; k += int(p.splits))
    s += float(dout[uint(order_[k]) * p.cols + c]);
  dw[i] = s;
}
#else
layout(std430, binding = 0) readonly buffer W { ST weight[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 2) writeonly buffer O { ST o[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n_idx * p.cols) return;
  const uint r = i / p.cols, c = i % p.cols;
  o[i] = weight[uint(idx[r]) * p.cols + c];
}
#endif
