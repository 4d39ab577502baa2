// The fused-fma probe (VulkanBackend::fused_fma, spirv/fma_probe.comp) and GpuAdamW's choice of kernels from it:
// the FUSED_FMA variants where fma() is fused (the GPU machine), the emulated ones elsewhere (lavapipe). Their bits
// against the CPU are test_vk_adamw's checks, which run whichever variant the probe picks.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "vk/adamw.h"
#include "vk_test_util.h"

using namespace alpha;

TEST_CASE("fused_fma: one verdict per device, and GpuAdamW runs the _fma kernels exactly where it is fused") {
  REQUIRE(setenv("ALPHA_VK_STATS", "1", 0) == 0);
  vktest::GpuScope scope;
  const bool fused = vktest::gpu().fused_fma();
  MESSAGE("fma() fused on this device: " << fused);
  CHECK(vktest::gpu().fused_fma() == fused);
  // The probe's first triples tell the two apart: a*b rounds to -c, so only a fused fma keeps the 2^-24.
  const float e = std::ldexp(1.0f, -12), a = 1 + e, c = -(1 + 2 * e);
  CHECK(std::fma(a, a, c) == std::ldexp(1.0f, -24));
  volatile float prod = a * a;  // rounded, as an unfused fma() would
  CHECK(prod + c == 0.0f);
  std::vector<Tensor> ps{vktest::randn({64, 4}, 950).set_requires_grad(true)};
  vktest::gpu().runtime().input(ps[0]);
  vk::GpuAdamW opt(vktest::gpu(), ps, AdamWOptions{});
  ps[0].set_grad(vktest::randn({64, 4}, 951));
  const int64_t f0 = vktest::kernel_runs("adamw_f32_vec4_multi_fma"), u0 = vktest::kernel_runs("adamw_f32_vec4_multi");
  opt.clip_and_step(1e-3, 1.0);
  (void)opt.read_stats();
  CHECK(vktest::kernel_runs("adamw_f32_vec4_multi_fma") - f0 == (fused ? 1 : 0));
  CHECK(vktest::kernel_runs("adamw_f32_vec4_multi") - u0 == (fused ? 0 : 1));
}
