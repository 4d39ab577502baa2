// CPU rotary position embedding (rotate-half convention; core/ops.h states the math).
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

// x (B, T, H, D) -> (B, T, H, D); cos, sin (P, D/2); row t at position pos0 + t; inverse rotates back.
// Heads [0, rot_heads) rotate, the rest are copied (core/ops.h).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse, int64_t rot_heads);

}  // namespace alpha::cpu
