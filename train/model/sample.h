// Autoregressive sampling from a trained GPT (temperature, top-k, top-p) with a KV cache. Runs without gradients.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "model/gpt.h"

namespace alpha {

struct SampleOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = all
  double top_p = 1.0;        // nucleus: keep the most likely tokens whose probabilities sum to >= top_p; 1 = all
};

// Picks the next token from one row of logits (V) after temperature, top-k and top-p filtering.
int32_t sample_token(std::vector<float> logits, const SampleOptions& opt, Rng& rng);

// Appends tokens to `ids` (the prompt; may be empty: starts from token 0) and calls on_token for each new one.
// The prompt (its last block_size tokens) is prefilled into a KV cache once, then each step feeds one token.
// When the context would exceed block_size, the cache is rebuilt from the last block_size tokens (positions
// restart at 0, exactly as re-running the cropped window would), so past that point a step costs a full window.
std::vector<int32_t> generate(const GPT& model, std::vector<int32_t> ids, const SampleOptions& opt, Rng& rng,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace alpha
