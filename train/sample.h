// Autoregressive sampling from a trained GPT (temperature, top-k). Runs without gradients.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "train/gpt.h"

namespace alpha {

struct SampleOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = all
};

// Appends tokens to `ids` (the prompt; may be empty: starts from token 0) and calls on_token for each new one.
std::vector<int32_t> generate(const GPT& model, std::vector<int32_t> ids, const SampleOptions& opt, Rng& rng,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace alpha
