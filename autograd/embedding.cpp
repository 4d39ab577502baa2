// Embedding lookup: the gradient reaches the weight only (indices are integers), via a scatter-add.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  Tensor out = ops::embedding(weight, idx);  // (V, C), (...) -> (..., C)
  const int64_t V = weight.size(0);
  return record("embedding", out, {weight}, [idx, V](const Tensor& g) {
    return std::vector<Tensor>{ops::embedding_backward(g, idx, V)};  // (V, C)
  });
}

}  // namespace alpha::ag
