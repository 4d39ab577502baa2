// Finite-difference gradient checks (f64, central differences) for every differentiable op in autograd/ops.h,
// plus forward references for the NN kernels, the tape's accumulation/NoGrad behaviour and the errors bad
// inputs raise. Legend: B batch, T time, C channels, V vocabulary, N rows, M/K/N matmul dims.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "gradcheck.h"

using namespace alpha;
using namespace alpha::test;

namespace {

// GPT-2's tanh-approximated GELU, written independently of the kernel.
double gelu_ref(double v) {
  return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

// ---------------------------------------------------------------- element-wise

TEST_CASE("gradcheck: binary element-wise ops with broadcasting") {
  const Fn add = [](const Inputs& in) { return ag::add(in[0], in[1]); };
  const Fn sub = [](const Inputs& in) { return ag::sub(in[0], in[1]); };
  const Fn mul = [](const Inputs& in) { return ag::mul(in[0], in[1]); };
  const Fn div = [](const Inputs& in) { return ag::div(in[0], in[1]); };
  gradcheck("add same shape", add, {randn({3, 17}, 1), randn({3, 17}, 2)});
  gradcheck("add (3,1,5)+(4,5)", add, {randn({3, 1, 5}, 3), randn({4, 5}, 4)});
  gradcheck("sub (17)-(3,17)", sub, {randn({17}, 5), randn({3, 17}, 6)});
  gradcheck("sub 0-d", sub, {randn({2, 3}, 7), randn({}, 8)});
  gradcheck("mul (2,1,3)*(1,4,1)", mul, {randn({2, 1, 3}, 9), randn({1, 4, 1}, 10)});
  gradcheck("mul (1)*(65)", mul, {randn({1}, 11), randn({65}, 12)});
  gradcheck("div (3,4)/(4)", div, {randn({3, 4}, 13), rand_pos({4}, 14)});
  gradcheck("div (4)/(3,4)", div, {randn({4}, 15), rand_pos({3, 4}, 16)});
  // Non-contiguous leaves: a transposed and a narrowed view.
  gradcheck("mul transposed*narrowed", mul,
            {randn({5, 3}, 17).transpose(0, 1), randn({3, 9}, 18).narrow(1, 2, 5)});
  gradcheck("div transposed", div, {randn({4, 3}, 19).transpose(0, 1), rand_pos({4, 3}, 20).transpose(0, 1)});
}

TEST_CASE("gradcheck: unary element-wise ops") {
  gradcheck("neg", [](const Inputs& in) { return ag::neg(in[0]); }, {randn({3, 17}, 21)});
  gradcheck("exp", [](const Inputs& in) { return ag::exp(in[0]); }, {randn({17}, 22)});
  gradcheck("log", [](const Inputs& in) { return ag::log(in[0]); }, {rand_pos({3, 5}, 23)});
  gradcheck("sqrt", [](const Inputs& in) { return ag::sqrt(in[0]); }, {rand_pos({65}, 24)});
  gradcheck("scale", [](const Inputs& in) { return ag::scale(in[0], -2.5); }, {randn({1, 3}, 25)});
  gradcheck("add_scalar", [](const Inputs& in) { return ag::add_scalar(in[0], 3.0); }, {randn({3}, 26)});
  gradcheck("exp transposed", [](const Inputs& in) { return ag::exp(in[0]); }, {randn({4, 6}, 27).transpose(0, 1)});
  gradcheck("log narrowed", [](const Inputs& in) { return ag::log(in[0]); }, {rand_pos({5, 7}, 28).narrow(0, 1, 3)});
}

// ---------------------------------------------------------------- reductions

TEST_CASE("gradcheck: reductions") {
  for (int64_t dim : {0, 1, 2, -1}) {
    for (bool keep : {false, true}) {
      const std::string tag = "dim " + std::to_string(dim) + (keep ? " keepdim" : "");
      gradcheck("sum " + tag, [=](const Inputs& in) { return ag::sum(in[0], dim, keep); }, {randn({3, 4, 5}, 30)});
      gradcheck("mean " + tag, [=](const Inputs& in) { return ag::mean(in[0], dim, keep); }, {randn({3, 4, 5}, 31)});
    }
  }
  gradcheck("sum transposed", [](const Inputs& in) { return ag::sum(in[0], 1); }, {randn({5, 3}, 32).transpose(0, 1)});
  gradcheck("sum_all", [](const Inputs& in) { return ag::sum_all(in[0]); }, {randn({3, 17}, 33)});
  gradcheck("mean_all", [](const Inputs& in) { return ag::mean_all(in[0]); }, {randn({17, 3}, 34).transpose(0, 1)});
  gradcheck("sum_all 0-d", [](const Inputs& in) { return ag::sum_all(in[0]); }, {randn({}, 35)});
}

TEST_CASE("gradcheck: max flows to the argmax only") {
  // Distinct, well-separated values (a shuffled ramp) so eps-perturbations never change the argmax.
  std::vector<double> v(60);
  for (int i = 0; i < 60; ++i) v[i] = 0.1 * ((i * 37) % 60) - 3.0;
  const Tensor base = Tensor::from_vector(v, {3, 4, 5});
  for (int64_t dim : {0, 1, 2})
    for (bool keep : {false, true})
      gradcheck("max dim " + std::to_string(dim) + (keep ? " keepdim" : ""),
                [=](const Inputs& in) { return ag::max(in[0], dim, keep); }, {base.clone()});
  gradcheck("max transposed", [](const Inputs& in) { return ag::max(in[0], -1); }, {base.clone().transpose(0, 2)});
  // Direct check: the gradient is the one-hot of the argmax.
  Tensor x = Tensor::from_vector(std::vector<double>{1, 5, 2, 7, 3, 0}, {2, 3});
  x.set_requires_grad(true);
  ag::backward(ag::sum_all(ag::max(x, 1)));
  CHECK(x.grad().to_f64_vector() == std::vector<double>{0, 1, 0, 1, 0, 0});
}

// ---------------------------------------------------------------- views

TEST_CASE("gradcheck: views and copies") {
  gradcheck("reshape", [](const Inputs& in) { return ag::reshape(in[0], {6, -1}); }, {randn({3, 4, 5}, 40)});
  gradcheck("reshape of transposed", [](const Inputs& in) { return ag::reshape(in[0], {20}); },
            {randn({5, 4}, 41).transpose(0, 1)});
  gradcheck("transpose", [](const Inputs& in) { return ag::transpose(in[0], 0, 2); }, {randn({2, 3, 4}, 42)});
  gradcheck("permute", [](const Inputs& in) { return ag::permute(in[0], {2, 0, 1}); }, {randn({2, 3, 4}, 43)});
  gradcheck("permute negative dims", [](const Inputs& in) { return ag::permute(in[0], {-1, 0, 1}); },
            {randn({3, 2, 5}, 44)});
  gradcheck("narrow", [](const Inputs& in) { return ag::narrow(in[0], 1, 1, 3); }, {randn({3, 5, 2}, 45)});
  gradcheck("narrow of narrowed", [](const Inputs& in) { return ag::narrow(in[0], 0, 2, 2); },
            {randn({7, 3}, 46).narrow(0, 1, 5)});
  gradcheck("expand", [](const Inputs& in) { return ag::expand(in[0], {2, 3, 4}); }, {randn({3, 1}, 47)});
  gradcheck("expand new dims", [](const Inputs& in) { return ag::expand(in[0], {4, 17}); }, {randn({17}, 48)});
  gradcheck("contiguous", [](const Inputs& in) { return ag::contiguous(in[0]); }, {randn({4, 3}, 49).transpose(0, 1)});
  // Already contiguous: the gradient still flows (once recorded an op whose output was its own input and lost it).
  gradcheck("contiguous of contiguous", [](const Inputs& in) { return ag::mul(ag::contiguous(in[0]), in[0]); },
            {randn({4, 3}, 52)});
  gradcheck("chain transpose->contiguous->reshape->mul",
            [](const Inputs& in) {
              return ag::mul(ag::reshape(ag::contiguous(ag::transpose(in[0], 0, 1)), {-1}), in[1]);
            },
            {randn({3, 4}, 50), randn({12}, 51)});
}

TEST_CASE("cat: joins along any dim (views too); gradcheck; each input's gradient is its own tensor") {
  const Fn cat3 = [](const Inputs& in) { return ag::cat({in[0], in[1], in[2]}, 0); };
  gradcheck("cat dim 0 (q/k/v weights)", cat3, {randn({4, 3}, 53), randn({2, 3}, 54), randn({2, 3}, 55)});
  gradcheck("cat last dim, strided inputs", [](const Inputs& in) { return ag::cat({in[0], in[1]}, -1); },
            {randn({3, 5, 2}, 56).transpose(1, 2), randn({3, 8, 2}, 57).narrow(1, 1, 6).transpose(1, 2)});
  gradcheck("cat middle dim", [](const Inputs& in) { return ag::cat({in[0], in[1]}, 1); },
            {randn({2, 1, 3}, 58), randn({2, 4, 3}, 59)});
  // Forward: out = [a; b] element for element, from a strided view and an offset view.
  const Tensor a = randn({3, 2}, 60).transpose(0, 1), b = randn({5, 3}, 61).narrow(0, 2, 3);
  const Tensor y = ops::cat({a, b}, 0);
  CHECK(y.shape() == Shape{5, 3});
  CHECK(y.is_contiguous());
  const auto yv = y.to_f64_vector(), av = a.contiguous().to_f64_vector(), bv = b.contiguous().to_f64_vector();
  for (size_t i = 0; i < av.size(); ++i) CHECK(yv[i] == av[i]);
  for (size_t i = 0; i < bv.size(); ++i) CHECK(yv[av.size() + i] == bv[i]);
  // One input: a fresh copy at offset 0, never a view of it (a parameter's grad slice must be its own tensor).
  const Tensor one = ops::cat({b}, 0);
  CHECK(one.offset() == 0);
  CHECK(one.storage() != b.storage());
  Tensor w1 = randn({2, 3}, 62), w2 = randn({1, 3}, 63);
  w1.set_requires_grad(true);
  w2.set_requires_grad(true);
  ag::backward(ag::sum_all(ag::cat({w1, w2}, 0)));
  CHECK(w2.grad().offset() == 0);
  CHECK(w1.grad().storage() != w2.grad().storage());
  CHECK_THROWS_AS(ops::cat({Tensor::zeros({2, 3}), Tensor::zeros({2, 4})}, 0), ShapeError);
  CHECK_THROWS_AS(ops::cat({Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::f64)}, 0), DTypeError);
  CHECK_THROWS_AS(ops::cat({}, 0), ValueError);
}

// ---------------------------------------------------------------- matmul / linear

TEST_CASE("gradcheck: matmul, all transpose combinations") {
  const int64_t M = 3, K = 17, N = 5;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
      const std::string tag = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
      gradcheck("matmul 2-D " + tag, [=](const Inputs& in) { return ag::matmul(in[0], in[1], ta, tb); },
                {randn(as, 60), randn(bs, 61)});
      Shape ab = as, bb = bs;
      ab.insert(ab.begin(), {2, 3});
      bb.insert(bb.begin(), {2, 3});
      gradcheck("matmul batched " + tag, [=](const Inputs& in) { return ag::matmul(in[0], in[1], ta, tb); },
                {randn(ab, 62), randn(bb, 63)});
      gradcheck("matmul 2-D weight " + tag, [=](const Inputs& in) { return ag::matmul(in[0], in[1], ta, tb); },
                {randn(ab, 64), randn(bs, 65)});
      Shape bb1 = bs;
      bb1.insert(bb1.begin(), 3);
      gradcheck("matmul broadcast batch (2,3,..)x(3,..) " + tag,
                [=](const Inputs& in) { return ag::matmul(in[0], in[1], ta, tb); }, {randn(ab, 66), randn(bb1, 67)});
      Shape bb2 = bs;
      bb2.insert(bb2.begin(), {2, 1});
      gradcheck("matmul broadcast batch (2,3,..)x(2,1,..) " + tag,
                [=](const Inputs& in) { return ag::matmul(in[0], in[1], ta, tb); }, {randn(ab, 68), randn(bb2, 69)});
    }
  // Non-contiguous operands without transpose flags, and degenerate sizes.
  gradcheck("matmul transposed views", [](const Inputs& in) { return ag::matmul(in[0], in[1]); },
            {randn({2, 17, 3}, 70).transpose(1, 2), randn({9, 17}, 71).narrow(0, 2, 5).transpose(0, 1)});
  gradcheck("matmul 1x1", [](const Inputs& in) { return ag::matmul(in[0], in[1]); },
            {randn({1, 1}, 72), randn({1, 1}, 73)});
  gradcheck("matmul (1,65)x(65,1)", [](const Inputs& in) { return ag::matmul(in[0], in[1]); },
            {randn({1, 65}, 74), randn({65, 1}, 75)});
}

TEST_CASE("gradcheck: linear with and without bias") {
  gradcheck("linear with bias", [](const Inputs& in) { return ag::linear(in[0], in[1], in[2]); },
            {randn({2, 3, 17}, 80), randn({5, 17}, 81), randn({5}, 82)});
  gradcheck("linear without bias", [](const Inputs& in) { return ag::linear(in[0], in[1], Tensor()); },
            {randn({3, 17}, 83), randn({1, 17}, 84)});
  gradcheck("linear transposed input", [](const Inputs& in) { return ag::linear(in[0], in[1], in[2]); },
            {randn({6, 4}, 85).transpose(0, 1), randn({3, 6}, 86), randn({3}, 87)});
}

// ---------------------------------------------------------------- NN ops

TEST_CASE("embedding: forward gathers rows, gradcheck with repeated indices, deterministic backward") {
  const Tensor w = randn({7, 3}, 90);
  const Tensor idx = ints({2, 0, 2, 6, 2, 1}, {2, 3});
  const Tensor out = ops::embedding(w, idx);
  CHECK(out.shape() == Shape{2, 3, 3});
  const auto wv = w.to_f64_vector(), ov = out.to_f64_vector();
  const std::vector<int> iv = {2, 0, 2, 6, 2, 1};
  for (int n = 0; n < 6; ++n)
    for (int c = 0; c < 3; ++c) CHECK(ov[n * 3 + c] == wv[iv[n] * 3 + c]);
  gradcheck("embedding", [idx](const Inputs& in) { return ag::embedding(in[0], idx); }, {randn({7, 3}, 91)});
  gradcheck("embedding 1-D idx, vocab 65",
            [](const Inputs& in) { return ag::embedding(in[0], ints({64, 0, 64}, {3})); },
            {randn({65, 2}, 92)});
  // Non-contiguous weight and indices.
  const Tensor idx_t = ints({0, 1, 4, 4, 3, 0}, {3, 2}).transpose(0, 1);
  gradcheck("embedding transposed weight+idx", [idx_t](const Inputs& in) { return ag::embedding(in[0], idx_t); },
            {randn({4, 5}, 93).transpose(0, 1)});

  // Large f32 backward (threaded path) equals a sequential reference exactly and is bit-stable.
  const int64_t V = 65, C = 48, N = 4096;
  Rng rng(94);
  std::vector<int32_t> ids(N);
  for (auto& i : ids) i = static_cast<int32_t>(rng.below(V));
  const Tensor big_idx = ints(ids, {N});
  const Tensor dout = randn({N, C}, 95).to(DType::f32);
  const Tensor dw1 = ops::embedding_backward(dout, big_idx, V), dw2 = ops::embedding_backward(dout, big_idx, V);
  CHECK(dw1.to_f32_vector() == dw2.to_f32_vector());
  const auto dv = dout.to_f32_vector();
  std::vector<float> ref(V * C, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) ref[ids[n] * C + c] += dv[n * C + c];
  CHECK(dw1.to_f32_vector() == ref);
}

TEST_CASE("layernorm: forward matches a reference; gradcheck with and without weight and bias") {
  const Tensor x = randn({3, 17}, 100, 2.0), w = randn({17}, 101), b = randn({17}, 102);
  const ops::LayerNormOut r = ops::layernorm(x, w, b, 1e-5);
  const auto xv = x.to_f64_vector(), wv = w.to_f64_vector(), bv = b.to_f64_vector(), yv = r.y.to_f64_vector();
  const auto mv = r.mean.to_f64_vector(), rv = r.rstd.to_f64_vector();
  CHECK(r.mean.shape() == Shape{3});
  for (int n = 0; n < 3; ++n) {
    double m = 0, v = 0;
    for (int c = 0; c < 17; ++c) m += xv[n * 17 + c] / 17;
    for (int c = 0; c < 17; ++c) v += (xv[n * 17 + c] - m) * (xv[n * 17 + c] - m) / 17;
    CHECK(mv[n] == doctest::Approx(m).epsilon(1e-12));
    CHECK(rv[n] == doctest::Approx(1 / std::sqrt(v + 1e-5)).epsilon(1e-12));
    for (int c = 0; c < 17; ++c)
      CHECK(yv[n * 17 + c] ==
            doctest::Approx((xv[n * 17 + c] - m) / std::sqrt(v + 1e-5) * wv[c] + bv[c]).epsilon(1e-12));
  }
  gradcheck("layernorm w+b", [](const Inputs& in) { return ag::layernorm(in[0], in[1], in[2]); },
            {randn({2, 3, 17}, 103), randn({17}, 104), randn({17}, 105)});
  gradcheck("layernorm w only", [](const Inputs& in) { return ag::layernorm(in[0], in[1], Tensor()); },
            {randn({5, 3}, 106), randn({3}, 107)});
  gradcheck("layernorm b only", [](const Inputs& in) { return ag::layernorm(in[0], Tensor(), in[1]); },
            {randn({4, 65}, 108), randn({65}, 109)});
  gradcheck("layernorm no affine", [](const Inputs& in) { return ag::layernorm(in[0], Tensor(), Tensor()); },
            {randn({3, 2}, 110)});
  gradcheck("layernorm C=1", [](const Inputs& in) { return ag::layernorm(in[0], in[1], in[2]); },
            {randn({3, 1}, 117), randn({1}, 118), randn({1}, 119)});
  gradcheck("layernorm transposed x", [](const Inputs& in) { return ag::layernorm(in[0], in[1], in[2], 1e-3); },
            {randn({6, 4}, 111).transpose(0, 1), randn({6}, 112), randn({6}, 113)});
  // f32 on many rows (threaded) agrees with f64.
  const Tensor xb = randn({300, 64}, 114, 3.0), wb = randn({64}, 115), bb = randn({64}, 116);
  const auto y64 = ops::layernorm(xb, wb, bb, 1e-5).y.to_f64_vector();
  const auto y32 = ops::layernorm(xb.to(DType::f32), wb.to(DType::f32), bb.to(DType::f32), 1e-5).y.to_f64_vector();
  CHECK(max_abs_diff(y64, y32) < 1e-5);
}

TEST_CASE("gelu: forward matches the tanh formula; gradcheck; huge inputs stay finite") {
  const Tensor x = randn({3, 17}, 120, 1.5);
  const auto xv = x.to_f64_vector(), yv = ops::gelu(x).to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    CHECK(yv[i] == doctest::Approx(gelu_ref(xv[i])).epsilon(1e-14));
  }
  // Tails: relative accuracy where the result is tiny (a too-early tanh clamp would show up here).
  const std::vector<double> tails = {-6.0, -5.5, -4.0, 6.0};
  const auto yt = ops::gelu(Tensor::from_vector(tails, {4})).to_f64_vector();
  for (size_t i = 0; i < tails.size(); ++i) {
    const double ref = gelu_ref(tails[i]);
    CHECK(std::abs(yt[i] - ref) <= 1e-12 * std::abs(ref));
  }
  gradcheck("gelu", [](const Inputs& in) { return ag::gelu(in[0]); }, {randn({3, 17}, 121, 1.5)});
  gradcheck("gelu transposed", [](const Inputs& in) { return ag::gelu(in[0]); }, {randn({5, 2}, 122).transpose(0, 1)});
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor big = Tensor::from_vector(std::vector<double>{1e4, -1e4, 1e30, -1e30, 3e38, -3e38}, {6}).to(dt);
    const auto y = ops::gelu(big).to_f64_vector();
    const auto g = ops::gelu_backward(Tensor::ones({6}, dt), big).to_f64_vector();
    for (int i = 0; i < 6; ++i) {
      CHECK(std::isfinite(y[i]));
      CHECK(std::isfinite(g[i]));
    }
    CHECK(y[0] == doctest::Approx(1e4));
    CHECK(y[1] == 0.0);
    CHECK(g[0] == doctest::Approx(1.0));
    CHECK(g[1] == doctest::Approx(0.0));
  }
}

TEST_CASE("softmax: forward, causal mask, gradcheck (Tq == Tk and Tq < Tk)") {
  const Tensor x = randn({2, 3, 5}, 130);
  const auto xv = x.to_f64_vector(), y = ops::softmax(x, true).to_f64_vector();
  for (int r = 0; r < 6; ++r) {
    const int i = r % 3, vis = i + (5 - 3) + 1;
    double s = 0;
    for (int j = 0; j < vis; ++j) s += std::exp(xv[r * 5 + j]);
    for (int j = 0; j < 5; ++j) {
      if (j < vis) CHECK(y[r * 5 + j] == doctest::Approx(std::exp(xv[r * 5 + j]) / s).epsilon(1e-13));
      else CHECK(y[r * 5 + j] == 0.0);
    }
  }
  const auto yn = ops::softmax(x, false).to_f64_vector();
  for (int r = 0; r < 6; ++r) {
    double s = 0;
    for (int j = 0; j < 5; ++j) s += yn[r * 5 + j];
    CHECK(s == doctest::Approx(1.0).epsilon(1e-14));
  }
  gradcheck("softmax", [](const Inputs& in) { return ag::softmax(in[0]); }, {randn({3, 17}, 131)});
  gradcheck("softmax causal square", [](const Inputs& in) { return ag::softmax(in[0], true); },
            {randn({2, 4, 4}, 132)});
  gradcheck("softmax causal Tq<Tk", [](const Inputs& in) { return ag::softmax(in[0], true); }, {randn({2, 3, 5}, 133)});
  gradcheck("softmax single column", [](const Inputs& in) { return ag::softmax(in[0]); }, {randn({3, 1}, 134)});
  gradcheck("softmax causal transposed", [](const Inputs& in) { return ag::softmax(in[0], true); },
            {randn({2, 5, 5}, 135).transpose(1, 2)});
  gradcheck("softmax narrowed", [](const Inputs& in) { return ag::softmax(in[0]); },
            {randn({4, 9}, 136).narrow(1, 2, 6)});
}

TEST_CASE("cross_entropy: forward reference, gradcheck with an ignored row, all-ignored gives 0") {
  const Tensor logits = randn({4, 7}, 140, 2.0);
  const Tensor tg = ints({3, -1, 0, 6}, {4});
  const ops::CrossEntropyOut r = ops::cross_entropy(logits, tg, -1);
  CHECK(r.count == 3);
  const auto lv = logits.to_f64_vector();
  const int target[4] = {3, -1, 0, 6};
  double want = 0;
  for (int n : {0, 2, 3}) {
    double s = 0;
    for (int v = 0; v < 7; ++v) s += std::exp(lv[n * 7 + v]);
    want += std::log(s) - lv[n * 7 + target[n]];
  }
  CHECK(r.loss.item() == doctest::Approx(want / 3).epsilon(1e-13));
  gradcheck("cross_entropy", [tg](const Inputs& in) { return ag::cross_entropy(in[0], tg); },
            {randn({4, 7}, 141, 2.0)});
  const Tensor tg2 = ints({64, 5, 0}, {3});
  gradcheck("cross_entropy V=65, ignore_index=5", [tg2](const Inputs& in) { return ag::cross_entropy(in[0], tg2, 5); },
            {randn({3, 65}, 142)});
  gradcheck("cross_entropy transposed logits",
            [](const Inputs& in) { return ag::cross_entropy(in[0], ints({1, 0, 2}, {3})); },
            {randn({3, 3}, 143).transpose(0, 1)});
  gradcheck("cross_entropy N=1 V=1", [](const Inputs& in) { return ag::cross_entropy(in[0], ints({0}, {1})); },
            {randn({1, 1}, 144)});
  // Every row ignored: loss 0 (documented), gradient 0, no NaN.
  Tensor l = randn({2, 3}, 145);
  l.set_requires_grad(true);
  Tensor loss = ag::cross_entropy(l, ints({-1, -1}, {2}));
  CHECK(loss.item() == 0.0);
  ag::backward(loss);
  CHECK(l.grad().to_f64_vector() == std::vector<double>(6, 0.0));
}

TEST_CASE("dropout: gradcheck and the gradient is the same scaled mask") {
  const double p = 0.3;
  const Fn f = [p](const Inputs& in) {
    Rng rng(42);  // fixed RNG state: every evaluation draws the same mask
    rng.reserve(5);
    return ag::dropout(in[0], p, rng);
  };
  gradcheck("dropout p=0.3", f, {randn({3, 17}, 150)});
  gradcheck("dropout transposed", f, {randn({17, 3}, 151).transpose(0, 1)});
  // Independent mask from the contract: element i kept iff u32_to_unit(philox_at(42, 5 + i)) >= p.
  Tensor x = randn({3, 17}, 152);
  x.set_requires_grad(true);
  const Tensor y = f({x});
  ag::backward(ag::sum_all(y));
  const auto xv = x.to_f64_vector(), yv = y.to_f64_vector(), gv = x.grad().to_f64_vector();
  int dropped = 0;
  for (int i = 0; i < 51; ++i) {
    const bool keep = static_cast<double>(u32_to_unit(philox_at(42, 5 + i))) >= p;
    dropped += !keep;
    CHECK(gv[i] == doctest::Approx(keep ? 1 / (1 - p) : 0.0).epsilon(1e-15));
    CHECK(yv[i] == doctest::Approx(keep ? xv[i] / (1 - p) : 0.0).epsilon(1e-15));
  }
  CHECK(dropped > 0);
  CHECK(dropped < 51);
}

TEST_CASE("dropout: same (seed, offset) gives the same mask; ~p zeroed; identity cases use no RNG") {
  const Tensor x = Tensor::ones({1000, 100}, DType::f32);
  const auto a = ops::dropout(x, 0.25, 7, 1000).to_f32_vector();
  const auto b = ops::dropout(x, 0.25, 7, 1000).to_f32_vector();
  const auto c = ops::dropout(x, 0.25, 7, 1001).to_f32_vector();
  CHECK(a == b);
  CHECK(a != c);
  // Offsets shift the stream: the mask at offset 1001 is the one at 1000 moved by one element.
  CHECK(std::equal(c.begin(), c.end() - 1, a.begin() + 1));
  int64_t zeros = 0, bad_scale = 0;
  for (float v : a) {
    if (v == 0.0f) ++zeros;
    else bad_scale += v != static_cast<float>(1 / 0.75);
  }
  CHECK(bad_scale == 0);
  CHECK(static_cast<double>(zeros) / 1e5 == doctest::Approx(0.25).epsilon(0.03));
  Rng rng(3);
  Tensor y = randn({4, 4}, 160);
  CHECK(ag::dropout(y, 0.0, rng).same(y));
  CHECK(ag::dropout(y, 0.5, rng, /*training=*/false).same(y));
  CHECK(rng.state().position == 0);
  ag::dropout(y, 0.5, rng);
  CHECK(rng.state().position == 16);  // advanced by numel
}

TEST_CASE("softmax and cross_entropy stay finite for logits ~1e4") {
  for (DType dt : {DType::f32, DType::f64}) {
    // Shifting every logit by 1e4 must not change the result (values chosen exactly representable in f32).
    const std::vector<double> base = {0.0, -1.0, 2.5, 0.75, -3.0, 1.25};
    std::vector<double> big = base;
    for (double& v : big) v += 1e4;
    const Tensor lb = Tensor::from_vector(big, {2, 3}).to(dt), ls = Tensor::from_vector(base, {2, 3}).to(dt);
    const auto yb = ops::softmax(lb, false).to_f64_vector(), ys = ops::softmax(ls, false).to_f64_vector();
    for (double v : yb) CHECK(std::isfinite(v));
    CHECK(max_abs_diff(yb, ys) < 1e-6);
    const Tensor tg = ints({2, 0}, {2});
    const ops::CrossEntropyOut rb = ops::cross_entropy(lb, tg), rs = ops::cross_entropy(ls, tg);
    CHECK(std::isfinite(rb.loss.item()));
    CHECK(rb.loss.item() == doctest::Approx(rs.loss.item()).epsilon(1e-5));
    const auto gb = ops::cross_entropy_backward(lb, tg, rb.lse, 1.0, rb.count).to_f64_vector();
    const auto gs = ops::cross_entropy_backward(ls, tg, rs.lse, 1.0, rs.count).to_f64_vector();
    for (double v : gb) CHECK(std::isfinite(v));
    CHECK(max_abs_diff(gb, gs) < 1e-3);  // f32 lse near 1e4 carries ~1e-3 absolute rounding
  }
}

TEST_CASE("NN kernels give the same bits on 1 and 4 threads") {
  const Tensor x = randn({256, 96}, 200, 2.0).to(DType::f32), dy = randn({256, 96}, 201).to(DType::f32);
  const Tensor w = randn({96}, 202).to(DType::f32), b = randn({96}, 203).to(DType::f32);
  Rng rng(204);
  std::vector<int32_t> t(256);
  for (auto& v : t) v = static_cast<int32_t>(rng.below(96));
  const Tensor ids = ints(t, {256});  // embedding indices
  t[7] = -1;
  const Tensor tg = ints(t, {256});  // targets with one ignored row
  auto run = [&] {
    std::vector<std::vector<float>> r;
    const ops::LayerNormOut ln = ops::layernorm(x, w, b, 1e-5);
    const ops::LayerNormGrads lg = ops::layernorm_backward(dy, x, w, ln.mean, ln.rstd, true);
    for (const Tensor& o : {ln.y, lg.dx, lg.dw, lg.db}) r.push_back(o.to_f32_vector());
    const Tensor y = ops::softmax(x.view({4, 64, 96}), true);
    r.push_back(y.to_f32_vector());
    r.push_back(ops::softmax_backward(dy.view({4, 64, 96}), y).to_f32_vector());
    r.push_back(ops::gelu(x).to_f32_vector());
    r.push_back(ops::gelu_backward(dy, x).to_f32_vector());
    const ops::CrossEntropyOut ce = ops::cross_entropy(x, tg);
    r.push_back(ce.loss.to_f32_vector());
    r.push_back(ops::cross_entropy_backward(x, tg, ce.lse, 1.0, ce.count).to_f32_vector());
    r.push_back(ops::dropout(x, 0.1, 5, 9).to_f32_vector());
    r.push_back(ops::embedding_backward(dy, ids, 96).to_f32_vector());
    return r;
  };
  const int prev = num_threads();
  set_num_threads(1);
  const auto one = run();
  set_num_threads(4);
  const auto four = run();
  set_num_threads(prev);
  REQUIRE(one.size() == four.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output ", i);
    CHECK(one[i] == four[i]);
  }
}

// ---------------------------------------------------------------- tape behaviour

TEST_CASE("a tensor used twice accumulates gradients") {
  Tensor x = randn({3, 4}, 170);
  x.set_requires_grad(true);
  ag::backward(ag::sum_all(ag::mul(x, x)));  // d/dx sum(x^2) = 2x
  const auto xv = x.to_f64_vector();
  auto g = x.grad().to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(g[i] == doctest::Approx(2 * xv[i]));
  // Two branches (gelu and exp) into one sum; then a second backward adds onto the existing grad.
  x.set_grad(Tensor());
  const Fn two = [](const Inputs& in) { return ag::add(ag::exp(in[0]), ag::scale(in[0], 3.0)); };
  ag::backward(ag::sum_all(two({x})));
  g = x.grad().to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(g[i] == doctest::Approx(std::exp(xv[i]) + 3.0));
  ag::backward(ag::sum_all(two({x})));
  const auto g2 = x.grad().to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(g2[i] == doctest::Approx(2 * (std::exp(xv[i]) + 3.0)));
  gradcheck("x used by three ops", [](const Inputs& in) { return ag::mul(ag::gelu(in[0]), ag::softmax(in[0])); },
            {randn({2, 5}, 171)});
}

TEST_CASE("NoGrad records nothing") {
  Tensor x = randn({3, 4}, 180);
  x.set_requires_grad(true);
  ag::clear_tape();
  {
    ag::NoGrad ng;
    CHECK_FALSE(ag::grad_enabled());
    Tensor y = ag::softmax(ag::layernorm(ag::gelu(x), Tensor(), Tensor()));
    CHECK_FALSE(y.requires_grad());
    CHECK(ag::tape_size() == 0);
  }
  CHECK(ag::grad_enabled());
  Tensor y = ag::gelu(x);
  CHECK(y.requires_grad());
  CHECK(ag::tape_size() == 1);
  ag::clear_tape();
}

// ---------------------------------------------------------------- errors

TEST_CASE("bad inputs raise the right error types") {
  const Tensor w = randn({65, 4}, 190).to(DType::f32);
  CHECK_THROWS_AS(ops::embedding(w, ints({3, 70}, {2})), IndexError);
  CHECK_THROWS_WITH(ops::embedding(w, ints({70}, {1})), "[embedding] index 70 out of range for vocab 65");
  CHECK_THROWS_AS(ops::embedding(w, ints({-1}, {1})), IndexError);
  CHECK_THROWS_AS(ops::embedding_backward(Tensor::zeros({1, 4}), ints({65}, {1}), 65), IndexError);
  CHECK_THROWS_AS(ops::embedding(w, w), DTypeError);
  const Tensor logits = Tensor::zeros({2, 5});
  CHECK_THROWS_AS(ops::cross_entropy(logits, ints({0, 5}, {2})), IndexError);
  CHECK_THROWS_AS(ops::cross_entropy(logits, ints({-2, 0}, {2})), IndexError);  // negative, not ignore_index
  CHECK_THROWS_AS(ops::cross_entropy(logits, ints({-1, 0}, {2}), 3), IndexError);  // -1 is not ignored here
  CHECK_NOTHROW(ops::cross_entropy(logits, ints({-1, 0}, {2})));
  CHECK_THROWS_AS(ops::cross_entropy(ints({0, 1}, {1, 2}), ints({0}, {1})), DTypeError);  // i32 logits
  CHECK_THROWS_AS(ops::cross_entropy(logits, ints({0, 1, 2}, {3})), ShapeError);
  Rng rng(1);
  CHECK_THROWS_AS(ops::dropout(logits, 1.0, 0, 0), ValueError);
  CHECK_THROWS_AS(ag::dropout(logits, 1.0, rng), ValueError);
  CHECK_THROWS_AS(ag::dropout(logits, -0.1, rng), ValueError);
  CHECK(rng.state().position == 0);  // a rejected p does not advance the RNG
  const Tensor x = Tensor::zeros({3, 4});
  CHECK_THROWS_AS(ops::layernorm(x, Tensor::ones({5}), Tensor(), 1e-5), ShapeError);
  CHECK_THROWS_AS(ops::layernorm(x, Tensor::ones({4}), Tensor::ones({3}), 1e-5), ShapeError);
  CHECK_THROWS_AS(ops::layernorm(x, Tensor::ones({4}, DType::f64), Tensor(), 1e-5), DTypeError);
  CHECK_THROWS_AS(ops::softmax(Tensor::zeros({5, 3}), true), ShapeError);  // Tk < Tq
  CHECK_THROWS_AS(ops::softmax(Tensor::zeros({4}), true), ShapeError);
  CHECK_THROWS_AS(ops::softmax(ints({0, 1}, {2}), false), DTypeError);
  CHECK_THROWS_AS(ops::gelu(ints({0}, {1})), DTypeError);
}
