// CPU embedding gather and its scatter-add backward (deterministic: each vocab row summed in index order).
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

Tensor embedding(const Tensor& weight, const Tensor& idx);                         // (V,C), (...) -> (..., C)
Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab);  // -> (V, C)

}  // namespace alpha::cpu
