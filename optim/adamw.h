// AdamW with decoupled weight decay, matching torch.optim.AdamW (amsgrad=False, maximize=False) step for step.
// Runs on the CPU over host memory; each element is updated by one sequential float computation, in the same
// operation order as torch's single-tensor path, so results agree to float rounding.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace alpha {

struct MuonOptions;  // optim/muon.h

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
};

class AdamW {
 public:
  // params: contiguous f32 leaf tensors. Decoupled weight decay applies only to params with dim() >= 2 (not
  // biases, LayerNorm weights or other 1-D params), like nanoGPT's two param groups. Moments m and v are f32
  // tensors of each param's shape, zero-initialized. Throws DTypeError / ValueError on bad params or options.
  AdamW(std::vector<Tensor> params, AdamWOptions opt);
  virtual ~AdamW() = default;  // vk::GpuAdamW runs step() on the GPU with the same state

  // One update with learning rate lr (>= 0, finite). Reads p.grad(); a param whose grad is undefined is skipped
  // (its moments stay as they are). step_count is incremented once per call (one global step, unlike torch's
  // per-param counters: they differ only when some params get no grad), and bias correction uses the new value.
  virtual void step(double lr);
  void zero_grad();  // sets every param's grad undefined
  virtual const char* name() const { return "adamw"; }  // the checkpoint's "optimizer.type"
  virtual const MuonOptions* muon_options() const { return nullptr; }  // Muon's settings (CPU or GPU); else null

  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t n);  // for checkpoint resume; n >= 0
  const std::vector<Tensor>& params() const { return params_; }
  // m and v, one per param (checkpoints save/restore them); step() checks they still match their params.
  std::vector<Tensor>& exp_avg() { return exp_avg_; }
  std::vector<Tensor>& exp_avg_sq() { return exp_avg_sq_; }
  const AdamWOptions& options() const { return opt_; }

 protected:
  // Params another update rule owns (optim/muon.h): step() validates their grads and state like any other but
  // leaves them, their m and v, untouched. Empty = AdamW updates every param.
  std::vector<char> excluded_;

 private:
  std::vector<Tensor> params_;
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
  AdamWOptions opt_;
  int64_t step_count_ = 0;
};

}  // namespace alpha
