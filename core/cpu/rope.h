// CPU rotary position embedding (rotate-half convention; core/ops.h states the math).
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

// x (B, T, H, D) -> (B, T, H, D); cos, sin (P, D/2); row t at position pos0 + t; inverse rotates back.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse);

}  // namespace alpha::cpu
