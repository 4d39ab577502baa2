// White-box inspection of a GPT (issue 19): activation statistics at the named points of GPT::forward (the
// ActivationObserver, train/model/gpt.h), attention probabilities per head recomputed on the CPU from q and k,
// a logit lens (each layer's residual stream through the final LayerNorm and the tied LM head), and a layer-by-layer
// comparison of two forwards. `alpha inspect` (train/cli/cmd_inspect.cpp) and the training loop's `inspect`
// records (train/inspect/train_inspector.h) use it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "model/gpt.h"

namespace alpha {

// Statistics of one activation over all its elements. near zero: |x| < kNearZero; f16 saturation: |x| >= 65504
// (the largest finite f16) or not finite, i.e. values an f16 run would hold as +-max or inf.
inline constexpr double kNearZero = 1e-4;
inline constexpr double kF16Max = 65504.0;
struct ActStats {
  double mean = 0, std = 0, max_abs = 0, frac_zero = 0, frac_f16_sat = 0;
  int64_t count = 0;
};
ActStats act_stats(const float* x, int64_t n);
ActStats act_stats(const Tensor& x);  // any float dtype, on the host or the GPU (read back)
nlohmann::json to_json(const ActStats& s);  // {mean, std, max_abs, frac_zero, frac_f16_sat}

// One recorded activation: its observer name, shape and (in values mode) its host f32 values, row-major.
struct Activation {
  std::string name;
  Shape shape;
  ActStats stats;
  std::vector<float> values;
};

// Records every activation GPT::forward reports while it lives (the observer is removed by the destructor),
// in forward order. stats mode keeps only the statistics, over the batch's first sequence (training); values mode
// also the values, over the whole batch (inspect, compare).
class ActivationRecorder {
 public:
  enum class Mode { stats, values };
  ActivationRecorder(GPT& model, Mode mode);
  ~ActivationRecorder();
  ActivationRecorder(const ActivationRecorder&) = delete;
  ActivationRecorder& operator=(const ActivationRecorder&) = delete;
  const std::vector<Activation>& activations() const { return acts_; }
  const Activation* find(const std::string& name) const;  // nullptr when not recorded

 private:
  GPT& model_;
  Mode mode_;
  std::vector<Activation> acts_;
};

// One forward of `ids` (B = 1, no dropout, no gradients) with a values-mode recorder; returns the activations.
std::vector<Activation> record_forward(GPT& model, const std::vector<int32_t>& ids);

// Attention probabilities of layer `qkv` (the recorded "h.L.attn.qkv", (1, T, 3C)): (H, T, T) row-major, row i
// = softmax over keys j <= i of q_i . k_j / sqrt(D) in double (what the fused kernel computes without storing it).
std::vector<float> attention_probs(const Activation& qkv, int64_t n_head);

// Logit lens: the residual stream x (T, C) through the model's final LayerNorm and tied LM head; per position
// the top_k tokens (ids and probabilities, best first).
struct LensEntry {
  std::vector<int32_t> ids;
  std::vector<float> probs;
};
std::vector<LensEntry> logit_lens(const GPT& model, const Activation& resid, int64_t top_k);

// Layer-by-layer comparison: the first activation of `a` (forward order) whose values differ from `b`'s by more
// than atol + rtol * |b| somewhere, or whose shape differs or that `b` lacks.
struct CompareResult {
  bool differ = false;
  std::string first;      // name of the first differing activation ("" when none)
  double max_abs_diff = 0;  // of that activation (or of all, when none differ)
  std::vector<std::pair<std::string, double>> per_tensor;  // max |a - b| of each compared activation, in order
  std::string detail;  // "shape (1, 8, 24) vs (1, 8, 12)", "missing in B", or ""
};
CompareResult compare_activations(const std::vector<Activation>& a, const std::vector<Activation>& b, double atol,
                                  double rtol);

// The report `alpha inspect --json` prints (docs/inspect.md): tokens, per-activation stats in forward order,
// attention per layer and head, logit_lens per layer (and "embed"). `decode` turns one token id into text.
nlohmann::json inspect_report(GPT& model, const std::vector<int32_t>& ids, int64_t top_k,
                              const std::function<std::string(int32_t)>& decode);

}  // namespace alpha
