// CPU reductions over one dim. Each output element is a sequential loop: bit-identical on every run.
#pragma once
#include <utility>

#include "core/tensor.h"

namespace alpha::cpu {

Tensor sum(const Tensor& x, int64_t dim, bool keepdim);                      // dim already wrapped
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim);  // values, i32 first argmax
Tensor sum_all(const Tensor& x);                                             // 0-d

}  // namespace alpha::cpu
