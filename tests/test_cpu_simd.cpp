// The Highway kernels (core/cpu/simd.h) against the plain-loop oracles, on every SIMD target Highway compiled
// that this CPU runs (hwy::SetSupportedTargetsForTest forces each in turn), at odd sizes and tails.
// Tolerances: exact where the kernel does the oracle's operations; otherwise a few float ulps from Highway's
// exp/log (<= 2 ulp) and from f32 lane sums where the oracle sums in double.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/cpu/attention.h"
#include "core/cpu/cross_entropy.h"
#include "core/cpu/elementwise.h"
#include "core/cpu/embedding.h"
#include "core/cpu/gelu.h"
#include "core/cpu/layernorm.h"
#include "core/cpu/reduce.h"
#include "core/cpu/simd.h"
#include "core/cpu/softmax.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "hwy/highway.h"
#include "hwy/targets.h"
#include "optim/adamw.h"

namespace alpha {
namespace {

const std::vector<int64_t> kSizes = {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 100, 1000, 40003};

Tensor randn(const Shape& s, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  Tensor t = Tensor::empty(s, DType::f32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(scale * rng.normal());
  return t;
}

// Runs f once with the oracle loops and once with the vectorized kernels.
template <class F>
auto both(F f) {
  cpu::set_simd_enabled(false);
  auto ref = f();
  cpu::set_simd_enabled(true);
  auto got = f();
  return std::make_pair(ref, got);
}

// |got - ref| <= atol + rtol |ref| everywhere; NaN only where ref is NaN; infinities equal.
void check_close(const Tensor& ref, const Tensor& got, double rtol, double atol, const std::string& what) {
  REQUIRE(ref.shape() == got.shape());
  const Tensor r = ref.contiguous(), g = got.contiguous();
  double worst = 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double a = r.data<float>()[i], b = g.data<float>()[i];
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      if (!(std::isnan(a) && std::isnan(b)) && a != b && bad < 0) bad = i;
      continue;
    }
    const double e = std::fabs(a - b) - rtol * std::fabs(a);
    if (e > worst) worst = e;
    if (e > atol && bad < 0) bad = i;
  }
  INFO(what << ": first bad index " << bad << ", worst excess " << worst);
  CHECK(bad < 0);
}

void check_exact(const Tensor& ref, const Tensor& got, const std::string& what) {
  REQUIRE(ref.shape() == got.shape());
  const Tensor r = ref.contiguous(), g = got.contiguous();
  INFO(what);
  CHECK(std::memcmp(r.data<float>(), g.data<float>(), static_cast<size_t>(r.numel()) * sizeof(float)) == 0);
}

// Calls f(target name) with dispatch forced to each compiled target this CPU supports.
template <class F>
void for_each_target(F f) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
#if defined(__x86_64__)
  REQUIRE(targets.size() >= 2);  // at least SSE4 and AVX2 on any CPU that CI or the GPU machine has
#endif
  for (int64_t t : targets) {
    hwy::SetSupportedTargetsForTest(t);
    const std::string name = hwy::TargetName(t);
    REQUIRE(cpu::simd_target() == name);  // the dispatch table really switched
    MESSAGE("target " << name);
    f(name);
  }
  hwy::SetSupportedTargetsForTest(0);
  cpu::set_simd_enabled(true);
}

TEST_CASE("element-wise kernels match the oracle loops on every target") {
  for_each_target([](const std::string& tn) {
    for (int64_t n : kSizes) {
      const Tensor a = randn({n}, 1), b = randn({n}, 2);
      const std::string w = tn + " n=" + std::to_string(n);
      for (auto op : {cpu::BinaryOp::add, cpu::BinaryOp::sub, cpu::BinaryOp::mul, cpu::BinaryOp::div}) {
        auto [r, g] = both([&] { return cpu::binary(op, a, b); });
        check_exact(r, g, w + " binary " + std::to_string(int(op)));
      }
      {  // broadcast rows (bias add): (n, 5) + (5)
        const Tensor m = randn({n, 5}, 3), row = randn({5}, 4);
        auto [r, g] = both([&] { return cpu::binary(cpu::BinaryOp::add, m, row); });
        check_exact(r, g, w + " broadcast add");
      }
      auto [rn, gn] = both([&] { return cpu::unary(cpu::UnaryOp::neg, a); });
      check_exact(rn, gn, w + " neg");
      auto [re, ge] = both([&] { return cpu::unary(cpu::UnaryOp::exp, cpu::affine(a, 10.0, 0.0)); });
      check_close(re, ge, 3e-7, 0, w + " exp");
      const Tensor pos = cpu::unary(cpu::UnaryOp::exp, a);
      auto [rl, gl] = both([&] { return cpu::unary(cpu::UnaryOp::log, pos); });
      check_close(rl, gl, 3e-7, 1e-7, w + " log");
      auto [rs, gs] = both([&] { return cpu::unary(cpu::UnaryOp::sqrt, pos); });
      check_exact(rs, gs, w + " sqrt");
      auto [ra, ga] = both([&] { return cpu::affine(a, 0.3, -1.25); });
      check_exact(ra, ga, w + " affine");
      auto [rx, gx] = both([&] {
        Tensor d = b.clone();
        cpu::add_inplace(d, a, -0.7);
        return d;
      });
      check_exact(rx, gx, w + " add_inplace");
    }
  });
}

TEST_CASE("exp and log keep std::'s special values on every target") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::empty({9}, DType::f32);
  const float vals[9] = {0.0f, -0.0f, inf, -inf, nan, 100.0f, -100.0f, -1.0f, 1e-40f};
  std::memcpy(x.mutable_data<float>(), vals, sizeof vals);
  for_each_target([&](const std::string& tn) {
    for (auto op : {cpu::UnaryOp::exp, cpu::UnaryOp::log}) {
      auto [r, g] = both([&] { return cpu::unary(op, x); });
      check_close(r, g, 3e-7, 0, tn + " special values op " + std::to_string(int(op)));
    }
  });
}

TEST_CASE("GELU forward and backward match the oracle on every target") {
  for_each_target([](const std::string& tn) {
    for (int64_t n : kSizes) {
      Tensor x = randn({n}, 5, 3.0);
      if (n >= 4) {  // the clamp and overflow paths: x^3 -> inf, and NaN propagation
        x.mutable_data<float>()[0] = 1e30f;
        x.mutable_data<float>()[1] = -40.0f;
        x.mutable_data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
      }
      const Tensor dy = randn({n}, 6);
      const std::string w = tn + " n=" + std::to_string(n);
      auto [r, g] = both([&] { return cpu::gelu(x); });
      check_close(r, g, 1e-6, 2e-6, w + " gelu");  // both round 1 + tanh(u) near 0: ~|x| 6e-8 absolute
      auto [rb, gb] = both([&] { return cpu::gelu_backward(dy, x); });
      check_close(rb, gb, 1e-5, 1e-6, w + " gelu_backward");
    }
  });
}

TEST_CASE("LayerNorm forward, backward and parameter grads match the oracle on every target") {
  for_each_target([](const std::string& tn) {
    for (int64_t C : {1, 5, 16, 17, 63, 64, 65, 130, 768}) {
      for (bool affine : {true, false}) {
        const Tensor x = cpu::affine(randn({37, C}, 7), 2.0, 3.0), w = randn({C}, 8), b = randn({C}, 9);
        const Tensor dy = randn({37, C}, 10);
        const Tensor wt = affine ? w : Tensor(), bt = affine ? b : Tensor();
        const std::string s = tn + " C=" + std::to_string(C) + (affine ? " affine" : "");
        auto [r, g] = both([&] { return cpu::layernorm(x, wt, bt, 1e-5); });
        check_close(r.y, g.y, 2e-5, 2e-5, s + " y");
        check_close(r.mean, g.mean, 1e-6, 1e-6, s + " mean");
        check_close(r.rstd, g.rstd, 2e-5, 0, s + " rstd");
        auto [rg, gg] = both([&] { return cpu::layernorm_backward(dy, x, wt, r.mean, r.rstd, affine); });
        check_close(rg.dx, gg.dx, 1e-4, 1e-4, s + " dx");
        if (affine) {
          check_close(rg.dw, gg.dw, 1e-5, 1e-5, s + " dw");
          check_close(rg.db, gg.db, 1e-5, 1e-5, s + " db");
        }
      }
    }
  });
}

TEST_CASE("softmax, cross-entropy and attention rows match the oracle on every target") {
  for_each_target([](const std::string& tn) {
    for (int64_t T : {1, 3, 16, 17, 33, 64}) {
      const std::string s = tn + " T=" + std::to_string(T);
      const Tensor x = randn({2, 3, T, T}, 11, 4.0), dy = randn({2, 3, T, T}, 12);
      for (bool causal : {true, false}) {
        auto [r, g] = both([&] { return cpu::softmax(x, causal); });
        check_close(r, g, 1e-6, 1e-7, s + " softmax");
        auto [rb, gb] = both([&] { return cpu::softmax_backward(dy, r); });
        check_close(rb, gb, 1e-5, 1e-6, s + " softmax_backward");
      }
      for (int64_t V : {1, 2, 17, 65, 1000}) {
        const Tensor logits = randn({T, V}, 13, 5.0);
        Tensor tg = Tensor::empty({T}, DType::i32);
        for (int64_t i = 0; i < T; ++i) tg.mutable_data<int32_t>()[i] = static_cast<int32_t>((i * 7) % V);
        if (T > 2) tg.mutable_data<int32_t>()[1] = -100;  // an ignored row
        const std::string sv = s + " V=" + std::to_string(V);
        auto [r, g] = both([&] { return cpu::cross_entropy(logits, tg, -100); });
        check_close(r.loss, g.loss, 1e-6, 1e-6, sv + " loss");
        auto [rb, gb] = both([&] { return cpu::cross_entropy_backward(logits, tg, r.lse, 1.0, r.count, -100); });
        check_close(rb, gb, 1e-6, 1e-8, sv + " dlogits");
      }
      for (int64_t D : {1, 7, 16, 33}) {  // fused attention (B, H, T, D), causal with Tq == Tk
        const Tensor q = randn({2, 3, T, D}, 14), k = randn({2, 3, T, D}, 15), v = randn({2, 3, T, D}, 16);
        const Tensor dout = randn({2, 3, T, D}, 17);
        ops::AttentionParams ap;
        ap.scale = 1.0 / std::sqrt(double(D));
        const std::string sd = s + " D=" + std::to_string(D);
        auto [r, g] = both([&] { return cpu::attention(q, k, v, ap); });
        check_close(r.out, g.out, 1e-5, 1e-6, sd + " attention out");
        check_close(r.lse, g.lse, 1e-6, 1e-6, sd + " attention lse");
        auto [rb, gb] = both([&] { return cpu::attention_backward(dout, q, k, v, r.out, r.lse, ap, false); });
        check_close(rb.dq, gb.dq, 1e-4, 1e-5, sd + " dq");
        check_close(rb.dk, gb.dk, 1e-4, 1e-5, sd + " dk");
        check_close(rb.dv, gb.dv, 1e-5, 1e-6, sd + " dv");
      }
    }
  });
}

TEST_CASE("reductions, embedding grads and AdamW match the oracle on every target") {
  for_each_target([](const std::string& tn) {
    for (int64_t n : kSizes) {
      const std::string s = tn + " n=" + std::to_string(n);
      const Tensor x = randn({3, n}, 18);
      auto [rc, gc] = both([&] { return cpu::sum(x, 0, false); });  // columns: the oracle's exact double adds
      check_exact(rc, gc, s + " sum dim 0");
      auto [rr, gr] = both([&] { return cpu::sum(x, 1, false); });
      check_close(rr, gr, 1e-7, 1e-7, s + " sum dim 1");
      const int64_t V = 11;
      Tensor idx = Tensor::empty({n}, DType::i32);
      for (int64_t i = 0; i < n; ++i) idx.mutable_data<int32_t>()[i] = static_cast<int32_t>((i * 5) % V);
      const Tensor dout = randn({n, 19}, 19);
      auto [re, ge] = both([&] { return cpu::embedding_backward(dout, idx, V); });
      check_exact(re, ge, s + " embedding_backward");
      auto [ra, ga] = both([&] {
        Tensor p = randn({n, 2}, 20), bias = randn({n}, 21);
        AdamW opt({p, bias}, AdamWOptions{});
        for (int step = 0; step < 3; ++step) {
          p.set_grad(randn({n, 2}, 22 + step));
          bias.set_grad(randn({n}, 30 + step));
          opt.step(1e-2);
        }
        return std::make_pair(p, bias);
      });
      // FMA targets fuse as std::fma does (exact); SSE4 and older round the multiply-adds separately.
      check_close(ra.first, ga.first, 1e-6, 1e-7, s + " adamw p");
      check_close(ra.second, ga.second, 1e-6, 1e-7, s + " adamw bias");
    }
  });
}

TEST_CASE("the vectorized kernels give the same bits at any thread count") {
  const Tensor x = randn({4096, 65}, 40), w = randn({65}, 41), dy = randn({4096, 65}, 42);
  auto run = [&] {
    std::vector<Tensor> r;
    const auto ln = cpu::layernorm(x, w, Tensor(), 1e-5);
    const auto lg = cpu::layernorm_backward(dy, x, w, ln.mean, ln.rstd, false);
    r = {cpu::gelu(x), cpu::gelu_backward(dy, x), ln.y, lg.dx, lg.dw, cpu::softmax(x, false), cpu::sum(x, 0, false)};
    return r;
  };
  const int saved = num_threads();
  set_num_threads(1);
  const auto one = run();
  set_num_threads(3);
  const auto three = run();
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) check_exact(one[i], three[i], "kernel " + std::to_string(i));
}

}  // namespace
}  // namespace alpha
