// GpuMuon: optim/muon.h's Muon with its state on the GPU (optim.name "muon" with optim.device "gpu"). The grad
// norm, clip coefficient, veto and the AdamW update of the non-Muon params are GpuAdamW's; the Muon matrices then
// get their momentum (spirv/muon.comp), their Frobenius normalization on the GPU, the Newton-Schulz iteration
// through the op dispatcher (the GPU's GEMMs: optim/muon.h's newton_schulz_iterate), batched over the matrices of
// one shape, and their update, with nothing read back. Same state layout as Muon (momentum in the exp_avg slots),
// so checkpoints move between the two.
// tests/test_vk_muon.cpp compares it with the CPU Muon.
#pragma once
#include <memory>
#include <vector>

#include "optim/muon.h"
#include "vk/adamw.h"

namespace alpha::vk {

class GpuMuon : public GpuAdamW {
 public:
  // muon_mask as for Muon (one entry per param; Muon matrices 2-D). Throws like Muon and GpuAdamW.
  GpuMuon(VulkanBackend& backend, std::vector<Tensor> params, std::vector<bool> muon_mask, AdamWOptions adamw,
          MuonOptions muon);

  // GpuAdamW's step (norm, coefficient, veto, AdamW for the rest), then Muon for the matrices; lr is the AdamW
  // learning rate of this step (Muon's = lr * muon.lr / muon.base_lr). Needs this backend active (the dispatcher
  // runs the Newton-Schulz matmuls).
  void clip_and_step(double lr, double max_norm, double inv_scale = 1.0) override;
  const char* name() const override { return "muon"; }
  const MuonOptions* muon_options() const override { return &muon_; }

 private:
  MuonOptions muon_;
  std::shared_ptr<GpuBuffer> partials_;  // sum-of-squares partials of one stack of same-shape matrices
  uint64_t partials_cap_ = 0;
};

}  // namespace alpha::vk
