// Fused attention on the CPU (core/cpu/attention.cpp, autograd/attention.cpp): against the unfused composition
// of ops (matmul, scale, causal softmax, dropout, matmul) forward and backward, dropout masks included; f64
// finite-difference gradients at awkward sizes; the row log-sum-exp; validation; a tiny GPT's loss and
// gradients with model.attention fused vs unfused.
//
// Dimension legend: B batch, H heads, Tq query rows, Tk keys, D head size, C = H*D.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"
#include "core/rng.h"
#include "config/config.h"
#include "model/gpt.h"

using namespace alpha;

namespace {

Tensor randn(const Shape& s, uint64_t seed, DType dt, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (double& x : v) x = scale * rng.normal();
  const Tensor t = Tensor::from_vector(v, s);
  return dt == DType::f64 ? t : t.to(dt);
}

// max_i |a_i - b_i| / max_i |b_i|
double rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const auto av = a.to_f64_vector(), bv = b.to_f64_vector();
  double m = 0, s = 1e-30;
  for (size_t i = 0; i < av.size(); ++i) {
    m = std::max(m, std::fabs(av[i] - bv[i]));
    s = std::max(s, std::fabs(bv[i]));
  }
  return m / s;
}

// Reference: the unfused composition GPT used before the fused op (model.attention = "unfused").
Tensor unfused(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double p, Rng& rng) {
  Tensor att = ag::scale(ag::matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(q.size(3))));
  att = ag::dropout(ag::softmax(att, causal), p, rng, true);
  return ag::matmul(att, v);
}

struct Case {
  int64_t B, H, Tq, Tk, D;
  bool causal;
  double p;
};

// Runs f on head views of one (B, T, 3, H, D) leaf (as GPT's qkv projection) and returns out, dqkv (grad of
// sum(out * R)), and the RNG position after the forward.
struct Run {
  Tensor out, grad;
  uint64_t rng_pos;
};
Run run_views(const Case& c, DType dt, bool fused) {
  REQUIRE(c.Tq == c.Tk);
  const int64_t C = c.H * c.D;
  Tensor qkv = randn({c.B, c.Tq, 3 * C}, 1, dt);
  qkv.set_requires_grad(true);
  auto head = [&](int64_t i) {
    return ag::transpose(ag::reshape(ag::narrow(qkv, 2, i * C, C), {c.B, c.Tq, c.H, c.D}), 1, 2);
  };
  Rng rng(77);
  rng.reserve(5);  // a nonzero starting offset
  const Tensor q = head(0), k = head(1), v = head(2);
  Tensor out = fused ? ag::attention(q, k, v, c.causal, c.p, rng) : unfused(q, k, v, c.causal, c.p, rng);
  const Tensor R = randn(out.shape(), 2, dt);
  ag::backward(ag::sum_all(ag::mul(out, R)));
  return {out, qkv.grad(), rng.state().position};
}

// Separate leaves q (B, H, Tq, D), k, v (B, H, Tk, D): returns out and the three gradients.
std::vector<Tensor> run_leaves(const Case& c, DType dt, bool fused) {
  Tensor q = randn({c.B, c.H, c.Tq, c.D}, 3, dt), k = randn({c.B, c.H, c.Tk, c.D}, 4, dt),
         v = randn({c.B, c.H, c.Tk, c.D}, 5, dt);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  Rng rng(78);
  Tensor out = fused ? ag::attention(q, k, v, c.causal, c.p, rng) : unfused(q, k, v, c.causal, c.p, rng);
  const Tensor R = randn(out.shape(), 6, dt);
  ag::backward(ag::sum_all(ag::mul(out, R)));
  return {out, q.grad(), k.grad(), v.grad()};
}

std::string name(const Case& c) {
  return fmt::format("B={} H={} Tq={} Tk={} D={} causal={} p={}", c.B, c.H, c.Tq, c.Tk, c.D, c.causal, c.p);
}

}  // namespace

TEST_CASE("fused attention equals the unfused composition on qkv head views, forward and backward") {
  for (DType dt : {DType::f32, DType::f64}) {
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    for (const Case c : {Case{2, 3, 17, 17, 8, true, 0.0}, Case{1, 1, 1, 1, 16, true, 0.0},
                         Case{2, 2, 33, 33, 16, true, 0.3}, Case{1, 3, 9, 9, 4, false, 0.5}}) {
      INFO(name(c), " dtype ", dtype_name(dt));
      const Run f = run_views(c, dt, true), u = run_views(c, dt, false);
      CHECK(rel_diff(f.out, u.out) < tol);
      CHECK(rel_diff(f.grad, u.grad) < tol);
      CHECK(f.rng_pos == u.rng_pos);  // the same RNG positions are reserved: later masks do not shift
      CHECK(f.out.transpose(1, 2).is_contiguous());  // (B, T, H, D) storage: GPT's reshape needs no copy
    }
  }
}

TEST_CASE("attention_qkv (GPT's packed layout) equals the unfused composition, dqkv included") {
  for (const Case c : {Case{2, 3, 17, 17, 8, true, 0.0}, Case{1, 2, 33, 33, 16, true, 0.3}, Case{2, 1, 1, 1, 8, true, 0.5}}) {
    INFO(name(c));
    const int64_t C = c.H * c.D;
    std::vector<Tensor> outs, grads;
    for (const bool fused : {true, false}) {
      Tensor qkv = randn({c.B, c.Tq, 3 * C}, 12, DType::f32);
      qkv.set_requires_grad(true);
      Rng rng(79);
      Tensor y;
      if (fused) {
        y = ag::attention_qkv(qkv, c.H, c.causal, c.p, rng);
      } else {  // GPT's unfused block: narrow, reshape, transpose the heads; transpose back after
        auto head = [&](int64_t i) {
          return ag::transpose(ag::reshape(ag::narrow(qkv, 2, i * C, C), {c.B, c.Tq, c.H, c.D}), 1, 2);
        };
        // ag::reshape, not ag::contiguous: on an already contiguous input (T = 1 here) the latter records an op
        // whose output is its input, and the gradient is dropped.
        y = ag::reshape(ag::transpose(unfused(head(0), head(1), head(2), c.causal, c.p, rng), 1, 2), {c.B, c.Tq, C});
      }
      REQUIRE(y.shape() == Shape({c.B, c.Tq, C}));
      ag::backward(ag::sum_all(ag::mul(y, randn(y.shape(), 13, DType::f32))));
      outs.push_back(y);
      REQUIRE_MESSAGE(qkv.grad().defined(), "fused=", fused);
      grads.push_back(qkv.grad());
    }
    CHECK(rel_diff(outs[0], outs[1]) < 1e-5);
    CHECK(rel_diff(grads[0], grads[1]) < 1e-5);
  }
}

TEST_CASE("fused attention equals the unfused composition for separate leaves and Tq < Tk (causal offset)") {
  for (const Case c : {Case{2, 2, 5, 13, 8, true, 0.0}, Case{1, 3, 7, 7, 16, true, 0.25},
                       Case{2, 1, 4, 9, 8, false, 0.1}, Case{1, 2, 3, 11, 4, true, 0.4}}) {
    INFO(name(c));
    const auto f = run_leaves(c, DType::f32, true), u = run_leaves(c, DType::f32, false);
    const char* what[] = {"out", "dq", "dk", "dv"};
    for (size_t i = 0; i < f.size(); ++i) {
      INFO(what[i]);
      CHECK(rel_diff(f[i], u[i]) < 1e-5);
    }
  }
}

TEST_CASE("dropout in fused attention drops exactly the probabilities ops::dropout drops") {
  // With v = identity rows (Tk = D), out row i is the dropped-and-scaled probability row itself.
  const int64_t B = 2, H = 2, T = 8;
  std::vector<double> eye(static_cast<size_t>(B * H * T * T), 0.0);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t j = 0; j < T; ++j) eye[static_cast<size_t>((bh * T + j) * T + j)] = 1.0;
  const Tensor v = Tensor::from_vector(eye, {B, H, T, T});
  const Tensor q = randn({B, H, T, T}, 7, DType::f64), k = randn({B, H, T, T}, 8, DType::f64);
  ops::AttentionParams ap;
  ap.scale = 0.3;
  ap.p = 0.4;
  ap.seed = 1234;
  ap.offset = 99;
  const Tensor out = ops::attention(q, k, v, ap).out;
  const Tensor probs = ops::softmax(ops::scale(ops::matmul(q, k, false, true), 0.3), true);
  const Tensor want = ops::dropout(probs, 0.4, 1234, 99);
  const auto o = out.to_f64_vector(), w = want.to_f64_vector();
  int zeros = 0;
  for (size_t i = 0; i < o.size(); ++i) {
    CHECK((o[i] == 0.0) == (w[i] == 0.0));
    CHECK(std::fabs(o[i] - w[i]) < 1e-12);
    zeros += w[i] == 0.0;
  }
  CHECK(zeros > static_cast<int>(o.size()) / 2);  // the causal zeros plus ~40% of the visible ones
}

TEST_CASE("attention lse is the log-sum-exp of each row's visible scaled scores") {
  const int64_t B = 1, H = 2, Tq = 5, Tk = 7, D = 4;
  const Tensor q = randn({B, H, Tq, D}, 9, DType::f64), k = randn({B, H, Tk, D}, 10, DType::f64),
               v = randn({B, H, Tk, D}, 11, DType::f64);
  ops::AttentionParams ap;
  ap.scale = 0.5;
  const Tensor lse = ops::attention(q, k, v, ap).lse;
  REQUIRE(lse.shape() == Shape({B, H, Tq}));
  const auto qv = q.to_f64_vector(), kv = k.to_f64_vector(), l = lse.to_f64_vector();
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < Tq; ++i) {
      double s = 0;
      for (int64_t j = 0; j <= i + (Tk - Tq); ++j) {
        double d = 0;
        for (int64_t c = 0; c < D; ++c) d += qv[(h * Tq + i) * D + c] * kv[(h * Tk + j) * D + c];
        s += std::exp(0.5 * d);
      }
      CHECK(l[h * Tq + i] == doctest::Approx(std::log(s)).epsilon(1e-12));
    }
}

TEST_CASE("gradcheck: fused attention (f64 central differences), dropout included") {
  struct G {
    int64_t B, H, Tq, Tk, D;
    bool causal;
    double p;
  };
  for (const G g : {G{1, 1, 1, 1, 8, true, 0.0}, G{1, 3, 17, 17, 8, true, 0.0}, G{2, 1, 5, 9, 16, true, 0.3},
                    G{1, 3, 6, 6, 8, false, 0.2}, G{1, 1, 33, 33, 8, true, 0.1}}) {
    INFO(fmt::format("B={} H={} Tq={} Tk={} D={} causal={} p={}", g.B, g.H, g.Tq, g.Tk, g.D, g.causal, g.p));
    std::vector<Tensor> in = {randn({g.B, g.H, g.Tq, g.D}, 20, DType::f64), randn({g.B, g.H, g.Tk, g.D}, 21, DType::f64),
                              randn({g.B, g.H, g.Tk, g.D}, 22, DType::f64)};
    auto f = [&](const std::vector<Tensor>& x) {
      Rng rng(5);  // fresh each call: every evaluation uses the same dropout mask
      return ag::attention(x[0], x[1], x[2], g.causal, g.p, rng);
    };
    for (Tensor& t : in) t.set_requires_grad(true);
    const Tensor y = f(in);
    const Tensor R = randn(y.shape(), 23, DType::f64);
    ag::backward(ag::sum_all(ag::mul(y, R)));
    const auto rv = R.to_f64_vector();
    auto loss = [&] {
      ag::NoGrad ng;
      const auto yv = f(in).to_f64_vector();
      double s = 0;
      for (size_t i = 0; i < yv.size(); ++i) s += yv[i] * rv[i];
      return s;
    };
    double max_err = 0;
    for (Tensor& x : in) {
      const auto ana = x.grad().to_f64_vector();
      double* px = x.mutable_data<double>();  // contiguous leaves
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double x0 = px[i], eps = 1e-6;
        px[i] = x0 + eps;
        const double lp = loss();
        px[i] = x0 - eps;
        const double lm = loss();
        px[i] = x0;
        const double num = (lp - lm) / (2 * eps);
        max_err = std::max(max_err, std::fabs(num - ana[i]) / std::max({1.0, std::fabs(num), std::fabs(ana[i])}));
      }
    }
    CHECK(max_err < 1e-7);
  }
}

TEST_CASE("attention rejects bad shapes, dtypes and parameters") {
  const Tensor q = randn({1, 2, 4, 8}, 30, DType::f32), k = randn({1, 2, 4, 8}, 31, DType::f32);
  ops::AttentionParams ap;
  CHECK_THROWS_AS(ops::attention(q, k, randn({1, 2, 5, 8}, 32, DType::f32), ap), ShapeError);  // v != k
  CHECK_THROWS_AS(ops::attention(q, randn({1, 2, 4, 4}, 32, DType::f32), randn({1, 2, 4, 4}, 33, DType::f32), ap),
                  ShapeError);  // D differs
  CHECK_THROWS_AS(ops::attention(q, randn({1, 2, 3, 8}, 32, DType::f32), randn({1, 2, 3, 8}, 33, DType::f32), ap),
                  ShapeError);  // causal with Tk < Tq
  CHECK_THROWS_AS(ops::attention(randn({2, 4, 8}, 34, DType::f32), k, k, ap), ShapeError);
  CHECK_THROWS_AS(ops::attention(q, k.to(DType::f64), k.to(DType::f64), ap), DTypeError);
  ap.p = 1.0;
  CHECK_THROWS_AS(ops::attention(q, k, k, ap), ValueError);
  Rng rng(1);
  CHECK_THROWS_AS(ag::attention(q, k, k, true, -0.1, rng), ValueError);
  CHECK(rng.state().position == 0);  // a rejected call reserves nothing
  ap.p = 0.0;
  const auto r = ops::attention(q, k, k, ap);
  CHECK_THROWS_AS(ops::attention_backward(randn({1, 2, 4, 4}, 35, DType::f32), q, k, k, r.out, r.lse, ap), ShapeError);
  CHECK_THROWS_AS(ops::attention_backward(r.out, q, k, k, r.out, randn({1, 2, 3}, 36, DType::f32), ap), ShapeError);
}

TEST_CASE("fused attention is deterministic: repeated runs give identical bits") {
  const Case c{2, 3, 21, 21, 8, true, 0.2};
  const Run a = run_views(c, DType::f32, true), b = run_views(c, DType::f32, true);
  CHECK(a.out.to_f64_vector() == b.out.to_f64_vector());
  CHECK(a.grad.to_f64_vector() == b.grad.to_f64_vector());
}

TEST_CASE("tiny GPT: model.attention fused and unfused give the same loss and gradients, dropout on") {
  for (const double p : {0.0, 0.2}) {
    INFO("dropout ", p);
    GPTConfig cfg{2, 2, 16, 12, 11, p, true};
    std::vector<double> losses;
    std::vector<std::vector<double>> grads;
    for (const bool fused : {true, false}) {
      cfg.fused_attention = fused;
      Rng init(3), drop(4);
      GPT model(cfg, init);
      Rng data(5);
      std::vector<int32_t> idx(2 * 12), tgt(2 * 12);
      for (auto& x : idx) x = static_cast<int32_t>(data.below(11));
      for (auto& x : tgt) x = static_cast<int32_t>(data.below(11));
      const Tensor loss = model.loss(Tensor::from_vector(idx, {2, 12}), Tensor::from_vector(tgt, {2, 12}), true, drop);
      ag::backward(loss);
      losses.push_back(loss.item());
      std::vector<double> g;
      for (const auto& [pname, t] : model.named_parameters()) {
        REQUIRE_MESSAGE(t.grad().defined(), pname, " got no gradient");
        const auto v = t.grad().to_f64_vector();
        g.insert(g.end(), v.begin(), v.end());
      }
      grads.push_back(g);
    }
    CHECK(std::fabs(losses[0] - losses[1]) <= 1e-5 * std::fabs(losses[1]));
    CHECK(rel_diff(Tensor::from_vector(grads[0], {int64_t(grads[0].size())}),
                   Tensor::from_vector(grads[1], {int64_t(grads[1].size())})) < 1e-5);
  }
}

TEST_CASE("config model.attention: fused by default, unfused accepted, anything else rejected") {
  CHECK(load_config_text("{}", {}, "<t>").model.attention == "fused");
  CHECK(load_config_text("{}", {"model.attention=unfused"}, "<t>").model.attention == "unfused");
  CHECK_THROWS_AS(load_config_text("{}", {"model.attention=flash"}, "<t>"), ConfigError);
}
