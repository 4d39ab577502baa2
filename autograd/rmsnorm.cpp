// RMSNorm over the last dim (Llama); the forward's saved row rstd feeds the fused backward.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  ops::RMSNormOut r = ops::rmsnorm(x, w, eps);  // y (..., C), rstd (...)
  return record("rmsnorm", r.y, {x, w}, [x, w, rstd = r.rstd](const Tensor& g) {
    ops::RMSNormGrads d = ops::rmsnorm_backward(g, x, w, rstd);
    return std::vector<Tensor>{d.dx, d.dw};
  });
}

}  // namespace alpha::ag
