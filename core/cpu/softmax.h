// CPU row softmax (max-subtracted) with optional causal mask, and its backward.
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

Tensor softmax(const Tensor& x, bool causal);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);

}  // namespace alpha::cpu
