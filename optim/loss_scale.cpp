#include "optim/loss_scale.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"

namespace alpha {

LossScaler::LossScaler(LossScaleOptions opts) : opts_(opts) {
  ALPHA_CHECK(std::isfinite(opts.init_scale) && opts.init_scale > 0, ValueError,
              "[loss_scale] init_scale must be finite and positive, got {}", opts.init_scale);
  ALPHA_CHECK(opts.growth_factor > 1 && opts.backoff_factor > 0 && opts.backoff_factor < 1 && opts.growth_interval > 0,
              ValueError, "[loss_scale] need growth_factor > 1, 0 < backoff_factor < 1, growth_interval > 0");
  st_.scale = opts.init_scale;
}

bool LossScaler::unscale(const std::vector<Tensor>& params) const {
  // Finite check first (sums propagate inf/NaN), so a skipped step keeps its grads untouched.
  for (const Tensor& p : params) {
    const Tensor g = p.grad();
    if (g.defined() && !std::isfinite(ops::sum_all(g).item())) return false;
  }
  const double inv = 1.0 / st_.scale;
  for (Tensor p : params) {  // a handle: set_grad reaches the parameter
    const Tensor g = p.grad();
    if (g.defined()) p.set_grad(ops::scale(g, inv));
  }
  return true;
}

void LossScaler::update(bool finite) {
  if (!finite) {
    st_.scale = std::max(st_.scale * opts_.backoff_factor, 1e-30);  // never 0: it divides
    st_.good_steps = 0;
    ++st_.skipped;
    return;
  }
  if (++st_.good_steps >= opts_.growth_interval) {
    const double grown = st_.scale * opts_.growth_factor;
    if (std::isfinite(grown)) st_.scale = grown;
    st_.good_steps = 0;
  }
}

void LossScaler::set_state(const LossScaleState& s) {
  ALPHA_CHECK(std::isfinite(s.scale) && s.scale > 0 && s.good_steps >= 0 && s.skipped >= 0, ValueError,
              "[loss_scale] bad state: scale {}, good_steps {}, skipped {}", s.scale, s.good_steps, s.skipped);
  st_ = s;
}

}  // namespace alpha
