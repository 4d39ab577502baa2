// CPU batched matmul on oneDNN (f32; OpenBLAS with ALPHA_CPU_GEMM=openblas) and OpenBLAS (f64). Transposed views
// map to BLAS transpose flags, no copy.
#pragma once
#include <string>

#include "core/tensor.h"

namespace alpha::cpu {

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b);  // validated by ops::matmul
std::string blas_info();  // OpenBLAS build and the kernel core it picked for this CPU
void blas_setup();        // once, before the first BLAS call: OpenBLAS single-threaded, kernels fit for this CPU
// Row-major C (M, N) = alpha op(A) op(B), overwritten, on the calling thread (callers split work over the pool).
void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
           int64_t ldb, float* C, int64_t ldc);

}  // namespace alpha::cpu
