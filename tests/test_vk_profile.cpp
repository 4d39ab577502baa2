// Per-kernel GPU timestamps (metrics.profile): with profiling on, the kernels that ran get positive times and
// the validation layer stays quiet; with it off, no query pool is ever made; a profiled training run writes
// step records whose backend.gpu_ms is a non-empty object that validates against docs/metrics.md.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

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

TEST_CASE("vk edge timing: each submission's start and end give the GPU's busy and idle time, no validation errors") {
  auto be = make_backend(/*validation=*/true);
  auto& q = be->runtime().queue();
  run_ops(*be);
  CHECK(q.stats().edge_submissions == 0);  // off by default: no timestamps
  CHECK(q.stats().query_pools == 0);
  REQUIRE(q.set_edge_timing(true));
  const auto before = q.stats();
  run_ops(*be);
  // The host sleeps between two rounds: the GPU's idle time between them covers the sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  run_ops(*be);
  const auto after = q.stats();
  const int64_t subs = after.submissions - before.submissions;
  CHECK(subs >= 2);
  CHECK(after.edge_submissions - before.edge_submissions == subs);  // every submission retired and read
  CHECK(after.gpu_busy_ns > before.gpu_busy_ns);
  CHECK(after.gpu_gap_ns - before.gpu_gap_ns >= 15'000'000);
  CHECK(after.starved_submissions - before.starved_submissions >= 1);  // the round after the sleep found it idle
  CHECK(q.set_edge_timing(false) == false);
  run_ops(*be);
  CHECK(q.stats().edge_submissions == after.edge_submissions);
  CHECK(be->kernel_gpu_ns().empty());  // edge timing is not per-kernel profiling
  be->sync();
  CHECK(be->runtime().device().validation_errors() == 0);
}

TEST_CASE("vk spinning host waits (ALPHA_VK_SPIN_US) give the same results and end at the GPU's completion") {
  setenv("ALPHA_VK_SPIN_US", "2e6", 1);  // forced on lavapipe, a CPU device that blocks by default
  auto be = make_backend(/*validation=*/true);
  unsetenv("ALPHA_VK_SPIN_US");
  REQUIRE(be->runtime().queue().policy().spin_wait_us == 2e6);
  set_active_backend(be.get());
  const Tensor a = randn({48, 40}, 5), b = randn({40, 24}, 6);
  const std::vector<float> got = ops::gelu(ops::matmul(a, b)).to_f32_vector();  // read-back: a spinning wait
  set_active_backend(nullptr);
  const std::vector<float> want = ops::gelu(ops::matmul(a, b)).to_f32_vector();  // CPU oracle
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-4));
  CHECK(be->runtime().queue().stats().host_reads >= 1);
  be->sync();
  CHECK(be->runtime().device().validation_errors() == 0);
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
