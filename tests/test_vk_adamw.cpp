// GPU-resident AdamW (vk::GpuAdamW, optim.device "gpu") against the CPU reference (optim/adamw.cpp +
// optim/clip.cpp + optim/loss_scale.cpp): the update at awkward sizes with weight decay on/off and clipping
// active/inactive, the deterministic grad norm, the GPU-side veto of non-finite steps, f16 loss-scale unscaling,
// and the optimizer's kernels at the sizes a GPT uses (test_vk_adamw_train.cpp has the tiny GPT runs).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/loss_scale.h"
#include "test_util.h"
#include "cli/cli.h"
#include "loop/guard.h"
#include "loop/run_checkpoint.h"
#include "vk/adamw.h"
#include "vk_test_util.h"

using namespace alpha;
using vktest::clones;
using vktest::host_floats;
using vktest::rel_err;
using namespace alpha::test;

namespace {

const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;  // before the backend is built

// Awkward sizes: 1-D params (no weight decay) and 2-D ones (decay), none a multiple of the workgroup size.
const std::vector<Shape> kShapes = {{1}, {17}, {3, 43}, {10, 100}, {1, 1}, {129}};

std::vector<Tensor> make_params(uint64_t seed) {
  std::vector<Tensor> ps;
  for (size_t i = 0; i < kShapes.size(); ++i) ps.push_back(vktest::randn(kShapes[i], seed + i).set_requires_grad(true));
  return ps;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// 5 steps of the CPU reference (clip_grad_norm + AdamW) and of GpuAdamW on identical params and grads.
// Returns the clip scale of the GPU's last step; checks params, m, v and the norms every step.
double run_five_steps(double max_norm, double grad_scale, const AdamWOptions& o) {
  vktest::GpuScope scope;
  std::vector<Tensor> pc = make_params(100), pg = clones(pc);
  AdamW cpu(pc, o);
  vk::GpuAdamW gpu(vktest::gpu(), pg, o);
  double scale = 0;
  int identical = 0, compared = 0;
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = vktest::randn(pc[i].shape(), 1000 + 10 * step + i, grad_scale);
      pc[i].set_grad(g);
      pg[i].set_grad(g.clone());
    }
    if (step == 2) pg[1].set_grad(Tensor()), pc[1].set_grad(Tensor());  // a param without a grad is skipped
    const double lr = 1e-2 * (step + 1);
    const double norm = clip_grad_norm(pc, max_norm);
    cpu.step(lr);
    gpu.clip_and_step(lr, max_norm);
    const vk::GpuAdamW::Stats s = gpu.read_stats();
    CHECK(std::abs(s.grad_norm - norm) <= 1e-6 * norm);
    scale = s.clip_scale;
    for (size_t i = 0; i < pc.size(); ++i) identical += same_bytes(pg[i], pc[i]);
    compared += static_cast<int>(pc.size());
    for (size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(i);
      CHECK(rel_err(pg[i], pc[i]) <= 1e-6);
      CHECK(rel_err(gpu.exp_avg()[i], cpu.exp_avg()[i]) <= 1e-6);
      CHECK(rel_err(gpu.exp_avg_sq()[i], cpu.exp_avg_sq()[i]) <= 1e-6);
    }
    cpu.zero_grad();
    gpu.zero_grad();
  }
  CHECK(gpu.step_count() == 5);
  MESSAGE(identical << " of " << compared << " param tensors bit-identical to the CPU's after each step");
  // Exact fma, division and sqrt in the kernel: the same bits as the CPU but for rare double roundings.
  CHECK(identical * 10 >= compared * 9);
  // The params really changed (the comparison above is not between two untouched copies).
  CHECK(rel_err(pg[3], make_params(100)[3]) > 1e-3);
  return scale;
}

// Grads whose elements spread over 2^-30 .. 2^4: the float-float products of the update and the norm meet exponents
// over ~70 binades, their errors stay normal floats (subnormal ones the emulation may flush, a fused fma does not).
Tensor spread_grad(const Shape& s, uint64_t seed) {
  Tensor g = vktest::randn(s, seed);
  float* p = g.mutable_data<float>();
  Rng rng(seed + 7);
  for (int64_t i = 0; i < g.numel(); ++i) p[i] = std::ldexp(p[i], static_cast<int>(rng.next_u32() % 35) - 30);
  return g;
}


// Params, m and v of a GPU optimizer, as host copies.
std::vector<std::vector<float>> snapshot(vk::GpuAdamW& gpu, const std::vector<Tensor>& ps) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < ps.size(); ++i)
    for (const Tensor& t : {ps[i], gpu.exp_avg()[i], gpu.exp_avg_sq()[i]}) out.push_back(host_floats(t));
  return out;
}

bool same_floats(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4) != 0) return false;
  return true;
}


}  // namespace

TEST_CASE("gpu adamw: 5 steps match the CPU AdamW (weight decay on 2-D params, clipping inactive)") {
  const AdamWOptions o{0.9, 0.99, 1e-8, 0.1};
  CHECK(run_five_steps(1e6, 1.0, o) == 1.0);  // the norm is far below max_norm: scale exactly 1
  CHECK(run_five_steps(0.0, 1.0, o) == 1.0);  // max_norm 0: clipping off
}

TEST_CASE("gpu adamw: 5 steps match the CPU AdamW with clipping active and no weight decay") {
  const double scale = run_five_steps(0.5, 3.0, AdamWOptions{0.8, 0.95, 1e-6, 0.0});
  CHECK(scale < 0.1);  // the grads (norm ~ 100) really were scaled
}

TEST_CASE("gpu adamw: the grad norm matches the CPU's double sum and is bit-identical run to run") {
  vktest::GpuScope scope;
  std::vector<Tensor> ps;
  const std::vector<Shape> shapes = {{1}, {17}, {129}, {1000}, {300, 333}, {8193}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    ps.push_back(Tensor::zeros(shapes[i]).set_requires_grad(true));
    // Magnitudes spread over 1e-3 .. 1e2, so small terms must not be lost next to large ones.
    ps.back().set_grad(vktest::randn(shapes[i], 50 + i, std::pow(10.0, double(i) - 3.0)));
  }
  const double cpu_norm = clip_grad_norm(ps, 0.0);
  std::vector<uint32_t> seen;
  for (int run = 0; run < 3; ++run) {
    std::vector<Tensor> pg = clones(ps);
    for (size_t i = 0; i < ps.size(); ++i) pg[i].set_grad(ps[i].grad().clone());
    vk::GpuAdamW gpu(vktest::gpu(), pg, AdamWOptions{});
    gpu.clip_and_step(0.0, 1.0);
    const vk::GpuAdamW::Stats s = gpu.read_stats();
    CHECK(std::abs(s.grad_norm - cpu_norm) <= 1e-6 * cpu_norm);
    // The clip coefficient is optim/clip.cpp's float formula on the (f32) norm.
    const float want = 1.0f / (static_cast<float>(s.grad_norm) + 1e-6f);
    CHECK(bits(static_cast<float>(s.clip_scale)) == bits(want));
    seen.push_back(bits(static_cast<float>(s.grad_norm)));
  }
  CHECK(seen[0] == seen[1]);
  CHECK(seen[1] == seen[2]);
  MESSAGE("grad norm cpu " << cpu_norm << " gpu bits " << seen[0]);
}

TEST_CASE("gpu adamw: the fused-fma kernels give the emulated kernels' bits; ALPHA_VK_FUSED_FMA is checked") {
  vktest::GpuScope scope;
  const std::vector<Tensor> ps0 = [] {
    std::vector<Tensor> v = make_params(300);
    v.push_back(vktest::randn({256, 1001}, 399).set_requires_grad(true));  // the 4-wide kernel
    return v;
  }();
  auto run = [&](const char* mode) {
    setenv("ALPHA_VK_FUSED_FMA", mode, 1);
    std::vector<Tensor> ps = clones(ps0);
    AdamWOptions o;
    o.weight_decay = 0.1;
    vk::GpuAdamW gpu(vktest::gpu(), ps, o);
    std::vector<double> norms;
    for (int step = 0; step < 4; ++step) {
      for (size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(spread_grad(ps[i].shape(), 2000 + 10 * step + i));
      gpu.clip_and_step(1e-2, 1.0, 0.5);
      norms.push_back(gpu.read_stats().grad_norm);
      gpu.zero_grad();
    }
    unsetenv("ALPHA_VK_FUSED_FMA");
    return std::tuple{gpu.ffma(), snapshot(gpu, ps), norms};
  };
  const auto [off_suffix, off, off_norms] = run("0");
  CHECK(off_suffix.empty());
  const auto [auto_suffix, on, on_norms] = run("auto");
  const std::string verdict = auto_suffix.empty() ? "no (emulated kernels)" : "yes";
  MESSAGE("fused fma on this device: " << verdict);
  if (auto_suffix.empty()) {
    CHECK_THROWS_WITH_AS(run("1"), doctest::Contains("not fused"), ValueError);
  } else {
    CHECK(same_floats(on, off));  // params, m and v after 4 steps, bit for bit
    CHECK(on_norms == off_norms);
    CHECK(std::get<0>(run("1")) == "_ffma");
  }
  CHECK_THROWS_WITH_AS(run("yes"), doctest::Contains("ALPHA_VK_FUSED_FMA"), ValueError);
  unsetenv("ALPHA_VK_FUSED_FMA");
}

TEST_CASE("gpu adamw: a step keeps the params on the GPU (host copies stale, nothing read back)") {
  vktest::GpuScope scope;
  std::vector<Tensor> ps = make_params(7);
  vk::GpuAdamW gpu(vktest::gpu(), ps, AdamWOptions{});
  for (Tensor& p : ps) p.set_grad(vktest::randn(p.shape(), 9));
  const int64_t reads0 = vktest::gpu().queue_counters().host_reads;
  gpu.clip_and_step(1e-3, 1.0);
  gpu.add_loss(Tensor::scalar(2.5), true);
  gpu.add_loss(Tensor::scalar(0.5), false);
  CHECK(vktest::gpu().queue_counters().host_reads == reads0);  // recording reads nothing
  for (const Tensor& p : ps) {
    CHECK(p.storage()->device_valid());
    CHECK(!p.storage()->host_valid());
  }
  CHECK(gpu.read_stats().loss == 3.0);
  CHECK(vktest::gpu().queue_counters().host_reads == reads0 + 1);
}

TEST_CASE("gpu adamw: the update rewrites a weight's cached f16 copy, which then equals a fresh cast of it") {
  REQUIRE(kKernelCounts);
  vktest::GpuScope scope;
  std::vector<Tensor> ps = make_params(11);
  for (Tensor& p : ps) vktest::gpu().runtime().input(p);  // the params live on the GPU, as in training
  vk::GpuAdamW gpu(vktest::gpu(), ps, AdamWOptions{});
  // Every param but the first gets its f16 copy (the forward's casts); the first is updated without one.
  std::vector<Tensor> h(ps.size());
  for (size_t i = 1; i < ps.size(); ++i) h[i] = ops::cast_cached(ps[i], DType::f16);
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(vktest::randn(ps[i].shape(), 40 + 10 * step + i));
    const int64_t h16_before = vktest::kernel_runs("adamw_f32_vec4_h16" + gpu.ffma()) + vktest::kernel_runs("adamw_f32_h16" + gpu.ffma());
    const int64_t multi_before = vktest::kernel_runs("adamw_f32_vec4_multi" + gpu.ffma());
    gpu.clip_and_step(1e-2, 1.0);
    vktest::gpu().sync();
    // The sizes that divide by 4 ({10, 100}) update in the multi-param kernel, the others one by one.
    CHECK(vktest::kernel_runs("adamw_f32_vec4_h16" + gpu.ffma()) + vktest::kernel_runs("adamw_f32_h16" + gpu.ffma()) ==
          h16_before + static_cast<int64_t>(ps.size()) - 2);
    CHECK(vktest::kernel_runs("adamw_f32_vec4_multi" + gpu.ffma()) == multi_before + 1);
    const int64_t casts = vktest::kernel_runs("cast_f32_f16") + vktest::kernel_runs("cast_f32_f16_vec4");
    for (size_t i = 1; i < ps.size(); ++i) {
      CAPTURE(i);
      const Tensor c = ops::cast_cached(ps[i], DType::f16);  // no cast: the update wrote it
      CHECK(c.storage() == h[i].storage());
      // The cast's rounding of the updated weight (f16 -> f64 is exact, so equal values are equal halves).
      CHECK(c.to_f64_vector() == ps[i].to(DType::f16).to_f64_vector());
    }
    vktest::gpu().sync();
    CHECK(vktest::kernel_runs("cast_f32_f16") + vktest::kernel_runs("cast_f32_f16_vec4") == casts);
    gpu.zero_grad();
  }
  // A write the optimizer did not make (here on the host) makes the next cached cast a fresh one.
  ps[2].mutable_data<float>()[0] = 3.0f;
  const Tensor c = ops::cast_cached(ps[2], DType::f16);
  CHECK(c.to(DType::f32).data<float>()[0] == 3.0f);
  CHECK(c.to_f64_vector() == ps[2].to(DType::f16).to_f64_vector());
}

TEST_CASE("gpu adamw: params in groups of 6 per dispatch update as one by one: CPU bits, decay by rank, f16 copies") {
  REQUIRE(kKernelCounts);
  vktest::GpuScope scope;
  // 14 params whose sizes divide by 4 (three multi-param dispatches: 6, 6, 2), 1-D (no decay) and 2-D, with and
  // without an f16 copy, among two that do not (one by one).
  const std::vector<Shape> shapes = {{4},  {8, 4}, {768}, {3, 4}, {16, 16}, {12},  {2, 2, 2}, {5},
                                     {40}, {6, 6}, {1024}, {4, 9}, {7, 3},  {256}, {8},       {20, 12}};
  std::vector<Tensor> pc, pg;
  for (size_t i = 0; i < shapes.size(); ++i) {
    pc.push_back(vktest::randn(shapes[i], 300 + i).set_requires_grad(true));
    pg.push_back(pc.back().clone().set_requires_grad(true));
    vktest::gpu().runtime().input(pg.back());
  }
  const AdamWOptions o{0.9, 0.95, 1e-8, 0.1};
  AdamW cpu(pc, o);
  vk::GpuAdamW gpu(vktest::gpu(), pg, o);
  std::vector<Tensor> h(pg.size());
  for (size_t i = 0; i < pg.size(); i += 2) h[i] = ops::cast_cached(pg[i], DType::f16);
  int identical = 0, compared = 0;
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = vktest::randn(pc[i].shape(), 900 + 10 * step + i);
      pc[i].set_grad(g);
      pg[i].set_grad(g.clone());
    }
    const int64_t before = vktest::kernel_runs("adamw_f32_vec4_multi" + gpu.ffma());
    clip_grad_norm(pc, 0.0);
    cpu.step(1e-2);
    gpu.clip_and_step(1e-2, 0.0);
    (void)gpu.read_stats();
    CHECK(vktest::kernel_runs("adamw_f32_vec4_multi" + gpu.ffma()) == before + 3);
    for (size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(i);
      identical += same_bytes(pg[i], pc[i]) + same_bytes(gpu.exp_avg()[i], cpu.exp_avg()[i]) +
                   same_bytes(gpu.exp_avg_sq()[i], cpu.exp_avg_sq()[i]);
      compared += 3;
      CHECK(rel_err(pg[i], pc[i]) <= 1e-6);
      CHECK(rel_err(gpu.exp_avg_sq()[i], cpu.exp_avg_sq()[i]) <= 1e-6);
      if (h[i].defined()) CHECK(ops::cast_cached(pg[i], DType::f16).to_f64_vector() == pg[i].to(DType::f16).to_f64_vector());
    }
    cpu.zero_grad();
    gpu.zero_grad();
  }
  MESSAGE(identical << " of " << compared << " p / m / v tensors bit-identical to the CPU's");
  CHECK(identical * 10 >= compared * 9);
  CHECK(rel_err(pg[4], vktest::randn(shapes[4], 304)) > 1e-3);  // the params really moved
}

TEST_CASE("gpu adamw: a NaN/inf grad or loss vetoes the step on the GPU (p, m, v, count kept); the next matches the CPU") {
  vktest::GpuScope scope;
  const AdamWOptions o{0.9, 0.99, 1e-8, 0.1};
  std::vector<Tensor> pc = make_params(300), pg = clones(pc);
  AdamW cpu(pc, o);
  vk::GpuAdamW gpu(vktest::gpu(), pg, o);
  // A finite step on both (the CPU reference never sees the vetoed ones, like the trainer's CPU path).
  auto good_step = [&](uint64_t seed, double lr, bool read) {
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = vktest::randn(pc[i].shape(), seed + i, 3.0);
      pc[i].set_grad(g);
      pg[i].set_grad(g.clone());
    }
    const double norm = clip_grad_norm(pc, 1.0);
    cpu.step(lr);
    gpu.clip_and_step(lr, 1.0);  // no add_loss: the stale NaN loss sum of a vetoed step is not checked
    if (read) {
      const vk::GpuAdamW::Stats s = gpu.read_stats();
      CHECK(!s.skipped);
      CHECK(std::abs(s.grad_norm - norm) <= 1e-6 * norm);
    }
    cpu.zero_grad();
    gpu.zero_grad();
  };
  // Grads with element 5 of param 3 set to `bad_grad`, and the loss `loss`.
  auto bad_step = [&](float bad_grad, float loss, bool read) {
    for (size_t i = 0; i < pg.size(); ++i) {
      Tensor g = vktest::randn(pg[i].shape(), 700 + i);
      if (i == 3) g.mutable_data<float>()[5] = bad_grad;
      pg[i].set_grad(g);
    }
    gpu.add_loss(Tensor::scalar(loss), true);
    gpu.clip_and_step(1e-2, 1.0);
    vk::GpuAdamW::Stats s;
    if (read) s = gpu.read_stats();
    gpu.zero_grad();
    return s;
  };
  good_step(400, 1e-2, true);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Bad {
    const char* what;
    float grad, loss;
  };
  for (const Bad& b : {Bad{"NaN grad", nan, 1.0f}, Bad{"+inf grad", inf, 1.0f}, Bad{"-inf grad", -inf, 1.0f},
                       Bad{"NaN loss", 0.5f, nan}, Bad{"inf loss", 0.5f, inf}}) {
    CAPTURE(b.what);
    const auto before = snapshot(gpu, pg);
    const vk::GpuAdamW::Stats s = bad_step(b.grad, b.loss, true);
    CHECK(s.skipped);
    CHECK(!(std::isfinite(s.grad_norm) && std::isfinite(s.loss)));
    CHECK(std::isfinite(s.grad_norm) == std::isfinite(b.grad));
    CHECK(gpu.step_count() == 1);
    CHECK(same_floats(snapshot(gpu, pg), before));
  }
  good_step(800, 2e-2, true);
  // A vetoed step whose stats are never read: the next clip_and_step reads them and gets the count right.
  bad_step(nan, 1.0f, false);
  good_step(900, 3e-2, true);
  CHECK(cpu.step_count() == 3);
  CHECK(gpu.step_count() == 3);
  int identical = 0;
  for (size_t i = 0; i < pc.size(); ++i) {
    CAPTURE(i);
    CHECK(rel_err(pg[i], pc[i]) <= 1e-6);
    CHECK(rel_err(gpu.exp_avg()[i], cpu.exp_avg()[i]) <= 1e-6);
    CHECK(rel_err(gpu.exp_avg_sq()[i], cpu.exp_avg_sq()[i]) <= 1e-6);
    identical += same_bytes(pg[i], pc[i]);
  }
  CHECK(identical * 10 >= static_cast<int>(pc.size()) * 9);
  CHECK(rel_err(pg[3], make_params(300)[3]) > 1e-3);  // the finite steps did move the params
}

TEST_CASE("gpu adamw: inv_scale unscales like LossScaler::unscale, then clips like clip_grad_norm") {
  for (const double max_norm : {1e6, 0.5}) {
    CAPTURE(max_norm);
    vktest::GpuScope scope;
    const AdamWOptions o{0.9, 0.95, 1e-8, 0.1};
    std::vector<Tensor> pc = make_params(40), pg = clones(pc);
    AdamW cpu(pc, o);
    vk::GpuAdamW gpu(vktest::gpu(), pg, o);
    LossScaler scaler(LossScaleOptions{1024.0, 2.0, 0.5, 2});  // grows every 2 steps: 1024, 1024, 2048, 2048
    int identical = 0, compared = 0;
    for (int step = 0; step < 4; ++step) {
      CAPTURE(step);
      for (size_t i = 0; i < pc.size(); ++i) {  // scaled grads, as the backward seeded with scale() makes them
        const Tensor g = vktest::randn(pc[i].shape(), 60 + 10 * step + i, scaler.scale());
        pc[i].set_grad(g);
        pg[i].set_grad(g.clone());
      }
      const double inv = 1.0 / scaler.scale();
      REQUIRE(scaler.unscale(pc));
      const double norm = clip_grad_norm(pc, max_norm);
      cpu.step(1e-2);
      gpu.clip_and_step(1e-2, max_norm, inv);
      const vk::GpuAdamW::Stats s = gpu.read_stats();
      scaler.update(true);
      CHECK(!s.skipped);
      CHECK(std::abs(s.grad_norm - norm) <= 1e-6 * norm);  // the unscaled norm
      if (max_norm > 1e5) CHECK(s.clip_scale == inv);      // not clipped: the coefficient is 1/S exactly
      else CHECK(s.clip_scale < 0.5 * inv);
      for (size_t i = 0; i < pc.size(); ++i) {
        CHECK(rel_err(pg[i], pc[i]) <= 1e-6);
        CHECK(rel_err(gpu.exp_avg()[i], cpu.exp_avg()[i]) <= 1e-6);
        CHECK(rel_err(gpu.exp_avg_sq()[i], cpu.exp_avg_sq()[i]) <= 1e-6);
        identical += same_bytes(pg[i], pc[i]) && same_bytes(gpu.exp_avg()[i], cpu.exp_avg()[i]);
      }
      compared += static_cast<int>(pc.size());
      cpu.zero_grad();
      gpu.zero_grad();
    }
    CHECK(scaler.scale() == 4096.0);
    CHECK(identical * 10 >= compared * 9);
  }
}

