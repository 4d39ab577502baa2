// Comparisons of a model's outputs with reference values (PyTorch fixtures), shared by the model, Llama,
// checkpoint-export and Hugging Face tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "model/gpt.h"

namespace alpha {

// Largest |a - r| relative to |r|, with |r| floored at a tenth of r's largest magnitude (tiny entries do not blow up).
inline double rel_error(const std::vector<double>& a, const std::vector<double>& r) {
  REQUIRE(a.size() == r.size());
  double scale = 0;
  for (double v : r) scale = std::max(scale, std::fabs(v));
  const double floor = std::max(0.1 * scale, 1e-30);
  double err = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(a[i] - r[i]) / std::max(std::fabs(r[i]), floor));
  return err;
}

// Largest |ours - reference| over the logits of a fixture's inputs: j = {"inputs": [B][T] ids, "logits": B*T*V}.
inline double worst_logit_error(const GPT& m, const nlohmann::json& j) {
  std::vector<int32_t> ids;
  for (const auto& row : j["inputs"])
    for (const auto& v : row) ids.push_back(v.get<int32_t>());
  const int64_t B = static_cast<int64_t>(j["inputs"].size()), T = static_cast<int64_t>(j["inputs"][0].size());
  ag::NoGrad ng;
  Rng unused(0);
  const std::vector<double> ours = m.forward(Tensor::from_vector(ids, {B, T}), false, unused).to_f64_vector();
  const std::vector<double> ref = j["logits"].get<std::vector<double>>();
  REQUIRE(ours.size() == ref.size());
  double worst = 0;
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(ours[i] - ref[i]));
  return worst;
}

}  // namespace alpha
