// CPU MLP activations of Llama-style blocks: SwiGLU (silu(gate) * up) and ReLU² (max(x, 0)^2), with backwards.
#pragma once
#include "core/ops.h"

namespace alpha::cpu {

Tensor swiglu(const Tensor& gate, const Tensor& up);
ops::SwiGLUGrads swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up);
Tensor relu2(const Tensor& x);
Tensor relu2_backward(const Tensor& dy, const Tensor& x);

}  // namespace alpha::cpu
