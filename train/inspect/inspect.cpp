#include "inspect/inspect.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"

namespace alpha {

ActStats act_stats(const float* x, int64_t n) {
  ActStats s;
  s.count = n;
  if (n == 0) return s;
  double sum = 0, zero = 0, sat = 0, max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i], a = std::fabs(v);
    sum += v;
    if (a < kNearZero) zero += 1;
    if (!(a < kF16Max)) sat += 1;  // NaN counts as saturated too
    if (a > max_abs || std::isnan(a)) max_abs = a;
  }
  const double mean = sum / static_cast<double>(n);
  double var = 0;  // second pass: no cancellation for large means
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  s.mean = mean;
  s.std = std::sqrt(var / static_cast<double>(n));
  s.max_abs = max_abs;
  s.frac_zero = zero / static_cast<double>(n);
  s.frac_f16_sat = sat / static_cast<double>(n);
  return s;
}

ActStats act_stats(const Tensor& x) {
  const std::vector<float> v = x.to_f32_vector();
  return act_stats(v.data(), static_cast<int64_t>(v.size()));
}

nlohmann::json to_json(const ActStats& s) {
  // JSON has no inf/NaN: a non-finite statistic is written as null (the saturation fraction says why).
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"mean", num(s.mean)}, {"std", num(s.std)}, {"max_abs", num(s.max_abs)}, {"frac_zero", s.frac_zero},
          {"frac_f16_sat", s.frac_f16_sat}};
}

ActivationRecorder::ActivationRecorder(GPT& model, Mode mode) : model_(model), mode_(mode) {
  model_.set_observer([this](const std::string& name, const Tensor& x) {
    Activation a{name, x.shape(), {}, {}};
    // stats mode (training): the batch's first sequence stands for it, so an inspected step scans B times fewer
    // values (the (B, T, 4C) MLP activations of a large model are hundreds of MB).
    const bool first_row = mode_ == Mode::stats && x.dim() >= 2 && x.size(0) > 1;
    std::vector<float> v = (first_row ? x.narrow(0, 0, 1) : x).to_f32_vector();
    a.stats = act_stats(v.data(), static_cast<int64_t>(v.size()));
    if (mode_ == Mode::values) a.values = std::move(v);
    acts_.push_back(std::move(a));
  });
}

ActivationRecorder::~ActivationRecorder() { model_.set_observer({}); }

const Activation* ActivationRecorder::find(const std::string& name) const {
  for (const Activation& a : acts_)
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<Activation> record_forward(GPT& model, const std::vector<int32_t>& ids) {
  const int64_t T = static_cast<int64_t>(ids.size());
  ALPHA_CHECK(T >= 1 && T <= model.config().block_size, ValueError,
              "[inspect] the prompt is {} tokens; it must be 1 .. block_size {}", T, model.config().block_size);
  ag::NoGrad no_grad;
  Rng unused(0);
  ActivationRecorder rec(model, ActivationRecorder::Mode::values);
  model.forward(Tensor::from_vector(ids, {1, T}), /*training=*/false, unused);
  return rec.activations();
}

std::vector<float> attention_probs(const Activation& qkv, int64_t H) {
  ALPHA_CHECK(qkv.shape.size() == 3 && qkv.shape[0] == 1 && qkv.shape[2] % (3 * H) == 0 && !qkv.values.empty(),
              ShapeError, "[inspect] {} is not a recorded (1, T, 3C) qkv with values", qkv.name);
  const int64_t T = qkv.shape[1], C = qkv.shape[2] / 3, D = C / H;
  const float* p = qkv.values.data();  // row t: q (C) | k (C) | v (C); head h uses [h D, (h + 1) D)
  std::vector<float> out(static_cast<size_t>(H * T * T), 0.0f);  // (H, T, T)
  std::vector<double> row(static_cast<size_t>(T));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += double(p[i * 3 * C + h * D + d]) * double(p[j * 3 * C + C + h * D + d]);
        row[j] = dot * scale;
        mx = std::max(mx, row[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j <= i; ++j) sum += (row[j] = std::exp(row[j] - mx));
      for (int64_t j = 0; j <= i; ++j) out[static_cast<size_t>((h * T + i) * T + j)] = static_cast<float>(row[j] / sum);
    }
  return out;
}

std::vector<LensEntry> logit_lens(const GPT& model, const Activation& resid, int64_t top_k) {
  ALPHA_CHECK(resid.shape.size() == 3 && resid.shape[0] == 1 && !resid.values.empty(), ShapeError,
              "[inspect] {} is not a recorded (1, T, C) residual stream with values", resid.name);
  const int64_t T = resid.shape[1], C = resid.shape[2];
  auto param = [&](const std::string& n) {
    for (const auto& [name, t] : model.named_parameters())
      if (name == n) return t;
    return Tensor();  // ln_f.bias of a bias=false model
  };
  ag::NoGrad no_grad;
  const Tensor x = Tensor::from_vector(resid.values, {T, C});
  const Tensor logits = ag::linear(ag::layernorm(x, param("transformer.ln_f.weight"), param("transformer.ln_f.bias")),
                                   param("transformer.wte.weight"), Tensor());  // (T, V)
  const std::vector<float> l = logits.to_f32_vector();
  const int64_t V = logits.size(1), k = std::min(top_k, V);
  std::vector<LensEntry> out(static_cast<size_t>(T));
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t t = 0; t < T; ++t) {
    const float* r = l.data() + t * V;
    const double mx = *std::max_element(r, r + V);
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(r[v]) - mx);
    std::iota(order.begin(), order.end(), 0);
    // Ties go to the lower id, so the top-1 matches an argmax of the logits.
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return r[a] > r[b] || (r[a] == r[b] && a < b); });
    for (int64_t i = 0; i < k; ++i) {
      out[t].ids.push_back(order[i]);
      out[t].probs.push_back(static_cast<float>(std::exp(double(r[order[i]]) - mx) / sum));
    }
  }
  return out;
}

CompareResult compare_activations(const std::vector<Activation>& a, const std::vector<Activation>& b, double atol,
                                  double rtol) {
  CompareResult res;
  for (const Activation& x : a) {
    auto it = std::find_if(b.begin(), b.end(), [&](const Activation& y) { return y.name == x.name; });
    if (it == b.end() || it->shape != x.shape) {
      res.differ = true;
      res.first = x.name;
      res.detail = it == b.end() ? "missing in B" : fmt::format("shape {} vs {}", shape_str(x.shape), shape_str(it->shape));
      return res;
    }
    double max_diff = 0;
    bool bad = false;
    for (size_t i = 0; i < x.values.size(); ++i) {
      const double d = std::fabs(double(x.values[i]) - double(it->values[i]));
      if (!(d <= atol + rtol * std::fabs(double(it->values[i])))) bad = true;  // NaN on either side differs
      if (d > max_diff || std::isnan(d)) max_diff = d;
    }
    res.per_tensor.emplace_back(x.name, max_diff);
    res.max_abs_diff = std::max(res.max_abs_diff, max_diff);
    if (bad) {
      res.differ = true;
      res.first = x.name;
      res.max_abs_diff = max_diff;
      return res;
    }
  }
  return res;
}

nlohmann::json inspect_report(GPT& model, const std::vector<int32_t>& ids, int64_t top_k,
                              const std::function<std::string(int32_t)>& decode) {
  const GPTConfig& mc = model.config();
  const std::vector<Activation> acts = record_forward(model, ids);
  nlohmann::json j;
  j["model"] = {{"n_layer", mc.n_layer}, {"n_head", mc.n_head}, {"n_embd", mc.n_embd}, {"vocab_size", mc.vocab_size},
                {"precision", mc.f16 ? "f16" : "f32"}};
  j["tokens"] = ids;
  j["text"] = nlohmann::json::array();
  for (int32_t t : ids) j["text"].push_back(decode(t));
  j["activations"] = nlohmann::json::array();
  for (const Activation& a : acts) {
    nlohmann::json s = to_json(a.stats);
    s["name"] = a.name;
    s["shape"] = a.shape;
    j["activations"].push_back(s);
  }
  auto get = [&](const std::string& n) -> const Activation& {
    for (const Activation& a : acts)
      if (a.name == n) return a;
    throw Error(fmt::format("[inspect] the forward reported no \"{}\"", n));
  };
  const int64_t T = static_cast<int64_t>(ids.size()), H = mc.n_head;
  j["attention"] = nlohmann::json::array();
  for (int64_t l = 0; l < mc.n_layer; ++l) {
    const std::vector<float> p = attention_probs(get(fmt::format("h.{}.attn.qkv", l)), H);
    nlohmann::json heads = nlohmann::json::array();
    for (int64_t h = 0; h < H; ++h) {
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t i = 0; i < T; ++i)
        rows.push_back(std::vector<float>(p.begin() + (h * T + i) * T, p.begin() + (h * T + i + 1) * T));
      heads.push_back(rows);
    }
    j["attention"].push_back({{"layer", l}, {"heads", heads}});  // heads[h][query][key]
  }
  j["logit_lens"] = nlohmann::json::array();
  for (int64_t l = -1; l < mc.n_layer; ++l) {
    const std::string name = l < 0 ? "embed" : fmt::format("h.{}.resid", l);
    nlohmann::json pos = nlohmann::json::array();
    for (const LensEntry& e : logit_lens(model, get(name), top_k)) {
      nlohmann::json top = nlohmann::json::array();
      for (size_t i = 0; i < e.ids.size(); ++i) top.push_back({{"id", e.ids[i]}, {"text", decode(e.ids[i])}, {"p", e.probs[i]}});
      pos.push_back(top);
    }
    j["logit_lens"].push_back({{"layer", name}, {"top", pos}});  // top[position][rank]
  }
  return j;
}

}  // namespace alpha
