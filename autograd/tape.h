// Tape-based reverse-mode autograd. Each differentiable op records (output, inputs, backward closure) on a
// thread-local tape; backward() walks it newest to oldest, accumulating gradients into Tensor::grad().
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace alpha::ag {

// Returns one gradient per input, in order; an undefined Tensor means "no gradient for this input".
// A gradient may have a broadcast shape: the engine sums it back to the input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

// True when recording is on (not inside a NoGrad scope).
bool grad_enabled();

// Disables recording for its lifetime (evaluation, sampling, optimizer updates).
class NoGrad {
 public:
  NoGrad();
  ~NoGrad();
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;

 private:
  bool prev_;
};

// Records `out = op(inputs)` when grad mode is on and any input requires grad; `out` then requires grad.
// Returns `out` for convenience. `op` must be a string literal (kept by pointer).
Tensor record(const char* op, Tensor out, std::vector<Tensor> inputs, BackwardFn backward);

// Seeds d(loss)/d(loss) = seed (loss must have one element), runs the tape, then clears it. A seed s gives the
// grads of scale(loss, s) without that forward op (which would read a GPU loss back to the host).
// Leaf tensors that require grad end with .grad() set (accumulated if it was already set).
void backward(const Tensor& loss, double seed = 1.0);

// Called once per leaf (parameter) as soon as its gradient is final for this backward: no node left on the
// tape uses it. Data-parallel training starts a bucket's all-reduce there while earlier layers still run.
using LeafReadyFn = std::function<void(const Tensor& leaf)>;
void backward(const Tensor& loss, double seed, const LeafReadyFn& on_leaf_ready);

// Deferred leaf gradients. Inside backward(), where a GPU backend is active and neither a leaf-ready callback nor
// inspection hooks run, a closure may hand a weight's gradient to defer_leaf_grads instead of computing it: the
// job runs after the walk, all jobs back to back (the GPU runs those products side by side, not one short grid
// after another), and every leaf's contributions are still added in the walk's order. The backend may compute the
// deferred products another way (vk: whole K instead of split-K), so their own bits may differ from the walk's.
bool deferring_leaf_grads();
// `job` returns one gradient per leaf (undefined: none); the leaves must be leaf inputs of the running node.
void defer_leaf_grads(std::vector<Tensor> leaves, std::function<std::vector<Tensor>()> job);
// Process-wide switch (default on; off computes every gradient in the walk: train.defer_weight_grads).
void set_defer_leaf_grads(bool on);
int64_t deferred_jobs_run();  // deferred jobs this thread ran (tests: the path was taken)

// Fused accumulation. Inside backward(), a closure whose op can add an input's gradient so far into its own result
// in the same pass (LayerNorm's dx takes the residual stream's gradient: no separate add) takes that gradient out of
// the input's slot and returns the sum as the input's gradient: the same adds in the same order as the walk's
// accumulation. Undefined (nothing taken) where the slot is empty, the input is a leaf with a deferred job pending,
// inspection hooks run (they see each op's own gradient) or the switch is off.
Tensor take_grad(const Tensor& input);
// The same for a gradient that lands on a leaf with a deferred job pending (a tied LM head's weight): inside backward(),
// the closure hands its input's gradient over as fn instead of returning it. fn(acc) gets the gradient so far (undefined
// when none; no other handle remains) and returns acc + the op's gradient, possibly in acc's storage; it runs now,
// or after the pending job in the walk's order. Returns false (nothing taken: return the gradient as usual) where
// take_grad would take nothing for those reasons.
bool contribute_fused(const Tensor& input, std::function<Tensor(Tensor acc)> fn);
// Process-wide switch, on by default (ALPHA_FUSED_ACCUMULATION=0 turns it off); tests compare both, bitwise.
void set_fuse_grad_accumulation(bool on);
bool fuse_grad_accumulation();

// The seed the next backward() is expected to bring (the trainer's loss scale / micro-steps), for its lifetime.
// A loss op whose gradient is a closed form of its inputs (cross-entropy) computes it for this seed in its
// forward pass (one read of the logits, not two) and hands it out when backward() brings that seed; any other
// seed runs the op's plain backward. 0 (the default): none expected.
class ExpectSeed {
 public:
  explicit ExpectSeed(double seed);
  ~ExpectSeed();
  ExpectSeed(const ExpectSeed&) = delete;
  ExpectSeed& operator=(const ExpectSeed&) = delete;

 private:
  double prev_;
};
double expected_seed();

size_t tape_size();
void clear_tape();  // drop recorded ops without running them (e.g. after an eval forward with grad on)

}  // namespace alpha::ag
