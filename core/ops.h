// Backend-neutral tensor ops (no autograd). Each function validates its inputs once, then the dispatcher
// (ops.cpp) runs it on the CPU kernels (core/cpu/*) or, when one is active and the op is big enough, on a
// GPU backend (vk/). The differentiable versions built on these live in autograd/ops.h.
//
// Dimension legend: B batch, T time, C channels, H heads, V vocabulary, N rows (= B*T), M/K/N matmul.
#pragma once
#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace alpha::ops {

// ---- layout ----
// contiguous(x): x when already contiguous, else a contiguous copy (any dtype). The copy runs on the GPU when
// the backend wants the size or x's data lives only on the GPU (copying it on the CPU would download it).
Tensor contiguous(const Tensor& x);
Tensor reshape(const Tensor& x, const Shape& shape);  // a view when x is contiguous, else contiguous(x).view
// Narrow's backward: zeros of `shape` with g placed at [start, start + g.size(dim)) along dim.
Tensor narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start);

// ---- element-wise (NumPy broadcasting; float dtypes; result dtype = inputs' dtype, which must match) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor scale(const Tensor& x, double s);       // x * s
Tensor add_scalar(const Tensor& x, double s);  // x + s
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);  // dst += alpha * src (src broadcasts)

// ---- reductions over one dim (negative dims count from the end) ----
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, i32 argmax
Tensor sum_all(const Tensor& x);                         // 0-d
Tensor sum_to(const Tensor& x, const Shape& shape);      // undo broadcasting: sum x down to `shape`

// ---- matmul ----
// a: (..., M, K) [(..., K, M) if trans_a], b: (..., K, N) [(..., N, K) if trans_b] -> (..., M, N).
// Batch dims broadcast (a 2-D weight against a batch is the common case). f32 and f64.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// ---- embedding ----
Tensor embedding(const Tensor& weight, const Tensor& idx);                         // (V,C), i32 (...) -> (..., C)
Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab);  // (..., C) -> (V, C)

// ---- LayerNorm over the last dim; w and b are (C) or undefined ----
struct LayerNormOut {
  Tensor y;     // (..., C)
  Tensor mean;  // (...) f32/f64 like x
  Tensor rstd;  // (...)
};
LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
struct LayerNormGrads {
  Tensor dx, dw, db;  // dw/db undefined when w/b are
};
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias);

// ---- GELU, tanh approximation (GPT-2's) ----
Tensor gelu(const Tensor& x);
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

// ---- softmax over the last dim ----
// causal: x is (..., Tq, Tk); row i may see columns j <= i + (Tk - Tq) (the rest get probability 0).
Tensor softmax(const Tensor& x, bool causal);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);  // y = softmax output

// ---- cross-entropy on integer targets: fused log-softmax + NLL, mean over non-ignored rows ----
struct CrossEntropyOut {
  Tensor loss;    // 0-d, dtype of logits
  Tensor lse;     // (N) f64 row log-sum-exp, saved for backward
  int64_t count;  // rows that were not ignored
};
CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -1);
// dlogits = dloss * (softmax(logits) - onehot(target)) / count; ignored rows get 0.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index = -1);

// ---- dropout ----
// Element at row-major flat index i is kept iff u32_to_unit(philox_at(seed, offset + i)) >= p, and kept
// values are scaled by 1/(1-p). The same call on dy is the backward. p in [0, 1).
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace alpha::ops
