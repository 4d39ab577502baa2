#include "train/sample.h"

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"
#include "core/error.h"

namespace alpha {

std::vector<int32_t> generate(const GPT& model, std::vector<int32_t> ids, const SampleOptions& opt, Rng& rng,
                              const std::function<void(int32_t)>& on_token) {
  ALPHA_CHECK(opt.temperature >= 0 && std::isfinite(opt.temperature), ValueError,
              "[sample] temperature must be >= 0, got {}", opt.temperature);
  ag::NoGrad no_grad;
  if (ids.empty()) ids.push_back(0);
  const int64_t V = model.config().vocab_size, block = model.config().block_size;
  Rng unused(0);
  for (int64_t n = 0; n < opt.max_new_tokens; ++n) {
    // Crop the context to the last block_size tokens (no KV cache yet: each step re-runs the window).
    const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), block);
    std::vector<int32_t> ctx(ids.end() - T, ids.end());
    Tensor logits = model.forward(Tensor::from_vector(ctx, {1, T}), /*training=*/false, unused);  // (1, T, V)
    std::vector<float> row = logits.narrow(1, T - 1, 1).to_f32_vector();                          // (V)
    int32_t next = 0;
    if (opt.temperature == 0) {
      next = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    } else {
      std::vector<double> p(static_cast<size_t>(V));
      double mx = -INFINITY;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]) / opt.temperature);
      if (opt.top_k > 0 && opt.top_k < V) {  // keep the k largest logits
        std::vector<float> sorted = row;
        std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<>());
        const float kth = sorted[static_cast<size_t>(opt.top_k - 1)];
        for (int64_t v = 0; v < V; ++v)
          if (row[v] < kth) row[v] = -INFINITY;
      }
      double total = 0;
      for (int64_t v = 0; v < V; ++v) total += p[v] = std::exp(static_cast<double>(row[v]) / opt.temperature - mx);
      double u = static_cast<double>(rng.uniform()) * total;
      for (int64_t v = 0; v < V; ++v)
        if (p[v] > 0) next = static_cast<int32_t>(v);  // fallback if rounding leaves u >= 0: last allowed token
      for (int64_t v = 0; v < V; ++v) {
        u -= p[v];
        if (u < 0) {
          next = static_cast<int32_t>(v);
          break;
        }
      }
    }
    ids.push_back(next);
    if (on_token) on_token(next);
  }
  return ids;
}

}  // namespace alpha
