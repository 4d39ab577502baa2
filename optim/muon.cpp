// Muon on top of AdamW's state and checks. The momentum and the parameter update are plain float loops in torch's
// operation order (torch.lerp: self + w*(end-self) for w < 0.5, end - (end-self)*(1-w) otherwise); Newton-Schulz
// is a few dispatched matmuls per matrix, which is where Muon's cost lies (~ 5 x 3 GEMMs of the matrix's size).
#include "optim/muon.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/ops.h"
#include "core/parallel.h"

namespace alpha {

namespace {

constexpr int64_t kMuonGrain = 1 << 14;

// torch.lerp(self, end, w) for one float, as ATen computes it (weight rounded to float first).
inline float lerp(float self, float end, float w) {
  return std::abs(w) < 0.5f ? self + w * (end - self) : end - (end - self) * (1.0f - w);
}

}  // namespace

Tensor newton_schulz(const Tensor& g, int64_t steps, const std::array<double, 3>& abc, DType dtype) {
  ALPHA_CHECK(g.dim() == 2, ShapeError, "[muon] Newton-Schulz needs a 2-D matrix, got {}", g.str());
  ALPHA_CHECK(g.dtype() == DType::f32, DTypeError, "[muon] Newton-Schulz needs f32, got {}", g.str());
  ALPHA_CHECK(steps >= 1, ValueError, "[muon] ns_steps must be >= 1, got {}", steps);
  ALPHA_CHECK(dtype == DType::f32 || dtype == DType::f16, DTypeError, "[muon] Newton-Schulz runs in f32 or f16");
  const bool tall = g.size(0) > g.size(1);
  Tensor x = ops::contiguous(tall ? g.transpose(0, 1) : g);  // (m, n), m <= n
  const Tensor norm = ops::add_scalar(ops::sqrt(ops::sum_all(ops::mul(x, x))), 1e-7);  // 0-d: |X|_F + eps
  x = ops::div(x, norm);  // spectral norm <= 1, inside the iteration's basin
  x = newton_schulz_iterate(x, steps, abc, dtype);
  return tall ? ops::contiguous(x.transpose(0, 1)) : x;
}

Tensor newton_schulz_iterate(Tensor x, int64_t steps, const std::array<double, 3>& abc, DType dtype) {
  const auto [a, b, c] = abc;
  if (dtype != DType::f32) x = ops::cast(x, dtype);
  for (int64_t s = 0; s < steps; ++s) {
    const Tensor A = ops::matmul(x, x, false, true);                                 // X X^T (m, m)
    const Tensor B = ops::add(ops::scale(A, b), ops::scale(ops::matmul(A, A), c));   // b A + c A A (m, m)
    x = ops::add(ops::scale(x, a), ops::matmul(B, x));                               // a X + B X (m, n)
  }
  return dtype != DType::f32 ? ops::cast(x, DType::f32) : x;
}

bool muon_eligible(const std::string& name, const Tensor& param) {
  if (param.dim() != 2) return false;
  size_t start = 0;
  while (start <= name.size()) {  // components between dots
    const size_t end = std::min(name.find('.', start), name.size());
    const bool digits = end > start && std::all_of(name.begin() + static_cast<std::ptrdiff_t>(start),
                                                   name.begin() + static_cast<std::ptrdiff_t>(end),
                                                   [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    if (digits) return true;
    start = end + 1;
  }
  return false;
}

std::vector<char> muon_matrices(const std::vector<Tensor>& params, const std::vector<bool>& muon_mask,
                                const MuonOptions& muon) {
  ALPHA_CHECK(muon_mask.size() == params.size(), ValueError, "[muon] {} params but a mask of {}", params.size(),
              muon_mask.size());
  ALPHA_CHECK(std::isfinite(muon.lr) && muon.lr >= 0, ValueError, "[muon] lr must be >= 0, got {}", muon.lr);
  ALPHA_CHECK(std::isfinite(muon.base_lr) && muon.base_lr > 0, ValueError, "[muon] base_lr must be > 0, got {}",
              muon.base_lr);
  ALPHA_CHECK(std::isfinite(muon.momentum) && muon.momentum >= 0 && muon.momentum < 1, ValueError,
              "[muon] momentum must be in [0, 1), got {}", muon.momentum);
  ALPHA_CHECK(std::isfinite(muon.weight_decay) && muon.weight_decay >= 0, ValueError,
              "[muon] weight_decay must be >= 0, got {}", muon.weight_decay);
  ALPHA_CHECK(muon.ns_steps >= 1 && muon.ns_steps <= 100, ValueError, "[muon] ns_steps must be in [1, 100], got {}",
              muon.ns_steps);
  for (double k : muon.ns_coefficients)
    ALPHA_CHECK(std::isfinite(k), ValueError, "[muon] ns_coefficients must be finite, got {}", k);
  std::vector<char> excluded(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!muon_mask[i]) continue;
    ALPHA_CHECK(params[i].dim() == 2, ShapeError, "[muon] param {} is {}: Muon takes 2-D matrices only", i,
                params[i].str());
    excluded[i] = 1;
  }
  return excluded;
}

Muon::Muon(std::vector<Tensor> params, std::vector<bool> muon_mask, AdamWOptions adamw, MuonOptions muon)
    : AdamW(std::move(params), adamw), muon_(muon) {
  excluded_ = muon_matrices(this->params(), muon_mask, muon_);
}

void Muon::step(double lr) {
  AdamW::step(lr);  // validates every param (Muon's included) before any change, then updates the AdamW ones
  const double mlr = lr / muon_.base_lr * muon_.lr;
  const float w_in = static_cast<float>(1.0 - muon_.momentum), w_nes = static_cast<float>(muon_.momentum);
  for (size_t i = 0; i < params().size(); ++i) {
    if (!excluded_[i]) continue;
    Tensor p = params()[i];
    const Tensor gt = p.grad();
    if (!gt.defined()) continue;
    const Tensor g = gt.contiguous();
    Tensor& buf = exp_avg()[i];
    const int64_t n = p.numel();
    const float* gp = g.data<float>();
    float* mp = buf.mutable_data<float>();
    Tensor u = muon_.nesterov ? Tensor::empty(p.shape(), DType::f32) : buf;  // (rows, cols)
    float* up = muon_.nesterov ? u.mutable_data<float>() : nullptr;
    parallel_for(n, kMuonGrain, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        mp[k] = lerp(mp[k], gp[k], w_in);              // buf.lerp_(g, 1 - momentum)
        if (up) up[k] = lerp(gp[k], mp[k], w_nes);     // g.lerp_(buf, momentum)
      }
    });
    const Tensor o = newton_schulz(u, muon_.ns_steps, muon_.ns_coefficients, muon_.ns_dtype);
    const double rows = static_cast<double>(p.size(0)), cols = static_cast<double>(p.size(1));
    const float shape_scale = static_cast<float>(std::sqrt(std::max(1.0, rows / cols)));
    const float decay = static_cast<float>(1.0 - mlr * muon_.weight_decay), neg_lr = static_cast<float>(-mlr);
    const bool do_decay = muon_.weight_decay != 0.0;
    const float* op = o.data<float>();
    float* pp = p.mutable_data<float>();
    parallel_for(n, kMuonGrain, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const float pv = do_decay ? pp[k] * decay : pp[k];  // p.mul_(1 - lr*wd)
        pp[k] = pv + neg_lr * (op[k] * shape_scale);        // p.add_(update * scale, alpha=-lr)
      }
    });
  }
}

}  // namespace alpha
