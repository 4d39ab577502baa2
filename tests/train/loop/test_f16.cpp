// f16 storage on the CPU: the dispatcher's upcast-compute-round path (core/ops.h's dtype rules), the
// differentiable cast, dynamic loss scaling (optim/loss_scale.h), and `model.precision: f16` training end to
// end (metrics carry the loss scale; checkpoints keep it for an exact resume).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"
#include "tests/test_util.h"
#include "model/gpt.h"
#include "loop/run_checkpoint.h"

using namespace alpha;
using namespace alpha::test;

namespace {
Tensor randn(const Shape& s, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<float>(rng.normal() * scale);
  return Tensor::from_vector(v, s);
}
std::vector<uint16_t> bits(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<uint16_t>(c.data<uint16_t>(), c.data<uint16_t>() + c.numel());
}
}  // namespace

TEST_CASE("f16 ops on the CPU give the f32 result of the upcast inputs, rounded to f16") {
  const Tensor x32 = randn({4, 33}, 1, 3.0).to(DType::f16).to(DType::f32);  // values representable in f16
  const Tensor x16 = x32.to(DType::f16);
  const Tensor y16 = ops::gelu(x16);
  REQUIRE(y16.dtype() == DType::f16);
  CHECK(bits(y16) == bits(ops::gelu(x32).to(DType::f16)));
  CHECK(bits(ops::softmax(x16, false)) == bits(ops::softmax(x32, false).to(DType::f16)));
  CHECK(bits(ops::sum(x16, 1)) == bits(ops::sum(x32, 1).to(DType::f16)));
  CHECK(bits(ops::matmul(x16, x16, false, true)) == bits(ops::matmul(x32, x32, false, true).to(DType::f16)));
  // Views: a transposed f16 view computes like its contiguous copy.
  CHECK(bits(ops::gelu(x16.transpose(0, 1))) == bits(ops::gelu(x32.transpose(0, 1).contiguous()).to(DType::f16)));
}

TEST_CASE("f16 dtype rules: mixed f16/f32 gives f32; loss, mean/rstd and parameter grads stay f32") {
  const Tensor a = randn({3, 5}, 2).to(DType::f16), b = randn({5}, 3);
  const Tensor m = ops::add(a, b);
  CHECK(m.dtype() == DType::f32);
  CHECK(m.to_f64_vector() == ops::add(a.to(DType::f32), b).to_f64_vector());
  CHECK_THROWS_AS(ops::add(a, b.to(DType::f64)), DTypeError);
  const auto ln = ops::layernorm(a, b.to(DType::f16), Tensor(), 1e-5);
  CHECK(ln.y.dtype() == DType::f16);
  CHECK(ln.mean.dtype() == DType::f32);
  const auto g = ops::layernorm_backward(a, a, b.to(DType::f16), ln.mean, ln.rstd, true);
  CHECK(g.dx.dtype() == DType::f16);
  CHECK(g.dw.dtype() == DType::f32);
  CHECK(g.db.dtype() == DType::f32);
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 4, 2}, {3});
  CHECK(ops::cross_entropy(a, targets).loss.dtype() == DType::f32);
  CHECK(ops::embedding_backward(a, targets, 7).dtype() == DType::f32);
  CHECK(ops::cross_entropy_backward(a, targets, ops::cross_entropy(a, targets).lse, 1.0, 3).dtype() == DType::f16);
}

TEST_CASE("f16 attention on the CPU is the f32 attention of the rounded inputs, rounded (packed grads too)") {
  const int64_t B = 2, H = 3, T = 17, D = 16;
  // (B, T, 3, H, D) qkv rounded to f16, its head views as in ag::attention_qkv; dout a strided view too.
  const Tensor qkv32 = randn({B, T, 3 * H * D}, 11).to(DType::f16).to(DType::f32), qkv16 = qkv32.to(DType::f16);
  auto heads = [&](const Tensor& t, int64_t i) {
    return t.view({B, T, 3, H, D}).narrow(2, i, 1).squeeze(2).transpose(1, 2);
  };
  const Tensor g32 = randn({B, T, H, D}, 12).to(DType::f16).to(DType::f32).transpose(1, 2), g16 = g32.to(DType::f16);
  for (double p : {0.0, 0.25}) {
    CAPTURE(p);
    ops::AttentionParams ap;
    ap.scale = 0.25;
    ap.p = p;
    ap.seed = 7;
    ap.offset = 3;
    const auto f16 = ops::attention(heads(qkv16, 0), heads(qkv16, 1), heads(qkv16, 2), ap);
    const auto f32 = ops::attention(heads(qkv32, 0), heads(qkv32, 1), heads(qkv32, 2), ap);
    REQUIRE(f16.out.dtype() == DType::f16);
    REQUIRE(f16.lse.dtype() == DType::f32);  // f32 exception (core/ops.h)
    CHECK(f16.out.transpose(1, 2).is_contiguous());
    CHECK(bits(f16.out) == bits(f32.out.to(DType::f16)));
    CHECK(f16.lse.to_f64_vector() == f32.lse.to_f64_vector());
    // The backward sees the f16 forward's own out (as autograd does); the f32 oracle its upcast copy.
    const Tensor o32 = f16.out.to(DType::f32);
    for (bool packed : {false, true}) {
      CAPTURE(packed);
      const auto d16 = ops::attention_backward(g16, heads(qkv16, 0), heads(qkv16, 1), heads(qkv16, 2), f16.out,
                                               f16.lse, ap, packed);
      const auto d32 = ops::attention_backward(g32, heads(qkv32, 0), heads(qkv32, 1), heads(qkv32, 2), o32, f32.lse,
                                               ap, packed);
      for (const Tensor* t : {&d16.dq, &d16.dk, &d16.dv}) REQUIRE(t->dtype() == DType::f16);
      CHECK(bits(d16.dq) == bits(d32.dq.to(DType::f16)));
      CHECK(bits(d16.dk) == bits(d32.dk.to(DType::f16)));
      CHECK(bits(d16.dv) == bits(d32.dv.to(DType::f16)));
      if (packed) {  // dq/dk/dv stay head views of the one rounded dqkv
        REQUIRE(d16.dqkv.dtype() == DType::f16);
        CHECK(bits(d16.dqkv) == bits(d32.dqkv.to(DType::f16)));
        CHECK(bits(heads(d16.dqkv, 1)) == bits(d16.dk));
        CHECK(d16.dq.storage() == d16.dqkv.storage());
        CHECK(d16.dv.storage() == d16.dqkv.storage());
      }
    }
  }
  // lse must be f32 for f16 q; mixed q/k dtypes are refused.
  ops::AttentionParams ap;
  const auto f = ops::attention(heads(qkv16, 0), heads(qkv16, 1), heads(qkv16, 2), ap);
  for (DType dt : {DType::f16, DType::f64}) {
    CHECK_THROWS_AS(ops::attention_backward(g16, heads(qkv16, 0), heads(qkv16, 1), heads(qkv16, 2), f.out,
                                            f.lse.to(dt), ap),
                    DTypeError);
  }
  CHECK_THROWS_AS(ops::attention_backward(g32, heads(qkv16, 0), heads(qkv16, 1), heads(qkv16, 2), f.out, f.lse, ap),
                  DTypeError);
  CHECK_THROWS_AS(ops::attention(heads(qkv16, 0), heads(qkv32, 1), heads(qkv16, 2), ap), DTypeError);
}

TEST_CASE("cast: f32 -> f16 -> f32 round trip, and the gradient comes back to the f32 master in f32") {
  const Tensor w = randn({6, 7}, 4);
  const Tensor rt = ops::cast(ops::cast(w, DType::f16), DType::f32);
  const auto a = w.to_f64_vector(), r = rt.to_f64_vector();
  for (size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(a[i] - r[i]) <= std::ldexp(std::fabs(a[i]), -11));
  CHECK(ops::cast(w, DType::f32).same(w));
  Tensor p = w.clone();
  p.set_requires_grad(true);
  Tensor loss = ag::sum_all(ag::mul(ag::cast(p, DType::f16), ag::cast(p, DType::f16)));
  ag::backward(loss);
  REQUIRE(p.grad().defined());
  CHECK(p.grad().dtype() == DType::f32);
  const auto gv = p.grad().to_f64_vector(), h = ops::cast(w, DType::f16).to_f64_vector();
  for (size_t i = 0; i < gv.size(); ++i) CHECK(std::fabs(gv[i] - 2 * h[i]) <= 2e-3 * std::fabs(2 * h[i]) + 1e-6);
}

TEST_CASE("loss scaler: unscale divides the grads; inf backs off, skips and leaves grads and params alone") {
  Tensor p = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  p.set_requires_grad(true);
  LossScaler s;
  CHECK(s.scale() == 65536.0);
  p.set_grad(Tensor::from_vector(std::vector<float>{65536, -131072, 32768}, {3}));
  CHECK(s.unscale({p}));
  CHECK(p.grad().to_f64_vector() == std::vector<double>{1, -2, 0.5});
  s.update(true);
  CHECK(s.scale() == 65536.0);
  CHECK(s.state().good_steps == 1);

  // Overflow: the step is skipped, so AdamW must not move p.
  AdamW opt({p}, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  p.set_grad(Tensor::from_vector(std::vector<float>{1, INFINITY, 2}, {3}));
  const bool finite = s.unscale({p});
  CHECK_FALSE(finite);
  CHECK(std::isinf(p.grad().to_f64_vector()[1]));  // untouched
  CHECK(p.grad().to_f64_vector()[0] == 1.0);
  s.update(finite);
  if (finite) opt.step(0.1);
  opt.zero_grad();
  CHECK(p.to_f64_vector() == std::vector<double>{1, 2, 3});
  CHECK(s.scale() == 32768.0);
  CHECK(s.state().good_steps == 0);
  CHECK(s.state().skipped == 1);
  p.set_grad(Tensor::from_vector(std::vector<float>{NAN, 0, 0}, {3}));
  CHECK_FALSE(s.unscale({p}));
}

TEST_CASE("loss scaler: the scale doubles after growth_interval finite steps in a row") {
  LossScaler s(LossScaleOptions{8.0, 2.0, 0.5, 3});
  for (int i = 0; i < 2; ++i) s.update(true);
  CHECK(s.scale() == 8.0);
  s.update(true);
  CHECK(s.scale() == 16.0);
  CHECK(s.state().good_steps == 0);
  s.update(true);
  s.update(true);
  s.update(false);  // an overflow resets the run of good steps
  CHECK(s.scale() == 8.0);
  for (int i = 0; i < 2; ++i) s.update(true);
  CHECK(s.scale() == 8.0);
  s.update(true);
  CHECK(s.scale() == 16.0);
  CHECK_THROWS_AS(s.set_state({0.0, 0, 0}), ValueError);
}

TEST_CASE("f16 mode on the CPU: a tiny GPT's 8 steps stay within 1e-2 of the f32 run (fused attention or not)") {
  auto run = [](bool f16, bool fused) {
    GPTConfig cfg{1, 2, 16, 8, 30, 0.0, true};
    cfg.fused_attention = fused;
    cfg.f16 = f16;
    Rng init(3), data(4), drop(5);
    GPT model(cfg, init);
    AdamW opt(model.parameters(), AdamWOptions{0.9, 0.95, 1e-8, 0.0});
    LossScaler scaler;
    std::vector<double> losses;
    for (int s = 0; s < 8; ++s) {
      std::vector<int32_t> x(16), y(16);
      for (auto& v : x) v = static_cast<int32_t>(data.below(30));
      for (size_t i = 0; i < y.size(); ++i) y[i] = (x[i] + 1) % 30;
      Tensor loss = model.loss(Tensor::from_vector(x, {2, 8}), Tensor::from_vector(y, {2, 8}), true, drop);
      losses.push_back(loss.item());
      ag::backward(loss, f16 ? scaler.scale() : 1.0);
      const bool ok = !f16 || scaler.unscale(model.parameters());
      if (f16) scaler.update(ok);
      for (const Tensor& p : model.parameters()) CHECK(p.grad().dtype() == DType::f32);
      if (ok) opt.step(1e-2);
      opt.zero_grad();
    }
    return losses;
  };
  for (bool fused : {false, true}) {
    CAPTURE(fused);
    const auto h = run(true, fused), f = run(false, fused);
    for (size_t i = 0; i < h.size(); ++i) CHECK_MESSAGE(std::fabs(h[i] - f[i]) <= 1e-2 * f[i], "step " << i);
    CHECK(h.back() < h.front());
  }
}

TEST_CASE("model.precision f16 trains through the CLI; step records carry loss_scale; resume is exact") {
  TempDir full, part;
  REQUIRE(cli({"train", tiny_config(full.path), "--quiet", "--set", "model.precision=f16", "--set",
               "train.sample_tokens=0"}) == kExitOk);
  const auto scales = records(full.path / "run" / "metrics.jsonl", "step", "loss_scale");
  REQUIRE(scales.size() == 12);
  for (double s : scales) CHECK(s == 65536.0);
  const auto losses = records(full.path / "run" / "metrics.jsonl", "step", "loss");
  for (double l : losses) CHECK(std::isfinite(l));
  // Stop at step 6 (a checkpoint) and resume: the same 12 losses as the uninterrupted run.
  REQUIRE(cli({"train", tiny_config(part.path), "--quiet", "--set", "model.precision=f16", "--set",
               "train.sample_tokens=0", "--set", "train.max_steps=6", "--set", "optim.decay_steps=12"}) == kExitOk);
  const RunCheckpoint ck = load_run_checkpoint((part.path / "run" / checkpoint_file_name(6)).string());
  CHECK(ck.state.loss_scale == LossScaleState{65536.0, 6, 0});  // 6 finite steps toward the next growth
  REQUIRE(cli({"train", tiny_config(part.path), "--quiet", "--set", "model.precision=f16", "--set",
               "train.sample_tokens=0", "--resume"}) == kExitOk);
  const auto resumed = records(part.path / "run" / "metrics.jsonl", "step", "loss");
  REQUIRE(resumed.size() == 12);
  for (size_t i = 0; i < 12; ++i) CHECK(resumed[i] == losses[i]);
  std::string err;
  CHECK(cli({"train", tiny_config(part.path), "--quiet", "--set", "model.precision=f8"}, &err) == kExitUsage);
  CHECK(err.find("model.precision") != std::string::npos);
}
