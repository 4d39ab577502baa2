// CPU dropout with a counter-based (Philox) mask: identical to the GPU kernel's for the same (seed, offset).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace alpha::cpu {

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

}  // namespace alpha::cpu
