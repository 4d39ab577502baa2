// Tensor views, copies, broadcasting and the errors bad shapes raise.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "core/ops.h"
#include "core/parallel.h"
#include "core/tensor.h"

using namespace alpha;

static std::vector<float> iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST_CASE("views share storage and index correctly") {
  Tensor t = Tensor::from_vector(iota(24), {2, 3, 4});
  CHECK(t.is_contiguous());
  Tensor tr = t.transpose(1, 2);  // (2,4,3)
  CHECK(!tr.is_contiguous());
  CHECK(tr.storage() == t.storage());
  auto c = tr.contiguous().to_f32_vector();
  // element [0][1][2] of the transpose is t[0][2][1] = 2*4+1 = 9
  CHECK(c[0 * 12 + 1 * 3 + 2] == 9.0f);
  Tensor n = t.narrow(2, 1, 2);  // (2,3,2)
  CHECK(n.to_f32_vector() == std::vector<float>{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22});
  Tensor e = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3, 1}).expand({2, 3, 4});
  CHECK(e.strides()[0] == 0);
  CHECK(e.strides()[2] == 0);
  CHECK(e.to_f32_vector()[5] == 2.0f);
  Tensor p = t.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.contiguous().to_f32_vector()[1] == 4.0f);
  CHECK(t.view({6, -1}).shape() == Shape{6, 4});
  CHECK(tr.reshape({24}).to_f32_vector()[1] == 4.0f);
  CHECK(tr.contiguous().storage() != t.storage());
  CHECK(t.contiguous().storage() == t.storage());
}

TEST_CASE("dtype conversion round-trips") {
  Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.25f, 65504.f, 1e-8f}, {4});
  auto back = t.to(DType::f16).to(DType::f32).to_f32_vector();
  CHECK(back[0] == 1.5f);
  CHECK(back[1] == -2.25f);
  CHECK(back[2] == 65504.f);
  CHECK(back[3] == 0.0f);  // below half's smallest subnormal
  CHECK(f16_to_f32(f32_to_f16(5.9604645e-8f)) == 5.9604645e-8f);  // smallest subnormal survives
  Tensor i = Tensor::from_vector(std::vector<int32_t>{3, -1}, {2}).to(DType::f64);
  CHECK(i.to_f64_vector() == std::vector<double>{3.0, -1.0});
}

TEST_CASE("broadcasting follows NumPy rules") {
  CHECK(broadcast_shapes({4, 1, 3}, {5, 1}, "t") == Shape{4, 5, 3});
  CHECK_THROWS_AS(broadcast_shapes({4, 3}, {2, 3}, "add"), ShapeError);
  Tensor a = Tensor::from_vector(iota(6), {2, 3});
  Tensor b = Tensor::from_vector(std::vector<float>{10, 20, 30}, {3});
  CHECK(ops::add(a, b).to_f32_vector() == std::vector<float>{10, 21, 32, 13, 24, 35});
  Tensor col = Tensor::from_vector(std::vector<float>{1, 2}, {2, 1});
  CHECK(ops::mul(a, col).to_f32_vector() == std::vector<float>{0, 1, 2, 6, 8, 10});
  CHECK(ops::sum_to(ops::add(a, b), {3}).to_f32_vector() == std::vector<float>{23, 45, 67});
}

TEST_CASE("bad shapes and dtypes raise named errors") {
  Tensor a = Tensor::zeros({4, 8}), b = Tensor::zeros({9, 3});
  try {
    ops::matmul(a, b);
    FAIL("matmul accepted mismatched shapes");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) == "[matmul] inner dimensions differ: [4,8] x [9,3]");
  }
  CHECK_THROWS_AS(ops::add(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), ShapeError);
  CHECK_THROWS_AS(ops::add(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), DTypeError);
  CHECK_THROWS_AS(ops::add(Tensor::zeros({2}, DType::i32), Tensor::zeros({2}, DType::i32)), DTypeError);
  CHECK_THROWS_AS(a.view({5, -1}), ShapeError);
  CHECK_THROWS_AS(a.narrow(1, 6, 3), IndexError);
  CHECK_THROWS_AS(a.transpose(0, 2), IndexError);
  CHECK_THROWS_AS(a.data<double>(), DTypeError);
  CHECK_THROWS_AS(a.transpose(0, 1).view({32}), ShapeError);
  CHECK_THROWS_AS(Tensor::zeros({int64_t{1} << 40, int64_t{1} << 40}), ShapeError);
}

TEST_CASE("matmul handles transposes, batches and strided views") {
  // Reference: naive triple loop in double.
  auto naive = [](const Tensor& a, const Tensor& b) {  // (M,K) x (K,N)
    auto av = a.to_f64_vector(), bv = b.to_f64_vector();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    std::vector<double> c(M * N, 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j) c[i * N + j] += av[i * K + k] * bv[k * N + j];
    return c;
  };
  std::vector<float> va(17 * 5), vb(5 * 3);
  for (size_t i = 0; i < va.size(); ++i) va[i] = std::sin(0.37f * i);
  for (size_t i = 0; i < vb.size(); ++i) vb[i] = std::cos(0.21f * i);
  Tensor A = Tensor::from_vector(va, {17, 5}), B = Tensor::from_vector(vb, {5, 3});
  auto ref = naive(A, B);
  auto close = [&](const Tensor& c) {
    auto v = c.to_f64_vector();
    REQUIRE(v.size() == ref.size());
    double err = 0;
    for (size_t i = 0; i < v.size(); ++i) err = std::max(err, std::abs(v[i] - ref[i]));
    return err < 1e-5;
  };
  CHECK(close(ops::matmul(A, B)));
  CHECK(close(ops::matmul(A.transpose(0, 1).contiguous(), B, true, false)));
  CHECK(close(ops::matmul(A, B.transpose(0, 1).contiguous(), false, true)));
  CHECK(close(ops::matmul(A.transpose(0, 1).contiguous().transpose(0, 1), B)));  // strided view of A
  // batch of 2 identical copies via expand, and a 3-D x 2-D fold
  Tensor A3 = A.unsqueeze(0).expand({2, 17, 5});
  auto c3 = ops::matmul(A3, B).to_f64_vector();
  auto c3c = ops::matmul(A3.contiguous(), B).to_f64_vector();
  CHECK(c3 == c3c);
  CHECK(std::vector<double>(c3.begin() + 51, c3.end()) == std::vector<double>(c3.begin(), c3.begin() + 51));
}

// Largest |C - double-loop C| over the four transpose layouts of an (M, K) x (K, N) product on `threads` threads.
static double gemm_layout_error(int64_t M, int64_t K, int64_t N, int threads) {
  std::vector<float> va(M * K), vb(K * N);
  for (size_t i = 0; i < va.size(); ++i) va[i] = std::sin(0.011f * i);
  for (size_t i = 0; i < vb.size(); ++i) vb[i] = std::cos(0.017f * i);
  std::vector<double> ref(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j) ref[i * N + j] += double(va[i * K + k]) * double(vb[k * N + j]);
  const Tensor A = Tensor::from_vector(va, {M, K}), B = Tensor::from_vector(vb, {K, N});
  const Tensor At = A.transpose(0, 1).contiguous(), Bt = B.transpose(0, 1).contiguous();
  const int prev = num_threads();
  set_num_threads(threads);
  double err = 0;
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    const auto c = ops::matmul(ta ? At : A, tb ? Bt : B, ta, tb).to_f64_vector();
    REQUIRE(c.size() == ref.size());
    for (size_t i = 0; i < c.size(); ++i) err = std::max(err, std::abs(c[i] - ref[i]));
  }
  set_num_threads(prev);
  return err;
}

TEST_CASE("GEMMs split over threads (2-D tiles) match a double loop at every thread count") {
  // Odd sizes so tiles have ragged edges; 1 thread = one OpenBLAS call, 3/4/7/16 = row, column and 2-D splits.
  for (int th : {1, 3, 4, 7, 16}) {
    INFO("threads ", th);
    CHECK(gemm_layout_error(67, 45, 131, th) < 1e-4);  // 395K multiply-adds: up to 6 tasks of >= 64K
  }
}

TEST_CASE("strided element-wise, copies, add_ and column sums split over threads equal the one-thread loops") {
  // (6, 70, 130): 420 rows of 130, > 32K elements, so rows and column blocks split; checked against plain loops.
  const int64_t A = 6, R = 70, C = 130;
  std::vector<float> vx(A * R * C), vb(C);
  for (size_t i = 0; i < vx.size(); ++i) vx[i] = std::sin(0.013f * i) * 3.0f;
  for (size_t i = 0; i < vb.size(); ++i) vb[i] = std::cos(0.7f * i);
  const Tensor x = Tensor::from_vector(vx, {A, R, C}), bias = Tensor::from_vector(vb, {C});
  auto run = [&] {
    std::vector<std::vector<float>> r;
    r.push_back(ops::add(x, bias).to_f32_vector());                            // broadcast rows
    r.push_back(ops::exp(x.transpose(1, 2)).to_f32_vector());                  // strided unary
    r.push_back(ops::contiguous(x.transpose(0, 2)).to_f32_vector());           // strided copy
    r.push_back(ops::sum_to(x, {C}).to_f32_vector());                          // bias gradient: (A*R) rows
    r.push_back(ops::sum(x, 1, false).to_f32_vector());                        // outer 6, column blocks
    Tensor d = x.clone();
    ops::add_(d, bias, 0.5);
    r.push_back(d.to_f32_vector());
    return r;
  };
  const int prev = num_threads();
  set_num_threads(1);
  const auto one = run();
  set_num_threads(5);
  const auto five = run();
  set_num_threads(prev);
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output ", i);
    CHECK(one[i] == five[i]);
  }
  // Against plain loops: the broadcast add, the transposed copy, the column sums (in double, as the kernel).
  for (int64_t a = 0; a < A; ++a)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const float v = vx[(a * R + i) * C + c];
        REQUIRE(five[0][(a * R + i) * C + c] == v + vb[c]);
        REQUIRE(five[2][(c * R + i) * A + a] == v);
        REQUIRE(five[5][(a * R + i) * C + c] == v + 0.5f * vb[c]);
      }
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t k = 0; k < A * R; ++k) s += vx[k * C + c];
    CHECK(five[3][c] == static_cast<float>(s));
    for (int64_t a = 0; a < A; ++a) {
      double t = 0;
      for (int64_t i = 0; i < R; ++i) t += vx[(a * R + i) * C + c];
      CHECK(five[4][a * C + c] == static_cast<float>(t));
    }
  }
}

TEST_CASE("a GEMM past 2^24 multiply-adds matches a double loop in all layouts (4 threads: 2 x 2 tiles)") {
  CHECK(gemm_layout_error(300, 260, 221, 4) < 1e-3);  // 17.2M multiply-adds
}

TEST_CASE("cast_cached: a weight's f16 copy is reused until the weight is written; views and other casts are fresh") {
  Tensor w = Tensor::from_vector(std::vector<float>{1.0f, 2.5f, -3.0f, 1e-3f, 65504.0f, 7.0f}, {2, 3});
  const uint64_t v0 = w.storage()->version();
  const Tensor h1 = ops::cast_cached(w, DType::f16);
  CHECK(h1.dtype() == DType::f16);
  CHECK(h1.shape() == w.shape());
  CHECK(h1.to_f64_vector() == w.to(DType::f16).to_f64_vector());
  CHECK(w.storage()->version() == v0);  // reading and casting write nothing
  const Tensor h2 = ops::cast_cached(w, DType::f16);
  CHECK(h2.storage() == h1.storage());  // reused
  CHECK_FALSE(h2.same(h1));             // a new handle (autograd may mark it), the same bytes
  // A write bumps the version: the next cached cast is a fresh one with the new value.
  w.mutable_data<float>()[1] = 4.0f;
  CHECK(w.storage()->version() > v0);
  const Tensor h3 = ops::cast_cached(w, DType::f16);
  CHECK(h3.storage() != h1.storage());
  CHECK(h3.to_f64_vector()[1] == 4.0);
  // A view of part of the storage and an f16 -> f32 cast are plain casts, never cached.
  const Tensor row = w.narrow(0, 1, 1);
  CHECK(ops::cast_cached(row, DType::f16).storage() != ops::cast_cached(row, DType::f16).storage());
  const Tensor back = ops::cast_cached(h3, DType::f32);
  CHECK(back.dtype() == DType::f32);
  CHECK(back.to_f64_vector() == h3.to_f64_vector());
  CHECK_THROWS_AS(Tensor::over(h3.storage(), {7}, DType::f16), ShapeError);  // 7 halves do not cover 12 bytes
}
