// CPU batched matmul on OpenBLAS (sgemm/dgemm). Transposed views map to BLAS transpose flags, no copy.
#pragma once
#include <string>

#include "core/tensor.h"

namespace alpha::cpu {

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);  // validated by ops::matmul
std::string blas_info();  // OpenBLAS build and the kernel core it picked for this CPU
void blas_setup();        // once, before the first BLAS call: OpenBLAS single-threaded, kernels fit for this CPU

}  // namespace alpha::cpu
