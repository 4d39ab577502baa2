// Learning-rate schedules: linear warmup (nanoGPT's get_lr) followed by constant, cosine, linear or
// warmup-stable-decay (wsd). Pure functions of the 0-based step.
#pragma once
#include <cstdint>
#include <string>

namespace alpha {

enum class ScheduleKind { constant, cosine, linear, wsd };

ScheduleKind parse_schedule(const std::string& s);  // "constant" | "cosine" | "linear" | "wsd"; ValueError otherwise
const char* schedule_name(ScheduleKind k);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::cosine;
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup_steps = 100, decay_steps = 5000;
  double wsd_decay_fraction = 0.2;  // wsd: the last round(fraction * decay_steps) steps before decay_steps decay
};

// Learning rate at 0-based `step`:
//   step < warmup_steps: lr * (step+1) / (warmup_steps+1)  (nanoGPT; warmup_steps = 0 means no warmup)
//   constant: lr.
//   cosine:   step >= decay_steps -> min_lr; else min_lr + 0.5*(1+cos(pi*r))*(lr-min_lr),
//             r = (step-warmup_steps)/(decay_steps-warmup_steps)  (nanoGPT's get_lr).
//   linear:   step >= decay_steps -> min_lr; else lr - r*(lr-min_lr), same r.
//   wsd:      decay_start = max(warmup_steps, decay_steps - llround(wsd_decay_fraction*decay_steps)) (halves round
//             away from zero); lr until decay_start, then linear from lr to min_lr at decay_steps, then min_lr.
// An empty decay span (decay_steps <= warmup_steps, or decay_start == decay_steps) is never divided by: the
// branch "step >= decay_steps -> min_lr" catches every step past warmup first, so lr drops straight to min_lr.
// Throws ValueError on a negative step, negative or non-finite lr/min_lr, negative step counts, or a
// wsd_decay_fraction outside [0, 1].
double lr_at(const ScheduleOptions& o, int64_t step);

}  // namespace alpha
