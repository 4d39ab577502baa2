// Muon (MomentUm Orthogonalized by Newton-Schulz) for the 2-D weight matrices of the transformer blocks, AdamW
// for every other parameter (embeddings, LM head, biases, norms), as in modded-nanogpt and Keller Jordan's
// muon.py (MuonWithAuxAdam). Per Muon matrix W (rows, cols) with gradient G and momentum buffer M:
//   M = lerp(M, G, 1 - momentum)                       (an EMA of the gradient)
//   U = nesterov ? lerp(G, M, momentum) : M
//   O = newton_schulz(U, ns_steps)                      (~ the nearest semi-orthogonal matrix, U V^T of U's SVD)
//   W = W * (1 - lr*weight_decay) - lr * max(1, rows/cols)^0.5 * O
// The update is computed in f32 (modded-nanogpt runs Newton-Schulz in bf16); its matmuls go through the
// dispatcher (core/ops.h), so they run on OpenBLAS on the CPU and on the GPU's GEMMs under a Vulkan backend.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "optim/adamw.h"

namespace alpha {

struct MuonOptions {
  double lr = 0.02;        // peak Muon learning rate
  double base_lr = 1e-3;   // the AdamW peak lr the schedule is built on: Muon's lr at a step = lr * lr_t / base_lr
  double momentum = 0.95, weight_decay = 0.0;
  bool nesterov = true;
  int64_t ns_steps = 5;
  std::array<double, 3> ns_coefficients{3.4445, -4.7750, 2.0315};  // (a, b, c): modded-nanogpt's quintic
  DType ns_dtype = DType::f32;  // f16: the iteration's matmuls on f16 operands (the GPU's cooperative-matrix GEMMs)
};

// Newton-Schulz quintic iteration on g (rows, cols) f32: X = g / (|g|_F + 1e-7), transposed when rows > cols so
// X X^T is the smaller Gram matrix; then `steps` times A = X X^T, B = b A + c A A, X = a X + B X, with X, A, B
// stored in `dtype` (f32, or f16 like modded-nanogpt's bf16: on the GPU its matmuls take the f16 tensor-core
// GEMMs; on the CPU every f16 op computes in f32 and rounds). Returns f32 (rows, cols). Throws ShapeError for
// non-2-D g, ValueError for steps < 1.
Tensor newton_schulz(const Tensor& g, int64_t steps, const std::array<double, 3>& abc, DType dtype = DType::f32);
// The iteration alone, on an already normalized x (m, n) with m <= n (f32; cast to `dtype` inside): what
// newton_schulz runs after its normalization, shared with the GPU Muon (vk/muon.h), which normalizes on the GPU.
Tensor newton_schulz_iterate(Tensor x, int64_t steps, const std::array<double, 3>& abc, DType dtype);

// Checks Muon's options and the mask (one entry per param; Muon matrices must be 2-D) and returns the mask as
// AdamW's excluded_ flags. Throws ValueError / ShapeError. Shared by Muon and vk::GpuMuon.
std::vector<char> muon_matrices(const std::vector<Tensor>& params, const std::vector<bool>& muon_mask,
                                const MuonOptions& muon);

// Which parameters Muon takes: 2-D and inside a transformer block, i.e. the name has an all-digit component
// ("transformer.h.3.attn.c_attn.weight", "model.layers.0.mlp.up_proj.weight"); embeddings, the LM head and the
// final norm have none.
bool muon_eligible(const std::string& name, const Tensor& param);

class Muon : public AdamW {
 public:
  // muon_mask[i]: param i is a Muon matrix (must be 2-D); the others follow AdamW with `adamw`. Muon keeps
  // AdamW's two state slots per param so checkpoints, ZeRO-1 sharding and rollback handle it unchanged: for a
  // Muon matrix exp_avg() is the momentum buffer and exp_avg_sq() stays zero.
  Muon(std::vector<Tensor> params, std::vector<bool> muon_mask, AdamWOptions adamw, MuonOptions muon);

  // lr: the AdamW learning rate of this step; Muon matrices use lr * muon.lr / muon.base_lr. Validates every
  // grad and state tensor before changing anything (AdamW::step's checks), then updates.
  void step(double lr) override;
  const char* name() const override { return "muon"; }
  const MuonOptions* muon_options() const override { return &muon_; }
  bool is_muon(size_t i) const { return excluded_[i] != 0; }

 private:
  MuonOptions muon_;
};

}  // namespace alpha
