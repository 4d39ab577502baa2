// Strided copy with dtype conversion, and fill: the primitives behind contiguous(), to() and clone().
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

void copy(Tensor& dst, const Tensor& src);  // same shape; any strides; converts between dtypes
void fill(Tensor& dst, double value);

}  // namespace alpha::cpu
