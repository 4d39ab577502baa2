// CPU GELU (tanh approximation) and its derivative.
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

Tensor gelu(const Tensor& x);
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

}  // namespace alpha::cpu
