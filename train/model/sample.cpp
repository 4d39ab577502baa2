#include "model/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/tape.h"
#include "core/error.h"

namespace alpha {

int32_t sample_token(std::vector<float> row, const SampleOptions& opt, Rng& rng) {
  const int64_t V = static_cast<int64_t>(row.size());
  if (opt.temperature == 0) return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
  if (opt.top_k > 0 && opt.top_k < V) {  // keep the k largest logits
    std::vector<float> sorted = row;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<>());
    const float kth = sorted[static_cast<size_t>(opt.top_k - 1)];
    for (int64_t v = 0; v < V; ++v)
      if (row[v] < kth) row[v] = -INFINITY;
  }
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]) / opt.temperature);
  std::vector<double> p(static_cast<size_t>(V));
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += p[v] = std::exp(static_cast<double>(row[v]) / opt.temperature - mx);
  if (opt.top_p < 1.0) {  // nucleus: smallest set of most likely tokens (ties by index) with mass >= top_p
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double kept = 0;
    size_t n = 0;
    while (n < order.size() && (n == 0 || kept < opt.top_p * total)) kept += p[order[n++]];
    for (size_t i = n; i < order.size(); ++i) p[order[i]] = 0;
    total = kept;
  }
  double u = static_cast<double>(rng.uniform()) * total;
  int32_t next = 0;
  for (int64_t v = 0; v < V; ++v)
    if (p[v] > 0) next = static_cast<int32_t>(v);  // fallback if rounding leaves u >= 0: last allowed token
  for (int64_t v = 0; v < V; ++v) {
    u -= p[v];
    if (u < 0 && p[v] > 0) return static_cast<int32_t>(v);
  }
  return next;
}

std::vector<int32_t> generate(const GPT& model, std::vector<int32_t> ids, const SampleOptions& opt, Rng& rng,
                              const std::function<void(int32_t)>& on_token) {
  ALPHA_CHECK(opt.temperature >= 0 && std::isfinite(opt.temperature), ValueError,
              "[sample] temperature must be >= 0, got {}", opt.temperature);
  ALPHA_CHECK(opt.top_p > 0 && opt.top_p <= 1, ValueError, "[sample] top_p must be in (0, 1], got {}", opt.top_p);
  ALPHA_CHECK(opt.top_k >= 0, ValueError, "[sample] top_k must be >= 0, got {}", opt.top_k);
  ag::NoGrad no_grad;
  if (ids.empty()) ids.push_back(0);
  const int64_t block = model.config().block_size;
  KVCache cache = model.make_cache(1);
  auto prefill = [&] {  // the last block_size tokens of ids, from position 0
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), block);
    cache.clear();
    return model.forward_cached(Tensor::from_vector(std::vector<int32_t>(ids.end() - T, ids.end()), {1, T}), cache);
  };
  Tensor logits;  // (1, Tn, V): the last row predicts the next token
  for (int64_t n = 0; n < opt.max_new_tokens; ++n) {
    if (n == 0 || cache.length == block) {
      logits = prefill();
    } else {
      logits = model.forward_cached(Tensor::from_vector(std::vector<int32_t>{ids.back()}, {1, 1}), cache);
    }
    const int64_t Tn = logits.size(1);
    const int32_t next = sample_token(logits.narrow(1, Tn - 1, 1).to_f32_vector(), opt, rng);
    ids.push_back(next);
    if (on_token) on_token(next);
  }
  return ids;
}

}  // namespace alpha
