// The Llama-style ops (core/ops.h: rmsnorm, rope, swiglu, relu2; autograd repeat_kv): f64 finite-difference
// gradient checks, forward values against formulas written here independently of the kernels, and the errors
// bad inputs raise. Legend: B batch, T time, H heads, D head size, C channels.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/ops.h"
#include "gradcheck.h"

using namespace alpha;
using namespace alpha::test;

TEST_CASE("gradcheck: rmsnorm with and without weight, odd widths") {
  const Fn with_w = [](const Inputs& in) { return ag::rmsnorm(in[0], in[1], 1e-5); };
  const Fn no_w = [](const Inputs& in) { return ag::rmsnorm(in[0], Tensor(), 1e-5); };
  gradcheck("rmsnorm (3,7) w", with_w, {randn({3, 7}, 1), randn({7}, 2)});
  gradcheck("rmsnorm (2,3,33) w", with_w, {randn({2, 3, 33}, 3), randn({33}, 4)});
  gradcheck("rmsnorm (5,1) w", with_w, {randn({5, 1}, 5), randn({1}, 6)});
  gradcheck("rmsnorm (4,9) no w", no_w, {randn({4, 9}, 7)});
  gradcheck("rmsnorm transposed x", with_w, {randn({6, 4}, 8).transpose(0, 1), randn({6}, 9)});
}

TEST_CASE("rmsnorm forward matches x / sqrt(mean(x^2) + eps) * w") {
  const Tensor x = randn({3, 5}, 10), w = randn({5}, 11);
  const auto r = ops::rmsnorm(x, w, 1e-5);
  const auto xv = x.to_f64_vector(), wv = w.to_f64_vector(), yv = r.y.to_f64_vector(), rv = r.rstd.to_f64_vector();
  for (int n = 0; n < 3; ++n) {
    double ss = 0;
    for (int c = 0; c < 5; ++c) ss += xv[n * 5 + c] * xv[n * 5 + c];
    const double rs = 1 / std::sqrt(ss / 5 + 1e-5);
    CHECK(rv[n] == doctest::Approx(rs).epsilon(1e-14));
    for (int c = 0; c < 5; ++c) CHECK(yv[n * 5 + c] == doctest::Approx(xv[n * 5 + c] * rs * wv[c]).epsilon(1e-14));
  }
}

TEST_CASE("gradcheck: rope at several start positions and odd shapes") {
  const auto [c64, s64] = ops::rope_tables(20, 6, 10000.0, DType::f64);
  for (int64_t pos0 : {0, 3, 11}) {
    const Fn f = [&, pos0](const Inputs& in) { return ag::rope(in[0], c64, s64, pos0); };
    gradcheck("rope (2,5,3,6) pos0 " + std::to_string(pos0), f, {randn({2, 5, 3, 6}, 20 + pos0)});
  }
  const auto [c2, s2] = ops::rope_tables(7, 2, 500.0, DType::f64);
  gradcheck("rope D=2", [&](const Inputs& in) { return ag::rope(in[0], c2, s2, 1); }, {randn({1, 6, 1, 2}, 30)});
  // A strided input: the heads of a transposed (B, H, T, D) tensor seen as (B, T, H, D).
  gradcheck("rope strided", [&](const Inputs& in) { return ag::rope(in[0], c64, s64, 2); },
            {randn({2, 3, 4, 6}, 31).transpose(1, 2)});
}

TEST_CASE("rope forward: the rotate-half rotation by position * base^(-2i/D); inverse undoes it") {
  const int64_t T = 4, H = 2, D = 8, pos0 = 5;
  const double base = 10000.0;
  const auto [c, s] = ops::rope_tables(16, D, base, DType::f64);
  const Tensor x = randn({1, T, H, D}, 40);
  const Tensor y = ops::rope(x, c, s, pos0);
  const auto xv = x.to_f64_vector(), yv = y.to_f64_vector();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double th = static_cast<double>(pos0 + t) * std::pow(base, -2.0 * static_cast<double>(i) / D);
        const int64_t o = (t * H + h) * D;
        CHECK(yv[o + i] == doctest::Approx(xv[o + i] * std::cos(th) - xv[o + i + D / 2] * std::sin(th)).epsilon(1e-12));
        CHECK(yv[o + i + D / 2] == doctest::Approx(xv[o + i + D / 2] * std::cos(th) + xv[o + i] * std::sin(th)).epsilon(1e-12));
      }
  const auto back = ops::rope(y, c, s, pos0, /*inverse=*/true).to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(back[i] == doctest::Approx(xv[i]).epsilon(1e-12));
  // f32 tables on f32 x: same rotation to f32 rounding.
  const auto [cf, sf] = ops::rope_tables(16, D, base);
  const auto yf = ops::rope(x.to(DType::f32), cf, sf, pos0).to_f64_vector();
  for (size_t i = 0; i < yv.size(); ++i) CHECK(yf[i] == doctest::Approx(yv[i]).epsilon(1e-5).scale(1));
}

TEST_CASE("gradcheck: swiglu, relu2 and repeat_kv") {
  const Fn sw = [](const Inputs& in) { return ag::swiglu(in[0], in[1]); };
  gradcheck("swiglu (3,17)", sw, {randn({3, 17}, 50, 2.0), randn({3, 17}, 51)});
  gradcheck("swiglu (1,1)", sw, {randn({1, 1}, 52), randn({1, 1}, 53)});
  // relu2 is not differentiable at 0: inputs kept away from it.
  Tensor x = randn({5, 13}, 54);
  std::vector<double> xv = x.to_f64_vector();
  for (double& v : xv) v += v >= 0 ? 0.1 : -0.1;
  gradcheck("relu2 (5,13)", [](const Inputs& in) { return ag::relu2(in[0]); }, {Tensor::from_vector(xv, {5, 13})});
  gradcheck("repeat_kv x3", [](const Inputs& in) { return ag::repeat_kv(in[0], 3); }, {randn({2, 3, 2, 4}, 55)});
  // Forward values.
  const Tensor g = randn({7}, 56), u = randn({7}, 57);
  const auto y = ops::swiglu(g, u).to_f64_vector(), gv = g.to_f64_vector(), uv = u.to_f64_vector();
  for (size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(gv[i] / (1 + std::exp(-gv[i])) * uv[i]).epsilon(1e-14));
  const auto r = ops::relu2(g).to_f64_vector();
  for (size_t i = 0; i < r.size(); ++i) CHECK(r[i] == (gv[i] > 0 ? gv[i] * gv[i] : 0.0));
  const auto k = ag::repeat_kv(randn({1, 1, 2, 3}, 58), 2).to_f64_vector(), k0 = randn({1, 1, 2, 3}, 58).to_f64_vector();
  for (int h = 0; h < 4; ++h)
    for (int d = 0; d < 3; ++d) CHECK(k[h * 3 + d] == k0[(h / 2) * 3 + d]);  // query head h reads kv head h / 2
}

TEST_CASE("gradcheck: rope on a fused qkv (rot_heads) and swiglu_packed; forwards equal the unfused ops") {
  const auto [c64, s64] = ops::rope_tables(20, 6, 10000.0, DType::f64);
  // (B, T, H + 2Hkv, D) with H = 2, Hkv = 1: heads 0..2 rotate, head 3 (v) passes through.
  gradcheck("rope rot_heads 3 of 4", [&](const Inputs& in) { return ag::rope(in[0], c64, s64, 2, 3); },
            {randn({2, 5, 4, 6}, 70)});
  const Tensor x = randn({2, 5, 4, 6}, 71);
  const Tensor r = ops::rope(x, c64, s64, 2, false, 3);
  const Tensor qk = ops::rope(x.narrow(2, 0, 3), c64, s64, 2);
  CHECK(r.narrow(2, 0, 3).contiguous().to_f64_vector() == qk.to_f64_vector());
  CHECK(r.narrow(2, 3, 1).contiguous().to_f64_vector() == x.narrow(2, 3, 1).contiguous().to_f64_vector());
  const auto back = ops::rope(r, c64, s64, 2, true, 3).to_f64_vector(), xv = x.to_f64_vector();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(back[i] == doctest::Approx(xv[i]).epsilon(1e-12));
  CHECK_THROWS_AS(ops::rope(x, c64, s64, 0, false, 5), ShapeError);

  const Fn packed = [](const Inputs& in) { return ag::swiglu_packed(in[0]); };
  gradcheck("swiglu_packed (3,2,10)", packed, {randn({3, 2, 10}, 72, 2.0)});
  gradcheck("swiglu_packed (1,2)", packed, {randn({1, 2}, 73)});
  const Tensor gu = randn({4, 14}, 74, 2.0), dy = randn({4, 7}, 75);
  const Tensor gate = gu.narrow(1, 0, 7), up = gu.narrow(1, 7, 7);
  CHECK(ops::swiglu_packed(gu).to_f64_vector() == ops::swiglu(gate, up).to_f64_vector());
  const auto d = ops::swiglu_backward(dy, gate, up);
  const Tensor dgu = ops::swiglu_packed_backward(dy, gu);
  CHECK(dgu.shape() == gu.shape());
  CHECK(dgu.narrow(1, 0, 7).contiguous().to_f64_vector() == d.dgate.to_f64_vector());
  CHECK(dgu.narrow(1, 7, 7).contiguous().to_f64_vector() == d.dup.to_f64_vector());
  CHECK_THROWS_AS(ops::swiglu_packed(Tensor::zeros({2, 3})), ShapeError);
  CHECK_THROWS_AS(ops::swiglu_packed_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 4})), ShapeError);
}

TEST_CASE("swiglu saturates without NaN; f16 inputs give f16 outputs") {
  const Tensor g = Tensor::from_vector(std::vector<float>{-1000.f, 1000.f, 0.f}, {3});
  const auto y = ops::swiglu(g, Tensor::ones({3})).to_f32_vector();
  CHECK(y[0] == 0.0f);
  CHECK(y[1] == 1000.0f);
  const auto d = ops::swiglu_backward(Tensor::ones({3}), g, Tensor::ones({3}));
  for (float v : d.dgate.to_f32_vector()) CHECK(std::isfinite(v));
  const Tensor h = g.to(DType::f16);
  CHECK(ops::swiglu(h, h).dtype() == DType::f16);
  CHECK(ops::rmsnorm(h, Tensor(), 1e-5).y.dtype() == DType::f16);
  CHECK(ops::rmsnorm(h, Tensor(), 1e-5).rstd.dtype() == DType::f32);
}

TEST_CASE("llama ops refuse bad inputs with clear errors") {
  const auto [c, s] = ops::rope_tables(8, 4, 10000.0);
  CHECK_THROWS_WITH_AS(ops::rope(Tensor::zeros({1, 2, 1, 5}), c, s, 0), doctest::Contains("must be even"), ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope(Tensor::zeros({1, 4, 1, 4}), c, s, 5), doctest::Contains("exceed"), ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope(Tensor::zeros({4, 4}), c, s, 0), doctest::Contains("(B, T, H, D)"), ShapeError);
  CHECK_THROWS_AS(ops::rope_tables(8, 3, 10000.0), ShapeError);
  CHECK_THROWS_AS(ops::rope_tables(8, 4, 1.0), ValueError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm(Tensor::zeros({2, 3}), Tensor::zeros({4}), 1e-5), doctest::Contains("[rmsnorm]"),
                       ShapeError);
  CHECK_THROWS_AS(ops::rmsnorm(Tensor::zeros({2, 3}), Tensor(), 0.0), ValueError);
  CHECK_THROWS_AS(ops::swiglu(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), ShapeError);
  CHECK_THROWS_AS(ops::rmsnorm_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 3}), Tensor(), Tensor::zeros({3})),
                  ShapeError);
}
