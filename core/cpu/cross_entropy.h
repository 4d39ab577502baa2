// CPU fused log-softmax + NLL on integer targets, and its backward.
#pragma once
#include "core/ops.h"

namespace alpha::cpu {

ops::CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index);
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index);

}  // namespace alpha::cpu
