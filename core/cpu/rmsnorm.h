// CPU RMSNorm over the last dim, forward (saves rstd) and backward.
#pragma once
#include "core/ops.h"

namespace alpha::cpu {

ops::RMSNormOut rmsnorm(const Tensor& x, const Tensor& w, double eps);
ops::RMSNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd);

}  // namespace alpha::cpu
