// GPU-resident Muon (vk::GpuMuon: optim.name "muon" with optim.device "gpu") against the CPU Muon (optim/muon.cpp,
// after clip_grad_norm): wide, tall and square matrices beside AdamW params, Nesterov with weight decay and plain
// momentum, clipping active, f32 and f16 Newton-Schulz, the GPU-side veto of a non-finite step, and the state on
// the GPU. Runs on lavapipe (CI) and on the GPU machine (scripts/gpu/gpu_suite.sh).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/ops.h"
#include "optim/clip.h"
#include "optim/muon.h"
#include "vk/muon.h"
#include "vk_test_util.h"

using namespace alpha;
using vktest::clones;
using vktest::host_floats;
using vktest::rel_err;

namespace {

// Muon matrices wide (3, 43), tall (50, 7), square (16, 16); stacked with the first of their shape: a tall (43, 3)
// and a second square; AdamW: a bias (17) and a matrix left to AdamW.
const std::vector<Shape> kShapes = {{3, 43}, {17}, {50, 7}, {16, 16}, {10, 100}, {43, 3}, {16, 16}};
const std::vector<bool> kMask = {true, false, true, true, false, true, true};

std::vector<Tensor> make_params(uint64_t seed) {
  std::vector<Tensor> ps;
  for (size_t i = 0; i < kShapes.size(); ++i) ps.push_back(vktest::randn(kShapes[i], seed + i).set_requires_grad(true));
  return ps;
}

// `steps` steps of clip_grad_norm + the CPU Muon and of GpuMuon::clip_and_step on identical params and grads.
// After each step: the momentum within 2e-5 (elementwise on both), and the params' change since the start within
// `delta_tol` (relative to the largest change; Newton-Schulz's matmuls sum in another order, or round to f16).
void compare_steps(const MuonOptions& mo, double max_norm, double grad_scale, double delta_tol, int steps = 4) {
  vktest::GpuScope scope;
  const AdamWOptions ao{0.9, 0.99, 1e-8, 0.1};
  std::vector<Tensor> pc = make_params(40), pg = clones(pc);
  const std::vector<Tensor> p0 = make_params(40);
  Muon cpu(pc, kMask, ao, mo);
  vk::GpuMuon gpu(vktest::gpu(), pg, kMask, ao, mo);
  for (int step = 0; step < steps; ++step) {
    CAPTURE(step);
    for (size_t i = 0; i < pc.size(); ++i) {
      const Tensor g = vktest::randn(pc[i].shape(), 500 + 10 * step + i, grad_scale);
      pc[i].set_grad(g);
      pg[i].set_grad(g.clone());
    }
    const double lr = 1e-3 * (step + 1);
    const double norm = clip_grad_norm(pc, max_norm);
    cpu.step(lr);
    gpu.clip_and_step(lr, max_norm);
    const vk::GpuAdamW::Stats s = gpu.read_stats();
    CHECK(!s.skipped);
    CHECK(std::abs(s.grad_norm - norm) <= 1e-6 * norm);
    for (size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(i);
      const Tensor dg = ops::sub(pg[i], p0[i]), dc = ops::sub(pc[i], p0[i]);
      CHECK(rel_err(dg, dc) <= delta_tol);
      CHECK(rel_err(gpu.exp_avg()[i], cpu.exp_avg()[i]) <= 2e-5);
      CHECK(host_floats(gpu.exp_avg_sq()[i]) == host_floats(cpu.exp_avg_sq()[i]));  // zeros for Muon matrices
    }
    cpu.zero_grad();
    gpu.zero_grad();
  }
  CHECK(gpu.step_count() == steps);
  // Every param moved (the deltas compared above are not zeros).
  for (size_t i = 0; i < pc.size(); ++i) CHECK(rel_err(pg[i], p0[i]) > 1e-4);
}

}  // namespace

TEST_CASE("gpu muon: steps match the CPU Muon (Nesterov, weight decay, wide/tall/square matrices, AdamW for the rest)") {
  MuonOptions mo;
  mo.weight_decay = 0.05;
  mo.base_lr = 1e-3;
  compare_steps(mo, 0.0, 1.0, 1e-3);
}

TEST_CASE("gpu muon: plain momentum, no weight decay, clipping active") {
  MuonOptions mo;
  mo.nesterov = false;
  mo.momentum = 0.8;
  mo.ns_steps = 3;
  compare_steps(mo, 1.0, 3.0, 1e-3);
}

TEST_CASE("gpu muon: f16 Newton-Schulz stays within f16 rounding of the CPU's") {
  MuonOptions mo;
  mo.ns_dtype = DType::f16;
  compare_steps(mo, 0.0, 1.0, 2e-2, 2);
}

TEST_CASE("gpu muon: a NaN grad vetoes the step on the GPU (params and momentum kept, count taken back)") {
  vktest::GpuScope scope;
  std::vector<Tensor> ps = make_params(70);
  vk::GpuMuon gpu(vktest::gpu(), ps, kMask, AdamWOptions{}, MuonOptions{});
  auto set_grads = [&](uint64_t seed, float bad) {
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor g = vktest::randn(ps[i].shape(), seed + i);
      if (i == 2) g.mutable_data<float>()[3] = bad;
      ps[i].set_grad(g);
    }
  };
  set_grads(800, 0.5f);
  gpu.clip_and_step(1e-3, 1.0);
  CHECK(!gpu.read_stats().skipped);
  std::vector<std::vector<float>> before;
  for (size_t i = 0; i < ps.size(); ++i) {
    before.push_back(host_floats(ps[i]));
    before.push_back(host_floats(gpu.exp_avg()[i]));
  }
  set_grads(900, std::numeric_limits<float>::quiet_NaN());
  gpu.clip_and_step(1e-3, 1.0);
  CHECK(gpu.read_stats().skipped);
  CHECK(gpu.step_count() == 1);
  for (size_t i = 0; i < ps.size(); ++i) {
    CAPTURE(i);
    CHECK(host_floats(ps[i]) == before[2 * i]);
    CHECK(host_floats(gpu.exp_avg()[i]) == before[2 * i + 1]);
  }
}

TEST_CASE("gpu muon: a step reads nothing back and keeps params and momentum on the GPU; bad options are refused") {
  vktest::GpuScope scope;  // every threshold 0: the Newton-Schulz ops run on the GPU too
  std::vector<Tensor> ps = make_params(90);
  vk::GpuMuon gpu(vktest::gpu(), ps, kMask, AdamWOptions{}, MuonOptions{});
  CHECK(std::string(gpu.name()) == "muon");
  REQUIRE(gpu.muon_options() != nullptr);
  for (size_t i = 0; i < ps.size(); ++i) ps[i].set_grad(vktest::randn(ps[i].shape(), 950 + i));
  const int64_t reads0 = vktest::gpu().queue_counters().host_reads;
  gpu.clip_and_step(1e-3, 1.0);
  CHECK(vktest::gpu().queue_counters().host_reads == reads0);  // recording reads nothing
  for (size_t i = 0; i < ps.size(); ++i) {
    CAPTURE(i);
    CHECK(!ps[i].storage()->host_valid());
    CHECK(!gpu.exp_avg()[i].storage()->host_valid());
  }
  MuonOptions bad;
  bad.momentum = 1.0;
  CHECK_THROWS_AS(vk::GpuMuon(vktest::gpu(), make_params(90), kMask, AdamWOptions{}, bad), ValueError);
  std::vector<bool> mask = kMask;
  mask[1] = true;  // the bias is 1-D
  CHECK_THROWS_AS(vk::GpuMuon(vktest::gpu(), make_params(90), mask, AdamWOptions{}, MuonOptions{}), ShapeError);
}
