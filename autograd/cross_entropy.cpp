// Cross-entropy on integer targets (mean over non-ignored rows). The backward rebuilds softmax from the
// saved row log-sum-exp instead of keeping an (N, V) probability tensor alive.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  ops::CrossEntropyOut r = ops::cross_entropy(logits, targets, ignore_index);  // loss 0-d, lse (N)
  const int64_t count = r.count;
  return record("cross_entropy", r.loss, {logits},
                [logits, targets, lse = r.lse, count, ignore_index](const Tensor& g) {
                  return std::vector<Tensor>{
                      ops::cross_entropy_backward(logits, targets, lse, g.item(), count, ignore_index)};
                });
}

}  // namespace alpha::ag
