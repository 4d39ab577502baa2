// CPU fused attention (the readable oracle for spirv/attention*.comp): per (b, h) plain loops, P recomputed
// from q, k and the saved row log-sum-exp in the backward. Contracts in core/ops.h (ops::attention).
#pragma once
#include "core/ops.h"

namespace alpha::cpu {

ops::AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& ap);
ops::AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, const ops::AttentionParams& ap,
                                       bool packed = false);

}  // namespace alpha::cpu
