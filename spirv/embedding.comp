// Embedding gather (forward) and its deterministic backward, no atomics. The host sorts positions by vocab row
// (stable) into order[] and cuts each row's run into segments of at most 32 positions (vk/embedding.cpp): a frequent
// row, e.g. a space or a comma, would otherwise serialize thousands of loads in one invocation.
//   SEG:  one invocation per (segment, column) sums dout[order[k], c] over its positions in order -> part[seg, c];
//   ROWS: one invocation per (row v, column c) sums the row's segment partials in order -> dw[v, c] (0 for a row
//         that no position uses).
//   ROWS ACC: the same sums for the rows that positions use only (rows_[] lists them), added in place to the weight's
//         gradient so far: dw[v, c] = dw[v, c] + sum, the walk's separate add (acc + grad) without its pass over the
//         (V, C) rows no position touches (a tied LM head's gradient: 38.6M elements for GPT-2).
// F16: weight, out and dout stored f16; dw stays f32 (a parameter gradient summed over positions).
#version 450
#include "f16.glsl"
#include "common.glsl"
#include "push_constants.h"

layout(push_constant) uniform Push { EmbeddingPC p; };

#ifdef SEG
// n_idx: segments; vocab: unused; splits: unused.
layout(std430, binding = 0) readonly buffer D { ST dout[]; };
layout(std430, binding = 1) readonly buffer Ord { int order_[]; };
layout(std430, binding = 2) readonly buffer Sg { ivec2 seg[]; };  // [first, end) positions in order_
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n_idx * p.cols) return;
  const uint sg = i / p.cols, c = i % p.cols;
  const ivec2 r = seg[sg];
  float s = 0.0;
  for (int k = r.x; k < r.y; ++k) s += float(dout[uint(order_[k]) * p.cols + c]);
  part[i] = s;
}
#elif defined(ROWS) && defined(ACC)
// n_idx: rows listed in rows_; vocab, splits: unused.
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer RS { int row_seg[]; };  // (vocab + 1) first segment of each row
layout(std430, binding = 2) readonly buffer Rows { int rows_[]; };  // the rows that positions use
layout(std430, binding = 3) buffer DW { float dw[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.n_idx * p.cols) return;
  const uint v = uint(rows_[i / p.cols]), c = i % p.cols;
  float s = 0.0;
  for (int k = row_seg[v]; k < row_seg[v + 1]; ++k) s += part[uint(k) * p.cols + c];
  dw[v * p.cols + c] = dw[v * p.cols + c] + s;
}
#elif defined(ROWS)
// vocab rows; splits: unused.
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) readonly buffer RS { int row_seg[]; };  // (vocab + 1) first segment of each row
layout(std430, binding = 2) writeonly buffer DW { float dw[]; };
void main() {
  const uint i = linear_id();
  if (i >= p.vocab * p.cols) return;
  const uint v = i / p.cols, c = i % p.cols;
  float s = 0.0;
  for (int k = row_seg[v]; k < row_seg[v + 1]; ++k) s += part[uint(k) * p.cols + c];
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
