// Shared fixture for the Vulkan tests: one backend for the process (lavapipe is accepted: CI has no GPU),
// helpers that run an op on the GPU and on the CPU, and comparisons with per-op tolerances.
// No Vulkan device at all makes every test fail with the NoDeviceError message (never skipped).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "core/rng.h"
#include "vk/backend.h"

namespace alpha::vktest {

inline vk::VulkanBackend& gpu() {
  static vk::VulkanBackend be([] {
    vk::RuntimeOptions o;
    o.device.allow_cpu = true;  // lavapipe in CI
    return o;
  }());
  return be;
}

// Makes the GPU backend active with every threshold at 0 (everything it accepts runs on the GPU).
struct GpuScope {
  GpuScope() {
    for (int c = 0; c < 9; ++c) gpu().set_threshold(static_cast<OpClass>(c), 0);
    set_active_backend(&gpu());
  }
  ~GpuScope() { set_active_backend(nullptr); }
};

// Runs f on the CPU path only (no active backend), restoring the GPU backend after.
template <class F>
auto on_cpu(F&& f) {
  Backend* prev = active_backend();
  set_active_backend(nullptr);
  struct Restore {
    Backend* p;
    ~Restore() { set_active_backend(p); }
  } restore{prev};
  return f();
}

// Runs f with the GPU active and checks that it dispatched `expect_gpu` ops to the GPU.
template <class F>
auto on_gpu(F&& f, int64_t expect_gpu = 1) {
  const int64_t before = dispatch_stats().gpu_ops;
  auto r = f();
  CHECK_MESSAGE(dispatch_stats().gpu_ops - before == expect_gpu, "the op did not run on the GPU");
  return r;
}

inline Tensor randn(const Shape& s, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return Tensor::from_vector(v, s);
}
inline Tensor randu(const Shape& s, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return Tensor::from_vector(v, s);
}

// |got - want| <= atol + rtol * |want| elementwise, same shape; reports the first mismatch.
// Fresh leaf copies of params (a second optimizer's identical starting point).
inline std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(t.clone().set_requires_grad(true));
  return out;
}

// A host copy of a tensor's floats (downloads a GPU-resident one).
inline std::vector<float> host_floats(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.numel());
}

// Dispatches of kernel k so far (counted when ALPHA_VK_STATS=1 was set before the backend was built).
inline int64_t kernel_runs(const std::string& k) {
  const auto& m = gpu().runtime().kernel_counts();
  const auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// max_i |a_i - b_i| / max_i |b_i| (the absolute difference when b is all zeros).
inline double rel_err(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  REQUIRE(x.size() == y.size());
  double d = 0, m = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(x[i] - y[i])), m = std::max(m, std::abs(y[i]));
  return m > 0 ? d / m : d;
}

inline void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_f64_vector(), w = want.to_f64_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]) || (std::isnan(g[i]) && std::isnan(w[i]));
    if (!ok) {
      FAIL_CHECK(what << ": element " << i << " got " << g[i] << " want " << w[i]);
      return;
    }
  }
}
inline void expect_close(const Tensor& got, const std::vector<double>& want, const Shape& s, double rtol, double atol,
                         const std::string& what) {
  expect_close(got, Tensor::from_vector(want, s), rtol, atol, what);
}

// Ends a test: waits for the queue and checks the validation layer reported nothing (when on).
inline void expect_clean() {
  gpu().sync();
  CHECK(gpu().runtime().device().validation_errors() == 0);
}

}  // namespace alpha::vktest
