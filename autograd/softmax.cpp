// Softmax over the last dim; the backward needs only the output (masked entries are 0 there, so get 0 grad).
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor softmax(const Tensor& x, bool causal) {
  Tensor y = ops::softmax(x, causal);
  return record("softmax", y, {x}, [y](const Tensor& g) {
    return std::vector<Tensor>{ops::softmax_backward(g, y)};
  });
}

}  // namespace alpha::ag
