// AdamW on the CPU. Per element, in float and in torch's operation order (torch/optim/adamw.py,
// _single_tensor_adamw, and the ATen CPU kernels for mul_, add_(alpha), addcmul_, sqrt, div, addcdiv_):
//   p = p * (1 - lr*wd)                  (params with dim() >= 2 only)
//   m = fma(1-b1, g, m*b1)
//   v = fma((1-b2)*g, g, v*b2)
//   p = p + (-lr/bc1 * m) / (sqrt(v)/sqrt(bc2) + eps),   bc1 = 1-b1^t, bc2 = 1-b2^t
// Scalars are computed in double and rounded to float once, as torch does with Python scalars. torch's x86 CPU
// kernels fuse the add_(alpha) and addcmul_ multiply-adds; std::fma reproduces them bit for bit (checked against
// the fixture), and costs little next to the memory traffic of the update.
#include "optim/adamw.h"

#include <cmath>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha {

namespace {

constexpr int64_t kGrain = 1 << 14;  // elements per parallel chunk; small params run inline

// Float coefficients of one step, shared by every param.
struct StepCoeffs {
  float decay;      // 1 - lr*wd
  float b1, omb1;   // beta1, 1 - beta1
  float b2, omb2;   // beta2, 1 - beta2
  float bc2_sqrt;   // sqrt(1 - beta2^t)
  float eps;
  float neg_step;   // -lr / (1 - beta1^t)
};

void update_param(Tensor& p, const Tensor& g, Tensor& m, Tensor& v, const StepCoeffs& c, bool decay) {
  float* pp = p.mutable_data<float>();
  float* mp = m.mutable_data<float>();
  float* vp = v.mutable_data<float>();
  const float* gp = g.data<float>();
  const float cv[8] = {c.decay, c.b1, c.omb1, c.b2, c.omb2, c.bc2_sqrt, c.eps, c.neg_step};
  parallel_for(p.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (cpu::simd_enabled())  // Highway: the same operations; fused multiply-adds only on FMA targets
      return cpu::simd::adamw(pp + begin, mp + begin, vp + begin, gp + begin, end - begin, cv, decay);
    for (int64_t i = begin; i < end; ++i) {
      float pv = pp[i];
      if (decay) pv = pv * c.decay;
      const float gi = gp[i];
      const float mi = std::fma(c.omb1, gi, mp[i] * c.b1);
      const float vi = std::fma(c.omb2 * gi, gi, vp[i] * c.b2);
      const float denom = std::sqrt(vi) / c.bc2_sqrt + c.eps;
      pp[i] = pv + c.neg_step * mi / denom;
      mp[i] = mi;
      vp[i] = vi;
    }
  });
}

}  // namespace

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions opt) : params_(std::move(params)), opt_(opt) {
  ALPHA_CHECK(std::isfinite(opt_.beta1) && opt_.beta1 >= 0.0 && opt_.beta1 < 1.0, ValueError,
              "[adamw] beta1 must be in [0, 1), got {}", opt_.beta1);
  ALPHA_CHECK(std::isfinite(opt_.beta2) && opt_.beta2 >= 0.0 && opt_.beta2 < 1.0, ValueError,
              "[adamw] beta2 must be in [0, 1), got {}", opt_.beta2);
  ALPHA_CHECK(std::isfinite(opt_.eps) && opt_.eps >= 0.0, ValueError, "[adamw] eps must be >= 0, got {}", opt_.eps);
  ALPHA_CHECK(std::isfinite(opt_.weight_decay) && opt_.weight_decay >= 0.0, ValueError,
              "[adamw] weight_decay must be >= 0, got {}", opt_.weight_decay);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    ALPHA_CHECK(p.defined(), ValueError, "[adamw] param {} is undefined", i);
    ALPHA_CHECK(p.dtype() == DType::f32, DTypeError, "[adamw] param {} is {}, expected f32", i, p.str());
    ALPHA_CHECK(p.is_contiguous(), ValueError, "[adamw] param {} ({}) is not contiguous", i, p.str());
    // The same tensor twice would be updated twice per step.
    for (size_t j = 0; j < i; ++j)
      ALPHA_CHECK(!params_[j].same(p), ValueError, "[adamw] param {} is the same tensor as param {}", i, j);
    exp_avg_.push_back(Tensor::zeros(p.shape(), DType::f32));
    exp_avg_sq_.push_back(Tensor::zeros(p.shape(), DType::f32));
  }
}

void AdamW::step(double lr) {
  ALPHA_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, "[adamw] lr must be finite and >= 0, got {}", lr);
  ALPHA_CHECK(exp_avg_.size() == params_.size() && exp_avg_sq_.size() == params_.size(), ValueError,
              "[adamw] {} params but {} exp_avg and {} exp_avg_sq tensors", params_.size(), exp_avg_.size(),
              exp_avg_sq_.size());
  // Validate everything before touching any state, so a throwing step leaves the optimizer unchanged.
  std::vector<Tensor> grads(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    ALPHA_CHECK(g.dtype() == DType::f32, DTypeError, "[adamw] grad of param {} is {}, expected f32", i, g.str());
    ALPHA_CHECK(g.shape() == p.shape(), ShapeError, "[adamw] grad of param {} is {}, param is {}", i,
                shape_str(g.shape()), shape_str(p.shape()));
    for (const Tensor* s : {&exp_avg_[i], &exp_avg_sq_[i]}) {
      const char* what = s == &exp_avg_[i] ? "exp_avg" : "exp_avg_sq";
      ALPHA_CHECK(s->defined() && s->dtype() == DType::f32 && s->shape() == p.shape() && s->is_contiguous(),
                  ValueError, "[adamw] {} of param {} is {}, expected contiguous f32{}", what, i,
                  s->defined() ? s->str() : std::string("undefined"), shape_str(p.shape()));
    }
    grads[i] = g.contiguous();
  }

  ++step_count_;
  const double t = static_cast<double>(step_count_);
  const double bc1 = 1.0 - std::pow(opt_.beta1, t);
  const double bc2 = 1.0 - std::pow(opt_.beta2, t);
  const StepCoeffs c{static_cast<float>(1.0 - lr * opt_.weight_decay),
                     static_cast<float>(opt_.beta1),
                     static_cast<float>(1.0 - opt_.beta1),
                     static_cast<float>(opt_.beta2),
                     static_cast<float>(1.0 - opt_.beta2),
                     static_cast<float>(std::sqrt(bc2)),
                     static_cast<float>(opt_.eps),
                     static_cast<float>(-(lr / bc1))};
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined() || (!excluded_.empty() && excluded_[i])) continue;
    update_param(params_[i], grads[i], exp_avg_[i], exp_avg_sq_[i], c, params_[i].dim() >= 2);
  }
}

void AdamW::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

void AdamW::set_step_count(int64_t n) {
  ALPHA_CHECK(n >= 0, ValueError, "[adamw] step count must be >= 0, got {}", n);
  step_count_ = n;
}

}  // namespace alpha
