// Cross-entropy on integer targets (mean over non-ignored rows). The backward rebuilds softmax from the
// saved row log-sum-exp instead of keeping an (N, V) probability tensor alive. Where the backward's seed is
// known before the forward (ag::ExpectSeed: the trainer's), the forward computes dlogits for it in the same
// pass over the logits and the backward hands them out; another seed takes the plain backward.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  // The seed as backward() will hand it over: a tensor of the loss's dtype (f32 but for f64 logits).
  const double seed = logits.dtype() == DType::f64 ? expected_seed() : double(float(expected_seed()));
  const bool fuse = seed != 0.0 && grad_enabled() && logits.requires_grad();
  ops::CrossEntropyOut r = fuse ? ops::cross_entropy_fused(logits, targets, ignore_index, seed)  // + dlogits (N, V)
                                : ops::cross_entropy(logits, targets, ignore_index);             // loss 0-d, lse (N)
  const int64_t count = r.count;
  return record("cross_entropy", r.loss, {logits},
                [logits, targets, lse = r.lse, count, ignore_index, seed, dl = r.dlogits](const Tensor& g) {
                  if (dl.defined() && g.item() == seed) return std::vector<Tensor>{dl};
                  return std::vector<Tensor>{
                      ops::cross_entropy_backward(logits, targets, lse, g.item(), count, ignore_index)};
                });
}

}  // namespace alpha::ag
