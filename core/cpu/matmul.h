// CPU batched matmul on OpenBLAS (sgemm/dgemm). Transposed views map to BLAS transpose flags, no copy.
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);  // validated by ops::matmul

}  // namespace alpha::cpu
