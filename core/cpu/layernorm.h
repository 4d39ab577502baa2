// CPU LayerNorm over the last dim, forward (saves mean, rstd) and backward.
#pragma once
#include "core/ops.h"

namespace alpha::cpu {

ops::LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                       const Tensor& rstd, bool has_bias);

}  // namespace alpha::cpu
