// CPU element-wise kernels: plain loops over strided rows (see strided.h); the readable oracle for the GPU.
#pragma once
#include "core/tensor.h"

namespace alpha::cpu {

enum class BinaryOp { add, sub, mul, div };
enum class UnaryOp { neg, exp, log, sqrt };

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);  // broadcasting, same float dtype
Tensor unary(UnaryOp op, const Tensor& x);
Tensor affine(const Tensor& x, double mul, double add);          // x * mul + add
void add_inplace(Tensor& dst, const Tensor& src, double alpha);  // dst += alpha * src (src broadcasts)

}  // namespace alpha::cpu
