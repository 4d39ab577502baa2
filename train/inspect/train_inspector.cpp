#include "inspect/train_inspector.h"

#include <cmath>

namespace alpha {

namespace {

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * double(x);
  return std::sqrt(s);
}

// JSON has no inf/NaN: a non-finite norm (a bad step the guard handles) is written as null.
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

TrainInspector::TrainInspector(GPT& model, int64_t interval, int64_t max_steps)
    : model_(model), interval_(interval), max_steps_(max_steps) {}

TrainInspector::~TrainInspector() = default;

bool TrainInspector::due(int64_t step) const {
  return interval_ > 0 && (step % interval_ == 0 || step == max_steps_);
}

void TrainInspector::begin_forward(int64_t step) {
  active_ = due(step);
  step_ = step;
  acts_.clear();
  snaps_.clear();
  if (active_) rec_ = std::make_unique<ActivationRecorder>(model_, ActivationRecorder::Mode::stats);
}

void TrainInspector::end_forward() {
  if (!rec_) return;
  acts_ = rec_->activations();
  rec_.reset();
}

void TrainInspector::before_update(double grad_scale) {
  if (!active_) return;
  for (const auto& [name, p] : model_.named_parameters()) {
    ParamSnap s;
    const Tensor g = p.grad();
    s.grad_norm = g.defined() ? norm(g.to_f32_vector()) / grad_scale : 0.0;
    s.before = p.to_f32_vector();
    snaps_.push_back(std::move(s));
  }
}

nlohmann::json TrainInspector::after_update() {
  if (!active_) return {};
  active_ = false;
  nlohmann::json params = nlohmann::json::object(), acts = nlohmann::json::object();
  size_t i = 0;
  for (const auto& [name, p] : model_.named_parameters()) {
    if (i >= snaps_.size()) break;
    const ParamSnap& s = snaps_[i++];
    const std::vector<float> after = p.to_f32_vector();
    double upd = 0;
    for (size_t k = 0; k < after.size(); ++k) upd += (double(after[k]) - s.before[k]) * (double(after[k]) - s.before[k]);
    const double w = norm(s.before);
    params[name] = {{"grad_norm", num(s.grad_norm)}, {"weight_norm", num(norm(after))},
                    {"update_ratio", num(w > 0 ? std::sqrt(upd) / w : 0.0)}};
  }
  for (const Activation& a : acts_) acts[a.name] = to_json(a.stats);
  snaps_.clear();
  acts_.clear();
  return {{"step", step_}, {"params", params}, {"activations", acts}};
}

}  // namespace alpha
