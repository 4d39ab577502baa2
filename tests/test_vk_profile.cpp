// Per-kernel GPU timestamps (metrics.profile): with profiling on, the kernels that ran get positive times and
// the validation layer stays quiet; with it off, no query pool is ever made; a profiled training run writes
// step records whose backend.gpu_ms is a non-empty object that validates against docs/metrics.md.
#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/ops.h"
#include "core/rng.h"
#include "cli/cli.h"
#include "metrics/metrics_read.h"
#include "vk/backend.h"
#include "test_util.h"

using namespace alpha;

namespace {

std::unique_ptr<vk::VulkanBackend> make_backend(bool validation) {
  vk::RuntimeOptions o;
  o.device.allow_cpu = true;  // lavapipe in CI
  o.device.validation = validation;
  auto be = std::make_unique<vk::VulkanBackend>(o);
  for (int c = 0; c < 9; ++c) be->set_threshold(static_cast<OpClass>(c), 0);
  return be;
}

Tensor randn(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<float>(rng.normal());
  return Tensor::from_vector(v, s);
}

// matmul -> softmax -> gelu on `be` (made active for the duration), then waits for the GPU.
void run_ops(vk::VulkanBackend& be) {
  set_active_backend(&be);
  struct Restore {
    ~Restore() { set_active_backend(nullptr); }
  } restore;
  const int64_t gpu_before = dispatch_stats().gpu_ops;
  Tensor y = ops::gelu(ops::softmax(ops::matmul(randn({32, 64}, 1), randn({64, 48}, 2)), false));
  y.to_f64_vector();  // a read-back: a sync point
  be.sync();
  CHECK(dispatch_stats().gpu_ops - gpu_before == 3);
}

}  // namespace

TEST_CASE("vk profiling on: the kernels used get positive GPU times, no validation errors") {
  auto be = make_backend(/*validation=*/true);
  REQUIRE_MESSAGE(be->runtime().queue().profiling_available(), "the test device (lavapipe) has compute timestamps");
  CHECK(be->kernel_gpu_ns().empty());
  REQUIRE(be->set_profiling(true));
  run_ops(*be);
  const auto ns = be->kernel_gpu_ns();
  for (const char* k : {"matmul_small_f32", "softmax_f32", "gelu_f32"}) {  // small shapes: 64-wide matmul tiles
    INFO(k);
    REQUIRE(ns.count(k) == 1);
    CHECK(ns.at(k) > 0);
  }
  CHECK(ns.size() == 3);  // only the kernels that ran
  CHECK(be->runtime().queue().stats().query_pools >= 1);
  // A second round adds to the same entries.
  run_ops(*be);
  CHECK(be->kernel_gpu_ns().at("matmul_small_f32") > ns.at("matmul_small_f32"));
  be->sync();
  CHECK(be->runtime().device().validation_errors() == 0);
}

TEST_CASE("vk profiling by shape (ALPHA_VK_PROFILE_SHAPES): a matmul's time is labelled with its product") {
  auto be = make_backend(/*validation=*/false);
  REQUIRE(be->set_profiling(true));
  be->set_profile_shapes(true);
  run_ops(*be);
  const auto ns = be->kernel_gpu_ns();
  INFO(ns.size());
  REQUIRE(ns.count("matmul_small_f32[32x64x48 NN]") == 1);  // (32, 64) @ (64, 48): M x K x N, no transposes
  CHECK(ns.count("matmul_small_f32") == 0);
  CHECK(ns.count("softmax_f32") == 1);  // other kernels keep their names
}

TEST_CASE("vk profiling off: no query pools, no kernel times") {
  auto be = make_backend(/*validation=*/false);
  CHECK_FALSE(be->runtime().queue().profiling());
  run_ops(*be);
  CHECK(be->runtime().queue().stats().query_pools == 0);
  CHECK(be->kernel_gpu_ns().empty());
  // Switched on then off again: later recordings take no timestamps.
  be->set_profiling(true);
  run_ops(*be);
  const auto ns = be->kernel_gpu_ns();
  be->set_profiling(false);
  run_ops(*be);
  CHECK(be->kernel_gpu_ns() == ns);
}

TEST_CASE("a profiled Vulkan training run writes step records with a non-empty gpu_ms") {
  test::TempDir d;
  std::string err;
  REQUIRE(test::cli({"train", test::tiny_config(d.path), "--quiet", "--set", "device=vulkan", "--set",
               "dispatch.threshold=0", "--set", "dispatch.matmul_threshold=0", "--set", "metrics.profile=true",
               "--set", "train.max_steps=3", "--set", "train.eval_interval=100", "--set", "train.sample_tokens=0"},
              &err) == kExitOk);
  INFO(err);
  int steps = 0;
  for (const auto& l : test::read_jsonl(d.path / "run" / "metrics.jsonl")) {
    CHECK_MESSAGE(validate_record(l) == "", l.dump());
    if (l["type"] != "step") continue;
    ++steps;
    REQUIRE(l["backend"].contains("gpu_ms"));
    const auto& g = l["backend"]["gpu_ms"];
    REQUIRE(g.is_object());
    CHECK(!g.empty());
    CHECK((g.contains("matmul_f32") || g.contains("matmul_small_f32")));
    double total = 0;
    for (const auto& [k, v] : g.items()) total += v.get<double>();
    CHECK(total > 0);
  }
  CHECK(steps == 3);
}
