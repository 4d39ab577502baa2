// Strided copy with dtype conversion, and fill: the primitives behind contiguous(), to() and clone().
#pragma once
#include <vector>

#include "core/tensor.h"

namespace alpha::cpu {

void copy(Tensor& dst, const Tensor& src);  // same shape; any strides; converts between dtypes
void fill(Tensor& dst, double value);
// xs (validated by ops::cat: one dtype, equal sizes but along dim) joined along dim into a new contiguous tensor.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);

}  // namespace alpha::cpu
