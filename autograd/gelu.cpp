// GELU (tanh approximation); the backward needs only the input.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor gelu(const Tensor& x) {
  return record("gelu", ops::gelu(x), {x}, [x](const Tensor& g) {
    return std::vector<Tensor>{ops::gelu_backward(g, x)};
  });
}

}  // namespace alpha::ag
