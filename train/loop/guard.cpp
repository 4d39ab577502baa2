#include "loop/guard.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "autograd/check.h"
#include "config/json_limits.h"

namespace alpha {

nlohmann::json guard_state_json(const GuardState& s) {
  return {{"bad_steps", s.bad_steps}, {"skipped", s.skipped}, {"rollbacks", s.rollbacks},
          {"spikes", s.spikes},       {"bad_in_row", s.bad_in_row}, {"lr_scale", s.lr_scale}};
}

GuardState guard_state_from_json(const nlohmann::json& j) {
  GuardState s;
  auto count = [&](const char* key, int64_t def) { return j.contains(key) ? json_i64(j.at(key)) : def; };
  s.bad_steps = count("bad_steps", s.bad_steps);
  s.skipped = count("skipped", s.skipped);
  s.rollbacks = count("rollbacks", s.rollbacks);
  s.spikes = count("spikes", s.spikes);
  s.bad_in_row = count("bad_in_row", s.bad_in_row);
  s.lr_scale = j.value("lr_scale", s.lr_scale);
  return s;
}

// ---- spike detector ----

SpikeDetector::SpikeDetector(int64_t window, double zscore)
    : capacity_(static_cast<size_t>(std::max<int64_t>(window, 2))), threshold_(zscore) {}

void SpikeDetector::add(double loss) {
  if (!std::isfinite(loss)) return;  // the statistics only ever see finite values
  window_.push_back(loss);
  if (window_.size() > capacity_) window_.pop_front();
}

double SpikeDetector::mean() const {
  if (window_.empty()) return NAN;
  double s = 0;
  for (double x : window_) s += x;
  return s / static_cast<double>(window_.size());
}

double SpikeDetector::stddev() const {
  if (window_.empty()) return NAN;
  const double m = mean();
  double ss = 0;
  for (double x : window_) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(window_.size()));
}

double SpikeDetector::zscore(double loss) const {
  if (!std::isfinite(loss) || window_.size() < std::min<size_t>(10, capacity_)) return NAN;
  const double m = mean();
  const double sd = std::max(stddev(), 1e-3 * std::abs(m) + 1e-12);
  return (loss - m) / sd;
}

bool SpikeDetector::is_spike(double loss) const {
  if (threshold_ <= 0) return false;
  const double z = zscore(loss);
  return std::isfinite(z) && z > threshold_;
}

// ---- guard ----

const char* guard_action_name(GuardAction a) {
  switch (a) {
    case GuardAction::apply: return "apply";
    case GuardAction::warn: return "warn";
    case GuardAction::skip: return "skip";
    case GuardAction::rollback: return "rollback";
    case GuardAction::stop: return "stop";
  }
  return "?";
}

NumericsGuard::NumericsGuard(const GuardConfig& cfg, const GuardState& state)
    : cfg_(cfg), state_(state), spikes_(cfg.spike_window, cfg.spike_zscore) {}

GuardVerdict NumericsGuard::check_update(int64_t step, double loss, double grad_norm, bool has_checkpoint,
                                         bool vetoable) {
  GuardVerdict v;
  v.step = step;
  v.loss = loss;
  v.grad_norm = grad_norm;
  if (!std::isfinite(loss)) {
    v.event = "nonfinite_loss";
  } else if (!std::isfinite(grad_norm)) {
    v.event = "nonfinite_grad";
  } else {
    v.zscore = spikes_.zscore(loss);
    if (!spikes_.is_spike(loss)) return v;
    v.event = "spike";
    ++state_.spikes;
    if (cfg_.spike_action == "warn" || !vetoable) {
      v.action = GuardAction::warn;
      return v;
    }
  }
  return bad(std::move(v), has_checkpoint, /*can_skip=*/vetoable);
}

GuardVerdict NumericsGuard::check_params(int64_t step, const std::vector<std::pair<std::string, Tensor>>& named,
                                         bool has_checkpoint) {
  GuardVerdict v;
  v.step = step;
  if (cfg_.param_check_interval <= 0 || step % cfg_.param_check_interval != 0) return v;
  for (const auto& [name, p] : named) {
    if (ag::all_finite(p)) continue;
    v.event = "nonfinite_param";
    v.detail = fmt::format("parameter \"{}\" {} after the update", name, p.str());
    return bad(std::move(v), has_checkpoint, /*can_skip=*/false);
  }
  return v;
}

GuardVerdict NumericsGuard::bad(GuardVerdict v, bool has_checkpoint, bool can_skip) {
  ++state_.bad_steps;
  ++state_.bad_in_row;
  v.diagnose = state_.bad_in_row == 1 && v.event != "spike" && v.event != "nonfinite_param";
  const bool rollback = cfg_.policy == "rollback" && has_checkpoint && v.event != "spike";
  if (state_.bad_in_row >= cfg_.max_bad_steps) v.action = GuardAction::stop;
  else if (rollback) v.action = GuardAction::rollback;
  else v.action = can_skip ? GuardAction::skip : GuardAction::stop;
  if (v.action == GuardAction::skip) ++state_.skipped;
  return v;
}

void NumericsGuard::commit_good(int64_t step, double loss) {
  spikes_.add(loss);
  if (step > rollback_floor_) state_.bad_in_row = 0;
}

void NumericsGuard::on_rollback(int64_t step) {
  ++state_.rollbacks;
  state_.lr_scale *= cfg_.rollback_lr_factor;
  rollback_floor_ = std::max(rollback_floor_, step);
}

nlohmann::json NumericsGuard::record(const GuardVerdict& v) const {
  nlohmann::json r = {{"step", v.step},          {"event", v.event},           {"action", guard_action_name(v.action)},
                      {"bad_in_row", state_.bad_in_row}, {"bad_steps", state_.bad_steps}, {"skipped", state_.skipped},
                      {"rollbacks", state_.rollbacks}, {"spikes", state_.spikes}, {"lr_scale", state_.lr_scale}};
  if (v.event != "nonfinite_param") {
    r["loss"] = v.loss;
    r["grad_norm"] = v.grad_norm;
  }
  if (std::isfinite(v.zscore)) r["zscore"] = v.zscore;
  if (!v.detail.empty()) r["origin"] = v.detail;
  return r;
}

std::string NumericsGuard::message(const GuardVerdict& v) const {
  std::string what;
  if (v.event == "nonfinite_loss") what = fmt::format("non-finite loss ({})", v.loss);
  else if (v.event == "nonfinite_grad") what = fmt::format("non-finite gradient (global norm {})", v.grad_norm);
  else if (v.event == "nonfinite_param") what = "non-finite parameter";
  else if (v.event == "spike") what = fmt::format("loss spike ({:.4g}, z-score {:.1f})", v.loss, v.zscore);
  const char* done = "";
  switch (v.action) {
    case GuardAction::apply: case GuardAction::warn: done = "update applied"; break;
    case GuardAction::skip: done = "update skipped"; break;
    case GuardAction::rollback: done = "rolling back to the last checkpoint"; break;
    case GuardAction::stop: done = "stopping (exit code 5)"; break;
  }
  std::string s = fmt::format("[guard] step {}: {}: {} ({} bad in a row)", v.step, what, done, state_.bad_in_row);
  if (!v.detail.empty()) s += "; first non-finite value: " + v.detail;
  return s;
}

// ---- test hook ----

GuardFaults::GuardFaults(const std::string& spec) {
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const size_t at = item.find('@');
    ALPHA_CHECK(at != std::string::npos, ValueError, "[guard] ALPHA_GUARD_INJECT item \"{}\" has no @STEP", item);
    Fault f;
    const std::string what = item.substr(0, at), steps = item.substr(at + 1);
    const size_t colon = what.find(':');
    f.kind = what.substr(0, colon);
    if (colon != std::string::npos) f.op = what.substr(colon + 1);
    ALPHA_CHECK((f.kind == "param" && f.op.empty()) || ((f.kind == "forward" || f.kind == "backward") && !f.op.empty()),
                ValueError, "[guard] ALPHA_GUARD_INJECT item \"{}\": expected forward:OP, backward:OP or param", item);
    try {
      const size_t dash = steps.find('-');
      f.first = std::stoll(steps.substr(0, dash));
      f.last = dash == std::string::npos ? f.first : std::stoll(steps.substr(dash + 1));
    } catch (const std::exception&) {
      throw ValueError(fmt::format("[guard] ALPHA_GUARD_INJECT item \"{}\": bad step range \"{}\"", item, steps));
    }
    ALPHA_CHECK(f.first >= 1 && f.last >= f.first, ValueError, "[guard] ALPHA_GUARD_INJECT item \"{}\": bad step range", item);
    faults_.push_back(f);
  }
}

GuardFaults GuardFaults::from_env() {
  const char* s = std::getenv("ALPHA_GUARD_INJECT");
  return s ? GuardFaults(s) : GuardFaults();
}

GuardFaults::~GuardFaults() {
  if (!faults_.empty()) ag::clear_injection();
}

void GuardFaults::begin_step(int64_t step) {
  ag::clear_injection();
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind == "param" || step < f.first || step > f.last || !fired_.insert({i, step}).second) continue;
    ag::inject_nonfinite(f.op, f.kind == "backward");
  }
}

void GuardFaults::end_step() {
  if (!faults_.empty()) ag::clear_injection();
}

bool GuardFaults::poison_params(int64_t step, const std::vector<Tensor>& params) {
  bool hit = false;
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind != "param" || step < f.first || step > f.last || params.empty() || !fired_.insert({i, step}).second) continue;
    Tensor p = params[0];  // handle copy: writes the shared storage
    p.mutable_data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    hit = true;
  }
  return hit;
}

}  // namespace alpha
