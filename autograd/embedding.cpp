// Embedding lookup: the gradient reaches the weight only (indices are integers), via a scatter-add.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

namespace {
// The weight's gradient, handed to the engine to add into the weight's gradient so far (a tied head's, 38.6M
// elements for GPT-2: only the rows the indices use change) where it can take it.
std::vector<Tensor> embedding_grad(const Tensor& weight, const Tensor& g, const Tensor& idx, int64_t V) {
  if (contribute_fused(weight, [g, idx, V](Tensor acc) { return ops::embedding_backward(g, idx, V, acc); }))
    return {Tensor()};
  return {ops::embedding_backward(g, idx, V)};  // (V, C)
}
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  Tensor out = ops::embedding(weight, idx);  // (V, C), (...) -> (..., C)
  const int64_t V = weight.size(0);
  return record("embedding", out, {weight}, [weight, idx, V](const Tensor& g) {
    return embedding_grad(weight, g, idx, V);
  });
}

Tensor embedding_cast(const Tensor& weight, const Tensor& idx, DType dtype) {
  if (weight.dtype() == dtype) return embedding(weight, idx);
  // A leaf keeps its copy between steps while unwritten (ops::cast_cached), as ag::cast's does.
  const Tensor w = weight.is_leaf() ? ops::cast_cached(weight, dtype) : ops::cast(weight, dtype);
  Tensor out = ops::embedding(w, idx);  // (V, C), (...) -> (..., C) in dtype
  const int64_t V = weight.size(0);
  const DType from = weight.dtype();
  return record("embedding", out, {weight}, [weight, idx, V, from](const Tensor& g) {
    if (from != DType::f32) return std::vector<Tensor>{ops::cast(ops::embedding_backward(g, idx, V), from)};
    return embedding_grad(weight, g, idx, V);  // the f32 gradient cast(weight)'s backward would pass on as is
  });
}

}  // namespace alpha::ag
