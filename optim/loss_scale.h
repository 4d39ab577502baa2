// Dynamic loss scaling for f16 training, like torch.cuda.amp.GradScaler: the backward seed is multiplied by
// scale() so small f16 gradients do not flush to zero; unscale() divides the grads back and reports whether
// they are all finite. A non-finite step is skipped (the caller leaves the params alone) and halves the
// scale; every growth_interval finite steps in a row double it.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace alpha {

struct LossScaleOptions {
  double init_scale = 65536.0;  // 2^16, torch's default
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

// What a checkpoint keeps for an exact resume.
struct LossScaleState {
  double scale = 65536.0;
  int64_t good_steps = 0;  // finite steps since the last change of scale
  int64_t skipped = 0;     // steps skipped for non-finite grads, over the run
  bool operator==(const LossScaleState&) const = default;
};

class LossScaler {
 public:
  explicit LossScaler(LossScaleOptions opts = {});
  double scale() const { return st_.scale; }
  // Divides every defined grad by scale() (out of place: p.set_grad) and returns true when all of them are
  // finite. On false the grads are left as they were (the step is to be skipped: call zero_grad).
  bool unscale(const std::vector<Tensor>& params) const;
  // After each step: finite = what unscale returned. Backs off (and counts a skip) or counts toward growth.
  void update(bool finite);
  const LossScaleState& state() const { return st_; }
  void set_state(const LossScaleState& s);  // ValueError unless scale is finite and > 0, counts >= 0

 private:
  LossScaleOptions opts_;
  LossScaleState st_;
};

}  // namespace alpha
