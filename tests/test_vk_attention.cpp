// Fused attention on the GPU (spirv/attention*.comp via vk/attention.cpp) against the CPU oracle
// (core/cpu/attention.cpp) at awkward sizes: out, lse, dq, dk, dv within 1e-4 of the largest value, the same
// dropout masks, bit-identical repeated runs, strided head views read in place, no validation errors; f16 with
// head size 64 through both kernel families (tensor cores where the device has them, and SIMT).
//
// Dimension legend: B batch, H heads, Tq query rows, Tk keys, D head size, C = H*D.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/rng.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {

// Per-kernel dispatch counts (Runtime::kernel_counts), set before the shared backend is built on first use.
const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;

// max_i |a_i - b_i| / max(1, max_i |b_i|). Inputs are O(1), so results are too; the floor of 1 keeps results that
// cancel to ~0 (T = 1: dq = dk = 0 up to rounding) from turning f32 rounding into a huge relative error.
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.defined());
  REQUIRE(a.shape() == b.shape());
  const auto av = a.to_f64_vector(), bv = b.to_f64_vector();
  double m = 0, s = 1.0;
  for (size_t i = 0; i < av.size(); ++i) {
    m = std::max(m, std::isnan(av[i]) ? INFINITY : std::fabs(av[i] - bv[i]));
    s = std::max(s, std::fabs(bv[i]));
  }
  return m / s;
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  double p;
  bool views;  // q, k, v as head views of one (B, T, 3C) tensor (GPT's layout); else contiguous
  // > 1: q times sharp and key t times (1 + t / 16): row maxima that keep growing along the keys, so the forward's
  // running max moves (and O and l are rescaled) in later blocks too, not only in the first.
  double sharp = 1.0;
};

std::string name(const Case& c) {
  return fmt::format("B={} H={} Tq={} Tk={} D={} causal={} p={} views={} sharp={}", c.B, c.H, c.Tq, c.Tk, c.D, c.causal,
                     c.p, c.views, c.sharp);
}

struct Inputs {
  Tensor q, k, v, dout;
};
Inputs make_inputs(const Case& c) {
  Inputs in;
  if (c.views) {
    REQUIRE(c.Tq == c.Tk);
    const int64_t C = c.H * c.D;
    const Tensor qkv = randn({c.B, c.Tq, 3 * C}, 40);
    const Tensor split = qkv.view({c.B, c.Tq, 3, c.H, c.D});
    auto head = [&](int64_t i) { return split.narrow(2, i, 1).squeeze(2).transpose(1, 2); };
    in.q = head(0), in.k = head(1), in.v = head(2);
  } else {
    in.q = randn({c.B, c.H, c.Tq, c.D}, 41), in.k = randn({c.B, c.H, c.Tk, c.D}, 42),
    in.v = randn({c.B, c.H, c.Tk, c.D}, 43);
    if (c.sharp != 1.0) {
      std::vector<double> q = in.q.to_f64_vector(), k = in.k.to_f64_vector();
      for (double& x : q) x *= c.sharp;
      for (size_t i = 0; i < k.size(); ++i) k[i] *= 1.0 + double((int64_t(i) / c.D) % c.Tk) / 16.0;
      in.q = Tensor::from_vector(std::vector<float>(q.begin(), q.end()), in.q.shape());
      in.k = Tensor::from_vector(std::vector<float>(k.begin(), k.end()), in.k.shape());
    }
  }
  in.dout = randn({c.B, c.H, c.Tq, c.D}, 44);
  return in;
}

ops::AttentionParams params(const Case& c) {
  ops::AttentionParams ap;
  ap.scale = 1.0 / std::sqrt(double(c.D));
  ap.causal = c.causal;
  ap.p = c.p;
  ap.seed = 0x1234567890abcdefULL;
  ap.offset = 0xFFFFFF00ULL;  // positions cross 2^32: the shader's 64-bit carry is exercised
  return ap;
}

}  // namespace

TEST_CASE("vk attention forward and backward match the CPU at awkward sizes") {
  GpuScope g;
  for (const Case& c : {Case{1, 1, 1, 1, 16, true, 0.0, false}, Case{1, 3, 17, 17, 16, true, 0.0, true},
                        Case{2, 3, 65, 65, 64, true, 0.0, true}, Case{1, 1, 129, 129, 64, true, 0.0, false},
                        Case{3, 2, 33, 33, 16, true, 0.2, true}, Case{1, 3, 17, 40, 16, true, 0.0, false},
                        Case{2, 1, 9, 23, 64, false, 0.1, false}, Case{1, 6, 65, 65, 64, true, 0.3, true},
                        Case{1, 2, 40, 40, 128, true, 0.1, false}}) {  // widest head: smaller blocks
    INFO(name(c));
    const Inputs in = make_inputs(c);
    const auto ap = params(c);
    const auto gf = on_gpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
    const auto cf = on_cpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
    CHECK(rel_diff(gf.out, cf.out) < 1e-4);
    CHECK(rel_diff(gf.lse, cf.lse) < 1e-4);
    CHECK(gf.out.transpose(1, 2).is_contiguous());
    // Backward from the GPU's own forward results (as training runs it) and the CPU's from its own.
    const auto gb = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, gf.out, gf.lse, ap); });
    const auto cb = on_cpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, cf.out, cf.lse, ap); });
    CHECK(rel_diff(gb.dq, cb.dq) < 1e-4);
    CHECK(rel_diff(gb.dk, cb.dk) < 1e-4);
    CHECK(rel_diff(gb.dv, cb.dv) < 1e-4);
  }
  expect_clean();
}

TEST_CASE("vk attention row dots in fours and eights give the scalar kernel's bits (f32, f16)") {
  GpuScope g;
  const Case c{2, 3, 37, 37, 64, true, 0.1, false};
  for (const DType dt : {DType::f32, DType::f16}) {
    INFO(dtype_name(dt));
    Inputs in = make_inputs(c);
    for (Tensor* t : {&in.q, &in.k, &in.v, &in.dout}) *t = t->to(dt);
    const auto ap = params(c);
    const auto f = on_gpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
    // The same O behind an offset of 1 and rows D + 1 apart: the scalar row-dot kernel reads it.
    const Tensor pad = Tensor::zeros({c.B, c.H, c.Tq, 1}, dt);
    const Tensor o_odd = ops::cat({pad, f.out.contiguous()}, 3).narrow(3, 1, c.D);
    // f16: the contiguous O takes the eights (16-byte loads); behind an offset of 4, rows D + 4 apart, the fours.
    const Tensor pad4 = Tensor::zeros({c.B, c.H, c.Tq, 4}, dt);
    const Tensor o_four = ops::cat({pad4, f.out.contiguous()}, 3).narrow(3, 4, c.D);
    const std::string k4 = std::string("attention_rowdot_") + dtype_name(dt) + "_vec4";
    const std::string k8 = std::string("attention_rowdot_") + dtype_name(dt) + "_vec8";
    const int64_t v0 = kernel_runs(k4), e0 = kernel_runs(k8);
    const bool eights = dt == DType::f16;
    const auto b4 = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, f.out, f.lse, ap); });
    CHECK(kernel_runs(k4) == v0 + (eights ? 0 : 1));
    CHECK(kernel_runs(k8) == e0 + (eights ? 1 : 0));
    const auto b1 = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, o_odd, f.lse, ap); });
    CHECK(kernel_runs(k4) == v0 + (eights ? 0 : 1));  // the odd layout took the scalar kernel
    const auto bf = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, o_four, f.lse, ap); });
    CHECK(kernel_runs(k4) == v0 + (eights ? 1 : 2));
    CHECK(kernel_runs(k8) == e0 + (eights ? 1 : 0));
    for (const auto* b : {&b1, &bf}) {
      CHECK(b4.dq.to_f64_vector() == b->dq.to_f64_vector());
      CHECK(b4.dk.to_f64_vector() == b->dk.to_f64_vector());
      CHECK(b4.dv.to_f64_vector() == b->dv.to_f64_vector());
    }
    CHECK(b4.dq.to_f64_vector() != std::vector<double>(size_t(b4.dq.numel()), 0.0));  // the gradients are live
  }
  expect_clean();
}

TEST_CASE("vk attention dropout drops exactly the CPU's probabilities") {
  GpuScope g;
  // v = identity rows (Tk = D): out row i is row i of the dropped and scaled probabilities.
  const int64_t B = 2, H = 3, T = 20, D = 20;
  std::vector<float> eye(static_cast<size_t>(B * H * T * D), 0.0f);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t j = 0; j < T; ++j) eye[static_cast<size_t>((bh * T + j) * D + j)] = 1.0f;
  const Tensor v = Tensor::from_vector(eye, {B, H, T, D});
  const Tensor q = randn({B, H, T, D}, 45), k = randn({B, H, T, D}, 46);
  const Case c{B, H, T, T, D, true, 0.5, false};
  const auto ap = params(c);
  const Tensor go = on_gpu([&] { return ops::attention(q, k, v, ap).out; });
  const Tensor co = on_cpu([&] { return ops::attention(q, k, v, ap).out; });
  const auto gv = go.to_f64_vector(), cv = co.to_f64_vector();
  int64_t dropped = 0, kept = 0;
  for (size_t i = 0; i < gv.size(); ++i) {
    const bool cpu_zero = cv[i] == 0.0;
    if ((gv[i] == 0.0) != cpu_zero) {
      FAIL_CHECK("mask differs at element " << i << ": GPU " << gv[i] << " CPU " << cv[i]);
      break;
    }
    dropped += cpu_zero, kept += !cpu_zero;
  }
  CHECK(kept > 100);  // both kept and dropped entries occur (the causal zeros count as dropped)
  CHECK(dropped > kept / 2);
  expect_clean();
}

TEST_CASE("vk attention is deterministic: repeated runs give identical bits") {
  GpuScope g;
  const Case c{2, 3, 65, 65, 64, true, 0.2, true};
  const Inputs in = make_inputs(c);
  const auto ap = params(c);
  auto run = [&] {
    const auto f = ops::attention(in.q, in.k, in.v, ap);
    const auto b = ops::attention_backward(in.dout, in.q, in.k, in.v, f.out, f.lse, ap);
    return std::vector<std::vector<double>>{f.out.to_f64_vector(), f.lse.to_f64_vector(), b.dq.to_f64_vector(),
                                            b.dk.to_f64_vector(), b.dv.to_f64_vector()};
  };
  const auto a = run(), b = run();
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);
  expect_clean();
}

TEST_CASE("vk attention reads head views in place: one dispatch forward, three backward") {
  GpuScope g;
  const Case c{2, 2, 17, 17, 16, true, 0.0, true};
  const Inputs in = make_inputs(c);
  const auto ap = params(c);
  gpu().sync();
  const int64_t before = gpu().queue_counters().dispatches;
  const auto f = on_gpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
  CHECK(gpu().queue_counters().dispatches - before == 1);
  const auto b = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, f.out, f.lse, ap); });
  CHECK(gpu().queue_counters().dispatches - before == 1 + 3);
  CHECK(b.dq.defined());
  expect_clean();
}

TEST_CASE("vk attention packed gradients (GPT's qkv layout) match the CPU; attention_qkv costs 1 + 3 dispatches") {
  GpuScope g;
  for (const Case& c : {Case{2, 3, 17, 17, 16, true, 0.0, true}, Case{1, 2, 65, 65, 64, true, 0.2, true}}) {
    INFO(name(c));
    const Inputs in = make_inputs(c);
    const auto ap = params(c);
    const auto f = on_cpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
    const auto gb = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, f.out, f.lse, ap, true); });
    const auto cb = on_cpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, f.out, f.lse, ap, true); });
    REQUIRE(gb.dqkv.defined());
    CHECK(gb.dqkv.shape() == Shape({c.B, c.Tq, 3 * c.H * c.D}));
    CHECK(rel_diff(gb.dqkv, cb.dqkv) < 1e-4);
    CHECK(rel_diff(gb.dk, cb.dk) < 1e-4);  // the head views point into dqkv
  }
  // Through autograd, as GPT runs it: the heads are read in place (1 dispatch forward) and dqkv is written whole.
  auto run = [](bool count) {
    Tensor qkv = randn({2, 17, 3 * 32}, 47);
    qkv.set_requires_grad(true);
    Rng rng(3);
    gpu().sync();
    const int64_t before = gpu().queue_counters().dispatches;
    const Tensor y = ag::attention_qkv(qkv, 2, true, 0.1, rng);
    if (count) CHECK(gpu().queue_counters().dispatches - before == 1);
    ag::backward(ag::sum_all(ag::mul(y, randn({2, 17, 32}, 48))));
    return std::pair{y, qkv.grad()};
  };
  const auto [gy, gdqkv] = run(true);
  const auto [cy, cdqkv] = on_cpu([&] { return run(false); });
  CHECK(rel_diff(gy, cy) < 1e-4);
  CHECK(rel_diff(gdqkv, cdqkv) < 1e-4);
  expect_clean();
}


TEST_CASE("vk attention: dispatches of GPT's attention section (qkv -> y), fused vs unfused") {
  GpuScope g;
  const int64_t B = 2, T = 16, H = 2, D = 16, C = H * D;
  for (const double p : {0.0, 0.1}) {
    int64_t counts[2][2] = {};  // [fused][forward, backward]
    for (const bool fused : {true, false}) {
      Tensor qkv = randn({B, T, 3 * C}, 49);
      qkv.set_requires_grad(true);
      const Tensor R = randn({B, T, C}, 50);
      Rng rng(4);
      gpu().sync();
      const int64_t d0 = gpu().queue_counters().dispatches;
      Tensor y;
      if (fused) {
        y = ag::attention_qkv(qkv, H, true, p, rng);
      } else {  // train/model/gpt.cpp's unfused block
        auto head = [&](int64_t i) { return ag::transpose(ag::reshape(ag::narrow(qkv, 2, i * C, C), {B, T, H, D}), 1, 2); };
        Tensor att = ag::scale(ag::matmul(head(0), head(1), false, true), 1.0 / std::sqrt(double(D)));
        att = ag::dropout(ag::softmax(att, true), p, rng, true);
        y = ag::reshape(ag::contiguous(ag::transpose(ag::matmul(att, head(2)), 1, 2)), {B, T, C});
      }
      const int64_t d1 = gpu().queue_counters().dispatches;
      // Seed the backward with R directly: record y * R and sum, then subtract those two ops' dispatches.
      const Tensor l = ag::sum_all(ag::mul(y, R));
      const int64_t d2 = gpu().queue_counters().dispatches;
      ag::backward(l);
      const int64_t d3 = gpu().queue_counters().dispatches;
      counts[fused][0] = d1 - d0;
      counts[fused][1] = d3 - d2;  // includes the backward of mul and sum_all, the same for both
    }
    MESSAGE("p=", p, " dispatches forward fused ", counts[1][0], " unfused ", counts[0][0], "; backward (+ mul/sum) fused ",
            counts[1][1], " unfused ", counts[0][1]);
    CHECK(counts[1][0] == 1);
    CHECK(counts[1][0] < counts[0][0]);
    CHECK(counts[1][1] < counts[0][1]);
  }
  expect_clean();
}

TEST_CASE("vk attention f16, head size 64: every tensor-core and SIMT kernel matches the CPU oracle") {
  // attention_cmr.comp (softmax in registers; where the probed fragment layout allows) and attention_cm.comp
  // run where the device has NV cooperative matrices (else every mode is SIMT). Their P and dS are rounded to
  // f16 before the products: within 4e-3 of the largest value, like one f16 ulp at 2.
  GpuScope g;
  REQUIRE(kKernelCounts);
  gpu().set_attention_mode("cm");
  const std::string cm_kernel = gpu().attention_kernel(DType::f16, 64);
  gpu().set_attention_mode("auto");
  const std::string auto_kernel = gpu().attention_kernel(DType::f16, 64);
  MESSAGE("f16 attention kernels on this device: auto ", auto_kernel, ", cm ", cm_kernel,
          "; quad fragment layout: ", gpu().coopmat_quad_layout());
  CHECK(auto_kernel == (gpu().coopmat_quad_layout() ? "attention_cmr" : cm_kernel));
  if (const auto probe = gpu().coopmat_layout_probe(); !probe.empty()) {
    std::string lanes;  // the fragment layout, for a device whose layout differs from attention_cmr.comp's
    for (int l : {0, 1, 2, 4, 31}) {
      lanes += fmt::format(" lane {} (n {}):", l, probe[l * 17]);
      for (int e = 0; e < 8; ++e) lanes += fmt::format(" ({},{})", probe[l * 17 + 1 + 2 * e], probe[l * 17 + 2 + 2 * e]);
    }
    MESSAGE("coopmat accumulator layout:", lanes);
  }
  CHECK((cm_kernel == "attention_cm") == gpu().runtime().device().features().nv_coopmat_f16);
  CHECK(gpu().attention_kernel(DType::f32, 64) == "attention");  // f32 always runs SIMT
  CHECK(gpu().attention_kernel(DType::f16, 32) == "attention");  // other head sizes too
  for (const Case& c : {Case{1, 2, 1, 1, 64, true, 0.0, false}, Case{2, 3, 65, 65, 64, true, 0.1, true},
                        Case{1, 2, 130, 130, 64, true, 0.0, true}, Case{1, 1, 37, 100, 64, true, 0.0, false},
                        Case{2, 1, 70, 45, 64, false, 0.2, false}, Case{1, 2, 200, 200, 64, true, 0.1, false},
                        Case{2, 2, 128, 128, 64, true, 0.1, true}, Case{1, 2, 64, 64, 64, false, 0.0, false},
                        Case{1, 2, 200, 200, 64, true, 0.0, false, 3.0},
                        Case{1, 1, 96, 160, 64, false, 0.1, false, 3.0}}) {
    INFO(name(c));
    const Inputs in32 = make_inputs(c);
    Inputs in;
    if (c.views) {  // f16 views of one f16 qkv tensor, as GPT's f16 mode has them
      const int64_t C = c.H * c.D;
      const Tensor qkv = randn({c.B, c.Tq, 3 * C}, 40).to(DType::f16).view({c.B, c.Tq, 3, c.H, c.D});
      auto head = [&](int64_t i) { return qkv.narrow(2, i, 1).squeeze(2).transpose(1, 2); };
      in.q = head(0), in.k = head(1), in.v = head(2);
    } else {
      in.q = in32.q.to(DType::f16), in.k = in32.k.to(DType::f16), in.v = in32.v.to(DType::f16);
    }
    in.dout = in32.dout.to(DType::f16);
    const auto ap = params(c);
    const auto cf = on_cpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
    const auto cb = on_cpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, cf.out, cf.lse, ap, c.views); });
    // "@64": dk/dv over query blocks of 64 (these shapes have < 512 queries, so auto takes 32): the same bits.
    std::map<std::string, ops::AttentionGrads> by_run;
    for (const std::string run : {"auto", "auto/ds16", "auto/recompute", "auto@64", "auto/recompute@64", "cm", "simt"}) {
      const size_t at = run.find('@');
      const std::string plan = run.substr(0, at), block = at == std::string::npos ? "auto" : run.substr(at + 1);
      const std::string mode = plan.substr(0, plan.find('/'));
      const std::string dq = plan.find('/') == std::string::npos ? "ds" : plan.substr(plan.find('/') + 1);
      const bool dq_from_ds = dq != "recompute";
      INFO("ALPHA_VK_ATTENTION mode: " << run);
      gpu().set_attention_mode(mode);
      gpu().set_attention_dq(dq);
      gpu().set_attention_dkdv_block(block);
      const std::string want = mode == "auto" ? auto_kernel : mode == "cm" ? cm_kernel : "attention";
      gpu().sync();
      const auto k0 = gpu().runtime().kernel_counts();
      const auto gf = on_gpu([&] { return ops::attention(in.q, in.k, in.v, ap); });
      const auto gb = on_gpu([&] { return ops::attention_backward(in.dout, in.q, in.k, in.v, cf.out, cf.lse, ap, c.views); });
      CHECK(gf.out.dtype() == DType::f16);
      CHECK(rel_diff(gf.out, cf.out) < 4e-3);
      CHECK(rel_diff(gf.lse, cf.lse) < 1e-4);
      CHECK(rel_diff(gb.dq, cb.dq) < 4e-3);
      CHECK(rel_diff(gb.dk, cb.dk) < 4e-3);
      CHECK(rel_diff(gb.dv, cb.dv) < 4e-3);
      if (c.views) CHECK(rel_diff(gb.dqkv, cb.dqkv) < 4e-3);
      gpu().sync();
      auto k1 = gpu().runtime().kernel_counts();
      auto ran = [&](const std::string& k) { return k1[k] - (k0.count(k) ? k0.at(k) : 0); };
      for (const std::string k : {"attention_cmr", "attention_cm"}) {
        const bool ds = want == k && k == "attention_cmr" && dq_from_ds;  // dq from the stored dS^T
        const bool b64 = k == "attention_cmr" && block == "64";
        CHECK(ran(k + "_f16") == (want == k ? 1 : 0));
        CHECK(ran(k + "_dq_f16") == (want == k && !ds ? 1 : 0));
        CHECK(ran(k + "_dkdv_f16") == (want == k && !ds && !b64 ? 1 : 0));
        CHECK(ran(k + "_dkdv64_f16") == (want == k && !ds && b64 ? 1 : 0));
        CHECK(ran(k + "_dqs_dq2_f16") == (ds && dq == "ds" ? 1 : 0));
        CHECK(ran(k + "_dqs_dq_f16") == (ds && dq == "ds16" ? 1 : 0));
        CHECK(ran(k + "_dqs_dkdv_f16") == (ds && !b64 ? 1 : 0));
        CHECK(ran(k + "_dqs_dkdv64_f16") == (ds && b64 ? 1 : 0));
      }
      if (block == "64") {  // the block of 32's run of the same plan: bit for bit (f16 -> f32 is exact)
        const ops::AttentionGrads& ref = by_run.at(plan);
        auto same = [](const Tensor& a, const Tensor& b) {
          const Tensor x = a.to(DType::f32).contiguous(), y = b.to(DType::f32).contiguous();
          return x.shape() == y.shape() && std::memcmp(x.data<float>(), y.data<float>(), x.nbytes()) == 0;
        };
        CHECK(same(gb.dq, ref.dq));
        CHECK(same(gb.dk, ref.dk));
        CHECK(same(gb.dv, ref.dv));
      }
      by_run[run] = gb;
      CHECK(ran("attention_f16") == (want == "attention" ? 1 : 0));
      CHECK(ran("attention_rowdot_f16") + ran("attention_rowdot_f16_vec4") + ran("attention_rowdot_f16_vec8") == 1);
    }
    gpu().set_attention_mode(vk::attention_mode_from_env());
    gpu().set_attention_dq(vk::attention_dq_from_env());
    gpu().set_attention_dkdv_block(vk::attention_dkdv_block_from_env());
  }
  CHECK_THROWS_AS(gpu().set_attention_dq("ds8"), ValueError);  // names the accepted modes
  CHECK_THROWS_AS(gpu().set_attention_dkdv_block("48"), ValueError);
  expect_clean();
}
