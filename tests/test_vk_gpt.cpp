// End to end through autograd: a tiny GPT's loss and every parameter gradient with every op the Vulkan
// backend accepts on the GPU (thresholds 0) match the CPU run, dropout on (identical Philox masks), and
// over a few AdamW steps the losses stay within 1e-4 relative. Built only where train/ exists.
#include <cmath>

#include "autograd/tape.h"
#include "optim/adamw.h"
#include "tests/vk_test_util.h"
#include "model/gpt.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
struct Run {
  std::vector<double> losses;
  std::vector<std::vector<double>> grads;  // of the first step
};

Run train(bool on_gpu_backend, int steps, int64_t* gpu_cpu_ops = nullptr) {
  GPTConfig cfg{2, 2, 32, 16, 65, 0.1, true};
  Rng init(7);
  GPT model(cfg, init);
  const std::vector<Tensor> params = model.parameters();
  AdamW opt(params, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  Rng data(8), drop(9);
  Run r;
  for (int s = 0; s < steps; ++s) {
    std::vector<int32_t> x(2 * 16), y(2 * 16);
    for (auto& v : x) v = static_cast<int32_t>(data.below(65));
    for (auto& v : y) v = static_cast<int32_t>(data.below(65));
    const Tensor xi = Tensor::from_vector(x, {2, 16}), yi = Tensor::from_vector(y, {2, 16});
    if (on_gpu_backend) set_active_backend(&gpu());
    const int64_t cpu0 = dispatch_stats().cpu_ops;
    Tensor loss = model.loss(xi, yi, /*training=*/true, drop);
    ag::backward(loss);
    if (gpu_cpu_ops && on_gpu_backend) *gpu_cpu_ops += dispatch_stats().cpu_ops - cpu0;
    set_active_backend(nullptr);
    r.losses.push_back(loss.item());
    if (s == 0)
      for (const Tensor& p : params) r.grads.push_back(p.grad().to_f64_vector());
    opt.step(1e-3);
    opt.zero_grad();
  }
  return r;
}
}  // namespace

TEST_CASE("vk tiny GPT: loss, gradients and 5 AdamW steps with dropout match the CPU run") {
  for (int c = 0; c < 9; ++c) gpu().set_threshold(static_cast<OpClass>(c), 0);
  const int64_t gpu0 = dispatch_stats().gpu_ops, cpu0 = dispatch_stats().cpu_ops;
  const Run g = train(true, 5);
  const int64_t gpu_ops = dispatch_stats().gpu_ops - gpu0, cpu_ops = dispatch_stats().cpu_ops - cpu0;
  MESSAGE("CPU ops in the GPU run (declined or CPU-only ops): " << cpu_ops);
  const Run c = train(false, 5);
  MESSAGE("GPU ops in the GPU run: " << gpu_ops);
  CHECK(gpu_ops > 100);
  for (size_t s = 0; s < g.losses.size(); ++s)
    CHECK(std::fabs(g.losses[s] - c.losses[s]) <= 1e-4 * std::fabs(c.losses[s]));
  double worst = 0;
  for (size_t i = 0; i < g.grads.size(); ++i) {
    double scale = 0;
    for (double v : c.grads[i]) scale = std::max(scale, std::fabs(v));
    for (size_t k = 0; k < g.grads[i].size(); ++k)
      worst = std::max(worst, std::fabs(g.grads[i][k] - c.grads[i][k]) / std::max(std::fabs(c.grads[i][k]), 0.1 * scale + 1e-30));
  }
  MESSAGE("worst gradient error: " << worst);
  CHECK(worst <= 1e-3);
  expect_clean();
}

TEST_CASE("vk tiny GPT: 20 training steps at threshold 0 match the CPU loss curve within 1e-4, no CPU fallbacks") {
  for (int c = 0; c < 9; ++c) gpu().set_threshold(static_cast<OpClass>(c), 0);
  int64_t cpu_ops = 0;  // ops of the forward/backward that still ran on the CPU in the GPU run
  const Run g = train(true, 20, &cpu_ops);
  const Run c = train(false, 20);
  MESSAGE("CPU ops in 20 GPU steps: " << cpu_ops);
  CHECK(cpu_ops == 0);
  REQUIRE(g.losses.size() == 20);
  for (size_t s = 0; s < g.losses.size(); ++s) {
    CAPTURE(s);
    CHECK(std::fabs(g.losses[s] - c.losses[s]) <= 1e-4 * std::fabs(c.losses[s]));
  }
  CHECK(c.losses.back() < c.losses.front());  // it trains: the curves being compared are not flat
  expect_clean();
}
