// GpuAdamW: optim/adamw.h's AdamW with its update, the global grad norm and the clip scale computed on the GPU
// (spirv/adamw.comp), so a training step reads nothing back before the update (optim.device "gpu").
// Same state as the CPU AdamW (params, m, v, step count) and the same formulas in the same float order; the
// state lives on the GPU: after a step the params' and moments' host copies are stale, and reading them
// (checkpoints: exp_avg()/exp_avg_sq()) downloads them through Storage, writing them (resume) uploads them at
// the next step. The CPU AdamW stays the reference; tests/test_vk_adamw.cpp compares the two.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

// Whether this device's fma() rounds once, probed with spirv/fma_probe.comp (the product errors of pairs spread over
// exponents, against the exact ones computed here): the `_ffma` kernels' float-float products then give the emulated
// ones' bits with 2 operations instead of 17. ALPHA_VK_FUSED_FMA=0 keeps the emulation; anything but 0, 1 or auto is
// a ValueError; 1 fails where the probe does not pass (ValueError), as a forced mode should.
bool fused_fma(Runtime& rt);

class GpuAdamW : public AdamW {
 public:
  // params: f32, contiguous, offset 0 (the GPU accepts them: ValueError otherwise). Small params that the
  // dispatcher keeps on the CPU are uploaded at the first step and then stay on the GPU.
  GpuAdamW(VulkanBackend& backend, std::vector<Tensor> params, AdamWOptions opt);

  void step(double lr) override { clip_and_step(lr, 0.0); }  // no clipping (the norm is still computed)

  // Records one optimizer step: the global L2 norm of every defined grad times inv_scale (deterministic
  // fixed-order sums), the coefficient inv_scale * min(1, max_norm / (norm + 1e-6)) like LossScaler::unscale then
  // optim/clip.cpp (max_norm <= 0: no clipping; inv_scale = 1 / the f16 loss scale, else 1) and the AdamW update
  // of each param with a grad, reading the coefficient on the GPU. Nothing is read back. The step is vetoed on
  // the GPU when the norm (or the loss sum, if add_loss ran since the last step) is not finite: params, m and v
  // stay bit-identical, and read_stats() takes back the step count (as if step() had not been called).
  // Params another rule owns (excluded_: vk/muon.h) count in the norm but get no AdamW update.
  virtual void clip_and_step(double lr, double max_norm, double inv_scale = 1.0);
  // Adds a 0-d f32 loss to the step's loss sum on the GPU; first = true starts a new sum.
  void add_loss(const Tensor& loss, bool first);

  struct Stats {
    double loss = NAN;        // sum of the losses added since the last first = true
    double grad_norm = NAN;   // pre-clip global norm of the last clip_and_step
    double clip_scale = NAN;  // factor the grads were scaled by: inv_scale x clip (inv_scale = not clipped)
    bool skipped = false;     // the last clip_and_step was vetoed (non-finite norm or loss): nothing changed
  };
  // One host read (waits for the queued work). After a vetoed step it sets step_count() back; a clip_and_step
  // whose stats were not read is read by the next clip_and_step, so the count is right before it is used.
  // After request_stats(), it waits for that step's submission alone (vk::LazyQueue::download_async).
  Stats read_stats();
  // Queues the read-back of the last clip_and_step's stats and submits, so the host can record the next step's
  // forward before read_stats() (train.overlap_steps): the GPU is not drained between steps.
  void request_stats();
  const std::string& ffma() const { return ffma_; }  // the kernels' suffix: "_ffma" where fused_fma(), else ""

 protected:
  Runtime& runtime() { return rt_; }
  const Tensor& stats() const { return stats_; }  // read by kernels that honour the coefficient and the veto

 private:
  // The update of params `which` (one, or up to ADAMW_MULTI through the multi-param kernel when multi) with the
  // step's shared coefficients; marks their p, m, v and f16 copies device-written.
  void update_params(const std::vector<size_t>& which, const std::vector<Tensor>& grads, const pc::AdamWPC& coef,
                     bool multi);
  static Tensor half_copy(const Tensor& p);  // p's current f16 copy (ops::cast_cached), else undefined

  Runtime& rt_;
  std::string ffma_;  // kernel suffix: "_ffma" (fused fma) or ""
  Tensor stats_;  // f32[4] on the GPU: loss sum, grad norm, grad coefficient, skip flag (adamw.comp)
  std::shared_ptr<GpuBuffer> partials_;  // grad-norm partial sums (float-float pairs)
  uint64_t partials_cap_ = 0;            // pairs partials_ holds
  bool profile_sizes_ = profile_shapes_from_env();  // label each update with its param's size
  bool loss_added_ = false;   // add_loss ran since the last clip_and_step: the veto checks the loss sum too
  bool step_unread_ = false;  // a clip_and_step whose skip flag read_stats has not seen yet
  LazyQueue::ReadTicket ticket_;  // request_stats' read-back, until read_stats
};

}  // namespace alpha::vk
