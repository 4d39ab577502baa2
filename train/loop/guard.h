// The numerics guard (issue 9): decides, per step, whether an update may be applied. A step is bad when its
// loss or global gradient norm is non-finite (checked before the update), when a parameter is non-finite
// after it, or when its loss is a spike and guard.spike_action is "skip". Policies (guard.policy): skip the
// update, roll back to the last checkpoint, or stop (exit code 5) after guard.max_bad_steps in a row.
// The trainer (train/loop/trainer.cpp) owns the model, optimizer and checkpoints; this class owns the decisions,
// the counters (saved in checkpoints) and the spike detector. Guarantees: docs/reliability.md.
#pragma once
#include <cstdint>
#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "config/config.h"

namespace alpha {

// Counters a run carries across checkpoints (the "guard" object of a checkpoint header; absent = zeros).
struct GuardState {
  int64_t bad_steps = 0;   // bad steps so far (all kinds)
  int64_t skipped = 0;     // updates skipped
  int64_t rollbacks = 0;   // rollbacks to a checkpoint
  int64_t spikes = 0;      // loss spikes seen (warned or skipped)
  int64_t bad_in_row = 0;  // the current streak of bad steps
  double lr_scale = 1.0;   // product of rollback_lr_factor over the rollbacks so far
  bool operator==(const GuardState&) const = default;
};
nlohmann::json guard_state_json(const GuardState& s);
GuardState guard_state_from_json(const nlohmann::json& j);  // missing keys keep their defaults

// Upward loss spikes by z-score against the last `window` finite losses. Non-finite losses are ignored by
// add(), so a NaN can never enter the mean or the variance. Mean and variance are recomputed from the window
// (two passes in double; the window is small) rather than updated incrementally, so no rounding drifts.
class SpikeDetector {
 public:
  SpikeDetector(int64_t window, double zscore);
  void add(double loss);
  // (loss - mean) / std over the window; NaN while the window holds fewer than min(10, window) losses or when
  // `loss` is not finite. The std is floored at 0.1% of |mean| so a flat curve does not flag rounding noise.
  double zscore(double loss) const;
  bool is_spike(double loss) const;  // threshold > 0 and zscore(loss) > threshold
  int64_t count() const { return static_cast<int64_t>(window_.size()); }
  double mean() const;
  double stddev() const;  // population std of the window

 private:
  std::deque<double> window_;
  size_t capacity_;
  double threshold_;
};

enum class GuardAction { apply, warn, skip, rollback, stop };
const char* guard_action_name(GuardAction a);  // "apply", "warn", "skip", "rollback", "stop"

struct GuardVerdict {
  GuardAction action = GuardAction::apply;
  std::string event;       // "" (fine), "nonfinite_loss", "nonfinite_grad", "nonfinite_param", "spike"
  int64_t step = 0;        // the update this verdict is about (1-based)
  double loss = 0, grad_norm = 0, zscore = NAN;
  std::string detail;      // e.g. the first non-finite parameter's name
  bool diagnose = false;   // first bad step of a streak: the trainer re-runs it to name the op (autograd/check.h)
  bool bad() const { return action == GuardAction::skip || action == GuardAction::rollback || action == GuardAction::stop; }
};

class NumericsGuard {
 public:
  NumericsGuard(const GuardConfig& cfg, const GuardState& state);

  // Before the update. `has_checkpoint`: a rollback target exists. Bad verdicts are counted here.
  // `vetoable` false: the update was applied already (GPU AdamW), so a bad step can only roll back or stop,
  // and a spike only warns.
  GuardVerdict check_update(int64_t step, double loss, double grad_norm, bool has_checkpoint, bool vetoable = true);
  // After the update, every param_check_interval steps (else apply). A non-finite parameter cannot be skipped:
  // the verdict is rollback (policy rollback with a checkpoint) or stop.
  GuardVerdict check_params(int64_t step, const std::vector<std::pair<std::string, Tensor>>& named,
                            bool has_checkpoint);
  // The update of `step` was applied and passed every check: ends a streak, feeds the spike window.
  void commit_good(int64_t step, double loss);
  // The trainer rolled back because of the bad step `step`: counts it and lowers the LR scale.
  void on_rollback(int64_t step);

  double lr_scale() const { return state_.lr_scale; }
  const GuardState& state() const { return state_; }
  const SpikeDetector& spikes() const { return spikes_; }
  // The `guard` metrics record for a verdict that is not `apply` (docs/metrics.md).
  nlohmann::json record(const GuardVerdict& v) const;
  // One line for the progress output, e.g. "[guard] step 12: non-finite loss (nan): update skipped (1 in a row)".
  std::string message(const GuardVerdict& v) const;

 private:
  GuardVerdict bad(GuardVerdict v, bool has_checkpoint, bool can_skip);
  GuardConfig cfg_;
  GuardState state_;
  SpikeDetector spikes_;
  int64_t rollback_floor_ = 0;  // good steps up to the last rollback's bad step do not end the streak
};

// Test hook (docs/reliability.md): the environment variable ALPHA_GUARD_INJECT="forward:gelu@12,
// backward:matmul@15-16,param@20" makes op `gelu` output a NaN during update 12, `matmul`'s backward produce a
// NaN gradient during updates 15 and 16, and parameter 0 get a NaN right after update 20. Each fault fires only
// the first time its step number is reached (a rollback that redoes the step does not meet it again).
class GuardFaults {
 public:
  GuardFaults() = default;
  explicit GuardFaults(const std::string& spec);  // throws ValueError on a malformed spec
  static GuardFaults from_env();
  ~GuardFaults();
  GuardFaults(const GuardFaults&) = delete;
  GuardFaults& operator=(const GuardFaults&) = delete;
  GuardFaults(GuardFaults&&) = default;
  GuardFaults& operator=(GuardFaults&&) = default;

  void begin_step(int64_t step);  // arms the tape fault of this step, if any (autograd/check.h)
  void end_step();                // disarms it
  bool poison_params(int64_t step, const std::vector<Tensor>& params);  // true when it wrote a NaN
  bool empty() const { return faults_.empty(); }

 private:
  struct Fault {
    std::string kind;  // "forward", "backward", "param"
    std::string op;
    int64_t first = 0, last = 0;
  };
  std::vector<Fault> faults_;
  std::set<std::pair<size_t, int64_t>> fired_;
};

}  // namespace alpha
