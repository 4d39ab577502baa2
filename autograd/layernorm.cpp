// LayerNorm over the last dim; the forward's saved row mean and rstd feed the fused backward.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  ops::LayerNormOut r = ops::layernorm(x, w, b, eps);  // y (..., C), mean/rstd (...)
  const bool has_bias = b.defined();
  return record("layernorm", r.y, {x, w, b}, [x, w, mean = r.mean, rstd = r.rstd, has_bias](const Tensor& g) {
    ops::LayerNormGrads d = ops::layernorm_backward(g, x, w, mean, rstd, has_bias);
    return std::vector<Tensor>{d.dx, d.dw, d.db};
  });
}

}  // namespace alpha::ag
