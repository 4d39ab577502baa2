// GPU kernels against the CPU: element-wise, sum and matmul against the CPU kernels (core/cpu); the ops
// whose CPU kernels are still stubs in this tree (softmax, layernorm, gelu, cross-entropy, embedding,
// dropout) against the small reference loops below, which follow core/ops.h's contracts.
// Awkward sizes (1, 3, 17, 65, not multiples of tiles or vec4). Tolerances: 1e-6 abs for exact-ish maps,
// 1e-5 rel for reductions and transcendental functions (GPU exp/log/tanh differ from libm by a few ulp).
//
// Dimension legend: N rows, C channels, V vocabulary, M/K/N matmul, Tq/Tk query/key time.
#include <cmath>
#include <utility>

#include "core/cpu/elementwise.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
const std::vector<Shape> kShapes = {{1}, {3}, {17}, {65}, {4, 16}, {3, 17, 5}};
// Per-kernel dispatch counts (Runtime::kernel_counts), set before the shared backend is built on first use.
const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;
}

TEST_CASE("vk binary same shape matches the CPU (add sub mul div, scalar and vec4 paths)") {
  GpuScope g;
  for (const auto& s : kShapes) {
    const Tensor a = randn(s, 1), b = randu(s, 2, 0.5f, 2.0f);
    using Fn = Tensor (*)(const Tensor&, const Tensor&);
    const Fn fns[] = {ops::add, ops::sub, ops::mul, ops::div};
    for (Fn f : fns) expect_close(on_gpu([&] { return f(a, b); }), on_cpu([&] { return f(a, b); }), 1e-6, 1e-7, shape_str(s));
  }
  expect_clean();
}

TEST_CASE("vk binary broadcasts a trailing vector or scalar; other broadcasts fall back to the CPU") {
  GpuScope g;
  const Tensor x = randn({17, 5}, 3), v = randn({5}, 4), v1 = randn({1, 5}, 5), s = randn({1}, 6);
  expect_close(on_gpu([&] { return ops::add(x, v); }), on_cpu([&] { return ops::add(x, v); }), 0, 1e-7, "x+v");
  expect_close(on_gpu([&] { return ops::sub(v, x); }), on_cpu([&] { return ops::sub(v, x); }), 0, 1e-7, "v-x");
  expect_close(on_gpu([&] { return ops::mul(x, v1); }), on_cpu([&] { return ops::mul(x, v1); }), 0, 1e-7, "x*v1");
  expect_close(on_gpu([&] { return ops::div(x, s); }), on_cpu([&] { return ops::div(x, s); }), 1e-6, 0, "x/s");
  const Tensor col = randn({17, 1}, 7);  // a column broadcast: not a trailing vector -> declined
  expect_close(on_gpu([&] { return ops::add(x, col); }, 0), on_cpu([&] { return ops::add(x, col); }), 0, 0, "x+col");
  expect_clean();
}

TEST_CASE("vk unary ops and affine match the CPU") {
  GpuScope g;
  for (const auto& s : kShapes) {
    const Tensor x = randn(s, 8), pos = randu(s, 9, 0.1f, 4.0f);
    expect_close(on_gpu([&] { return ops::neg(x); }), on_cpu([&] { return ops::neg(x); }), 0, 0, "neg");
    expect_close(on_gpu([&] { return ops::exp(x); }), on_cpu([&] { return ops::exp(x); }), 1e-5, 0, "exp");
    expect_close(on_gpu([&] { return ops::log(pos); }), on_cpu([&] { return ops::log(pos); }), 1e-5, 1e-6, "log");
    expect_close(on_gpu([&] { return ops::sqrt(pos); }), on_cpu([&] { return ops::sqrt(pos); }), 1e-6, 0, "sqrt");
    expect_close(on_gpu([&] { return ops::scale(x, 0.37); }), on_cpu([&] { return ops::scale(x, 0.37); }), 1e-6, 0, "scale");
    expect_close(on_gpu([&] { return ops::add_scalar(x, -1.5); }), on_cpu([&] { return ops::add_scalar(x, -1.5); }), 0,
                 1e-6, "add_scalar");
  }
  expect_clean();
}

TEST_CASE("vk sum over the last dim and over a leading dim matches the CPU") {
  GpuScope g;
  for (const Shape& s : {Shape{1}, Shape{3, 17}, Shape{65, 3}, Shape{2, 300}, Shape{3, 5, 7}}) {
    const Tensor x = randn(s, 10);
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      for (bool keep : {false, true})
        expect_close(on_gpu([&] { return ops::sum(x, d, keep); }), on_cpu([&] { return ops::sum(x, d, keep); }), 1e-5,
                     1e-5, shape_str(s) + " dim " + std::to_string(d));
  }
  expect_clean();
}

TEST_CASE("vk column sums in fours (inner % 4 == 0) give the scalar kernel's bits, f32 and f16 input") {
  REQUIRE(kKernelCounts);
  GpuScope g;
  // (outer, n, w) sums in fours; the same data with a (w+1)th column runs the scalar kernel with the same row chunks:
  // the first w sums must be bitwise equal, and both match the CPU. Long columns run the workgroup kernel (16 row
  // lanes, then passes over the chunk partials), short ones over many columns (split-K partials) one per invocation.
  struct Case {
    Shape s;
    const char* kernel;
  };
  // "_last": several row chunks, summed by each column block's last workgroup (in order for <= 4 chunks, else in
  // 16 strided lanes and a tree); 40 rows are one chunk.
  for (const DType dt : {DType::f32, DType::f16})
    for (const Case& c : {Case{{5000, 8}, "sum_cols4_wg|_last"}, Case{{2, 300, 12}, "sum_cols4_wg|_last"},
                          Case{{200, 8}, "sum_cols4_wg|_last"}, Case{{40, 8}, "sum_cols4_wg|"},
                          Case{{7, 1 << 17}, "sum_cols4|"}}) {
      const Shape& s = c.s;
      const int64_t d = static_cast<int64_t>(s.size()) - 2, w = s.back();
      Shape s9 = s;
      s9.back() = w + 1;
      const Tensor x9 = randn(s9, 21).to(dt);
      const Tensor x = ops::cat({x9.narrow(d + 1, 0, w)}, d + 1);  // the first w columns, contiguous
      const std::string name = c.kernel, base = name.substr(0, name.find('|')), tail = name.substr(name.find('|') + 1);
      const std::string k = base + (dt == DType::f16 ? "_f16in" : "_f32") + tail;
      const int64_t before = kernel_runs(k);
      const Tensor g4 = on_gpu([&] { return ops::sum(x, d); }).to(DType::f32);
      gpu().sync();
      CHECK_MESSAGE(kernel_runs(k) > before, k);
      const Tensor g1 = on_gpu([&] { return ops::sum(x9, d); }).to(DType::f32).narrow(-1, 0, w).contiguous();
      CHECK(g4.to_f64_vector() == g1.to_f64_vector());
      expect_close(g4, on_cpu([&] { return ops::sum(x, d); }).to(DType::f32), dt == DType::f16 ? 1e-3 : 1e-5,
                   dt == DType::f16 ? 2e-3 : 1e-5, shape_str(s) + " " + dtype_name(dt));
    }
  expect_clean();
}

TEST_CASE("vk column sums finished by their last workgroup: the same bits on every repeat, past the counter ring") {
  REQUIRE(kKernelCounts);
  GpuScope g;
  // 8192 columns in fours: 128 counters per sum, so 40 sums wrap the backend's ring of arrival counters; a counter
  // left non-zero would leave no workgroup last and the output unwritten.
  const Tensor x = randn({300, 8192}, 5);
  const std::vector<double> want = on_gpu([&] { return ops::sum(x, 0); }).to_f64_vector();
  expect_close(Tensor::from_vector(want, {8192}).to(DType::f32), on_cpu([&] { return ops::sum(x, 0); }), 1e-5, 1e-5,
               "sum (300, 8192)");
  for (int i = 0; i < 40; ++i) {
    const Tensor y = on_gpu([&] { return ops::sum(x, 0); });
    REQUIRE(y.to_f64_vector() == want);
  }
  // Wider than the ring (here shrunk to 64 counters): the chunk partials and a second pass, to the same bits.
  const int64_t last = kernel_runs("sum_cols4_wg_f32_last");
  gpu().set_counter_ring(64);
  const Tensor two_pass = on_gpu([&] { return ops::sum(x, 0); });
  gpu().set_counter_ring(vk::VulkanBackend::kCounters);
  gpu().sync();
  CHECK(kernel_runs("sum_cols4_wg_f32_last") == last);
  CHECK(two_pass.to_f64_vector() == want);
  expect_clean();
}

TEST_CASE("vk matmul matches the CPU: awkward sizes, all transposes, batched and broadcast weight") {
  GpuScope g;
  struct Case {
    int64_t M, K, N;
  };
  for (const Case c : {Case{1, 1, 1}, Case{3, 17, 5}, Case{17, 65, 33}, Case{33, 3, 1}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = randn(ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, 11);
        const Tensor b = randn(tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, 12);
        expect_close(on_gpu([&] { return ops::matmul(a, b, ta, tb); }), on_cpu([&] { return ops::matmul(a, b, ta, tb); }),
                     1e-5, 1e-5, fmt::format("{}x{}x{} ta={} tb={}", c.M, c.K, c.N, ta, tb));
      }
  }
  const Tensor a = randn({2, 3, 17, 5}, 13), w = randn({5, 7}, 14), b = randn({2, 3, 5, 7}, 15);
  expect_close(on_gpu([&] { return ops::matmul(a, w); }), on_cpu([&] { return ops::matmul(a, w); }), 1e-5, 1e-5, "w");
  expect_close(on_gpu([&] { return ops::matmul(a, b); }), on_cpu([&] { return ops::matmul(a, b); }), 1e-5, 1e-5, "ab");
  const Tensor q = randn({3, 17, 5}, 16), k = randn({3, 19, 5}, 17);  // attention scores q k^T
  expect_close(on_gpu([&] { return ops::matmul(q, k, false, true); }),
               on_cpu([&] { return ops::matmul(q, k, false, true); }), 1e-5, 1e-5, "qk^T");
  expect_clean();
}

namespace {
// Reference softmax over the last dim with the causal rule of core/ops.h.
std::vector<double> ref_softmax(const Tensor& x, bool causal) {
  const auto v = x.to_f64_vector();
  const int64_t cols = x.size(-1), rows = x.numel() / cols, tq = causal ? x.size(-2) : 1;
  std::vector<double> y(v.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t vis = causal ? r % tq + (cols - tq) + 1 : cols;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < vis; ++j) m = std::max(m, v[r * cols + j]);
    for (int64_t j = 0; j < vis; ++j) s += std::exp(v[r * cols + j] - m);
    for (int64_t j = 0; j < vis; ++j) y[r * cols + j] = std::exp(v[r * cols + j] - m) / s;
  }
  return y;
}
}  // namespace

TEST_CASE("vk softmax (plain and causal) and its backward match the reference") {
  GpuScope g;
  for (const Shape& s : {Shape{1, 1}, Shape{3, 17}, Shape{2, 5, 5}, Shape{2, 3, 7}, Shape{4, 65}, Shape{1, 3, 300}}) {
    const Tensor x = randn(s, 20, 3.0);
    for (bool causal : {false, true}) {
      const Tensor y = on_gpu([&] { return ops::softmax(x, causal); });
      expect_close(y, ref_softmax(x, causal), s, 1e-5, 1e-7, shape_str(s) + (causal ? " causal" : ""));
    }
    const Tensor y = Tensor::from_vector(ref_softmax(x, false), s).to(DType::f32), dy = randn(s, 21);
    const auto yv = y.to_f64_vector(), dv = dy.to_f64_vector();
    const int64_t cols = s.back();
    std::vector<double> want(yv.size());
    for (size_t r = 0; r < yv.size() / cols; ++r) {
      double dot = 0;
      for (int64_t j = 0; j < cols; ++j) dot += dv[r * cols + j] * yv[r * cols + j];
      for (int64_t j = 0; j < cols; ++j) want[r * cols + j] = yv[r * cols + j] * (dv[r * cols + j] - dot);
    }
    expect_close(on_gpu([&] { return ops::softmax_backward(dy, y); }), want, s, 1e-4, 1e-6, "softmax_backward");
  }
  expect_clean();
}

TEST_CASE("vk layernorm forward and backward match the reference (with and without affine params)") {
  GpuScope g;
  // C % 4 == 0 up to 1024: rows held in registers as quads (300, 1024); 1028: the scalar 128-wide kernels.
  for (const Shape& s : {Shape{1, 1}, Shape{3, 17}, Shape{2, 3, 65}, Shape{5, 300}, Shape{3, 1024}, Shape{2, 1028}}) {
    const int64_t C = s.back(), N = shape_numel(s) / C;
    const Tensor x = randn(s, 30, 2.0), dy = randn(s, 31);
    for (bool affine : {true, false}) {
      const Tensor w = affine ? randn({C}, 32) : Tensor(), b = affine ? randn({C}, 33) : Tensor();
      const auto out = on_gpu([&] { return ops::layernorm(x, w, b, 1e-5); });
      const auto xv = x.to_f64_vector(), dyv = dy.to_f64_vector();
      const auto wv = affine ? w.to_f64_vector() : std::vector<double>(C, 1.0);
      const auto bv = affine ? b.to_f64_vector() : std::vector<double>(C, 0.0);
      std::vector<double> y(xv.size()), mean(N), rstd(N), dx(xv.size()), dw(C, 0.0), db(C, 0.0);
      for (int64_t r = 0; r < N; ++r) {
        double m = 0, var = 0;
        for (int64_t j = 0; j < C; ++j) m += xv[r * C + j];
        m /= C;
        for (int64_t j = 0; j < C; ++j) var += (xv[r * C + j] - m) * (xv[r * C + j] - m);
        const double rs = 1.0 / std::sqrt(var / C + 1e-5);
        mean[r] = m, rstd[r] = rs;
        double mg = 0, mgx = 0;
        for (int64_t j = 0; j < C; ++j) {
          const double xh = (xv[r * C + j] - m) * rs, gj = dyv[r * C + j] * wv[j];
          y[r * C + j] = xh * wv[j] + bv[j];
          mg += gj / C, mgx += gj * xh / C;
          dw[j] += dyv[r * C + j] * xh, db[j] += dyv[r * C + j];
        }
        for (int64_t j = 0; j < C; ++j) {
          const double xh = (xv[r * C + j] - m) * rs;
          dx[r * C + j] = rs * (dyv[r * C + j] * wv[j] - mg - xh * mgx);
        }
      }
      const Shape rows(s.begin(), s.end() - 1);
      const std::string what = shape_str(s) + (affine ? " affine" : " plain");
      expect_close(out.y, y, s, 1e-4, 1e-5, what + " y");
      expect_close(out.mean, mean, rows, 1e-5, 1e-6, what + " mean");
      expect_close(out.rstd, rstd, rows, 1e-4, 1e-6, what + " rstd");
      const auto gr = on_gpu([&] { return ops::layernorm_backward(dy, x, w, out.mean, out.rstd, affine); });
      expect_close(gr.dx, dx, s, 1e-3, 1e-4, what + " dx");
      CHECK(gr.dw.defined() == affine);
      CHECK(gr.db.defined() == affine);
      if (affine) {
        expect_close(gr.dw, dw, {C}, 1e-4, 1e-4, what + " dw");
        expect_close(gr.db, db, {C}, 1e-5, 1e-5, what + " db");
      }
    }
  }
  expect_clean();
}

TEST_CASE("vk layernorm dw/db in fours (cols % 4 == 0) give the scalar kernel's bits, f32 and f16") {
  GpuScope g;
  // dw, db of a column depend on that column's x, dy and each row's mean, rstd only: (130, 8) in fours and the same
  // data with a 9th column (the scalar kernel), given the same mean and rstd, must agree bitwise (3 row chunks of 64;
  // 4100 rows: 257 chunks of 16, then two passes over the partials), and match the CPU.
  for (const auto& [dt, R] : {std::pair{DType::f32, int64_t{130}}, std::pair{DType::f16, int64_t{130}},
                               std::pair{DType::f32, int64_t{4100}}, std::pair{DType::f16, int64_t{4100}}}) {
    const Tensor x9 = randn({R, 9}, 34, 2.0).to(dt), dy9 = randn({R, 9}, 35).to(dt), w9 = randn({9}, 36).to(dt);
    const auto first8 = [](const Tensor& t) { return ops::cat({t.narrow(-1, 0, 8)}, -1); };
    const Tensor x = first8(x9), dy = first8(dy9), w = first8(w9);
    const auto out = on_gpu([&] { return ops::layernorm(x, w, Tensor(), 1e-5); });
    const std::string k = std::string("layernorm_bwd_dwdb_") + dtype_name(dt) + "_vec4";
    const int64_t before = kernel_runs(k);
    const auto g4 = on_gpu([&] { return ops::layernorm_backward(dy, x, w, out.mean, out.rstd, true); });
    CHECK(kernel_runs(k) == before + 1);
    const auto g1 = on_gpu([&] { return ops::layernorm_backward(dy9, x9, w9, out.mean, out.rstd, true); });
    CHECK(kernel_runs(k) == before + 1);
    CHECK(g4.dw.to_f64_vector() == g1.dw.narrow(0, 0, 8).contiguous().to_f64_vector());
    CHECK(g4.db.to_f64_vector() == g1.db.narrow(0, 0, 8).contiguous().to_f64_vector());
    CHECK(g4.db.to_f64_vector() != std::vector<double>(8, 0.0));
    const auto c = on_cpu([&] { return ops::layernorm_backward(dy, x, w, out.mean, out.rstd, true); });
    const double tol = dt == DType::f16 ? 2e-3 : 1e-4;
    expect_close(g4.dw.to(DType::f32), c.dw.to(DType::f32), tol, tol, "dw " + std::to_string(R));
    expect_close(g4.db.to(DType::f32), c.db.to(DType::f32), tol, tol, "db " + std::to_string(R));
  }
  expect_clean();
}

TEST_CASE("vk gelu forward and backward match the tanh-approximation reference") {
  GpuScope g;
  for (const auto& s : kShapes) {
    const Tensor x = randn(s, 40, 3.0), dy = randn(s, 41);
    const auto xv = x.to_f64_vector(), dv = dy.to_f64_vector();
    std::vector<double> y(xv.size()), dx(xv.size());
    const double k0 = std::sqrt(2.0 / M_PI), k1 = 0.044715;
    for (size_t i = 0; i < xv.size(); ++i) {
      const double v = xv[i], t = std::tanh(k0 * (v + k1 * v * v * v));
      y[i] = 0.5 * v * (1 + t);
      dx[i] = dv[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k0 * (1 + 3 * k1 * v * v));
    }
    expect_close(on_gpu([&] { return ops::gelu(x); }), y, s, 1e-5, 1e-6, "gelu " + shape_str(s));
    // atol: 1 - t^2 cancels in f32 for |x| around 3, on the CPU as well
    expect_close(on_gpu([&] { return ops::gelu_backward(dy, x); }), dx, s, 1e-5, 1e-5, "gelu_backward " + shape_str(s));
  }
  const Tensor big = Tensor::from_vector(std::vector<float>{-60.f, -20.f, 20.f, 60.f, 0.f, 1e20f, -1e20f}, {7});
  expect_close(on_gpu([&] { return ops::gelu(big); }), std::vector<double>{0, 0, 20, 60, 0, 1e20, 0}, {7}, 1e-6, 1e-6,
               "gelu saturates without NaN");
  const Tensor ones = Tensor::ones({7});  // where u is clamped the derivative is exactly 0 or 1 (x^3 may be inf)
  expect_close(on_gpu([&] { return ops::gelu_backward(ones, big); }), std::vector<double>{0, 0, 1, 1, 0.5, 1, 0}, {7},
               0, 1e-6, "gelu_backward saturates without NaN");
  expect_clean();
}
