// Learning-rate schedules (see schedule.h for the exact formulas and the empty-decay-span choice).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace alpha {

ScheduleKind parse_schedule(const std::string& s) {
  if (s == "constant") return ScheduleKind::constant;
  if (s == "cosine") return ScheduleKind::cosine;
  if (s == "linear") return ScheduleKind::linear;
  if (s == "wsd") return ScheduleKind::wsd;
  throw ValueError(fmt::format("[schedule] unknown schedule '{}' (expected constant, cosine, linear or wsd)", s));
}

const char* schedule_name(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::constant: return "constant";
    case ScheduleKind::cosine: return "cosine";
    case ScheduleKind::linear: return "linear";
    case ScheduleKind::wsd: return "wsd";
  }
  return "unknown";
}

double lr_at(const ScheduleOptions& o, int64_t step) {
  ALPHA_CHECK(step >= 0, ValueError, "[schedule] step must be >= 0, got {}", step);
  ALPHA_CHECK(std::isfinite(o.lr) && o.lr >= 0.0, ValueError, "[schedule] lr must be finite and >= 0, got {}", o.lr);
  ALPHA_CHECK(std::isfinite(o.min_lr) && o.min_lr >= 0.0, ValueError,
              "[schedule] min_lr must be finite and >= 0, got {}", o.min_lr);
  ALPHA_CHECK(o.warmup_steps >= 0 && o.decay_steps >= 0, ValueError,
              "[schedule] warmup_steps ({}) and decay_steps ({}) must be >= 0", o.warmup_steps, o.decay_steps);
  ALPHA_CHECK(o.wsd_decay_fraction >= 0.0 && o.wsd_decay_fraction <= 1.0, ValueError,
              "[schedule] wsd_decay_fraction must be in [0, 1], got {}", o.wsd_decay_fraction);

  const double s = static_cast<double>(step);
  if (step < o.warmup_steps) return o.lr * (s + 1.0) / (static_cast<double>(o.warmup_steps) + 1.0);
  if (o.kind == ScheduleKind::constant) return o.lr;

  int64_t decay_start = o.warmup_steps;
  if (o.kind == ScheduleKind::wsd) {
    const int64_t decay_len = std::llround(o.wsd_decay_fraction * static_cast<double>(o.decay_steps));
    decay_start = std::max(o.warmup_steps, o.decay_steps - decay_len);
  }
  // Past the end (also every post-warmup step when the decay span is empty): no division below by zero.
  if (step >= o.decay_steps) return o.min_lr;
  if (step < decay_start) return o.lr;  // wsd's stable phase
  const double ratio =
      (s - static_cast<double>(decay_start)) / static_cast<double>(o.decay_steps - decay_start);
  if (o.kind == ScheduleKind::cosine)
    return o.min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (o.lr - o.min_lr);
  return o.lr - ratio * (o.lr - o.min_lr);  // linear and wsd's decay phase
}

}  // namespace alpha
