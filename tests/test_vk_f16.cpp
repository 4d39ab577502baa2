// f16 storage on the GPU: every f16 kernel variant against the CPU oracle (the dispatcher's upcast-compute-
// round path, core/ops.h) on random inputs at awkward sizes (1, 17, 33, 65, 129) and on non-contiguous views,
// the f32 <-> f16 cast, ALPHA_VK_CHECK with f16 results, and a tiny GPT trained in f16 mode.
//
// Tolerances (|gpu - cpu| <= rtol * |cpu| + atol * max|cpu|): both sides compute in f32 from the same f16
// inputs and round to f16, so they differ by at most one f16 ulp (<= 2^-10 relative) plus whatever the f32
// results already differ by (GPU exp/tanh/division ulps, another summation order):
//   copy, cast, embedding gather, dropout zero pattern: exact
//   binary, unary, affine, dropout values:             rtol 1e-3
//   gelu, softmax, cross-entropy dlogits:              rtol 1e-3, atol 1e-3
//   sum, layernorm y/dx (cancellation near 0):         rtol 1e-3, atol 2e-3
//   f32 outputs (loss, mean/rstd, dw/db, embedding dW):          atol 1e-4 (f32 summation order)
//   attention out, dq/dk/dv, dqkv: rtol 2e-3, atol 2e-3 of max(1e-2, max|cpu|) (one f16 ulp either side of
//     the f32 results, which differ by ~1e-5 of their largest value: exp ulps, another summation order;
//     the floor keeps T = 1's dq = dk = 0 up to rounding from making the bound 0); attention lse (f32): 1e-4
// Dimension legend: N rows, C columns, V vocabulary; attention: B batch, H heads, T time, D head size.
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "optim/adamw.h"
#include "optim/loss_scale.h"
#include "spirv/push_constants.h"
#include "tests/vk_test_util.h"
#include "model/gpt.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {

// Per-kernel dispatch counts (Runtime::kernel_counts) for the GPT test below: set before the shared backend
// is built on first use (vk_test_util.h's gpu()); the runtime prints them to stderr at exit.
const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;

const int64_t kSizes[] = {1, 17, 33, 65, 129};
// Element-wise kernels also at sizes that take their 4-wide f16vec4 variants (n % 4 == 0).
const int64_t kElementwiseSizes[] = {1, 17, 33, 65, 129, 8, 132};

Tensor h(const Tensor& t) { return t.to(DType::f16); }

void expect_f16(const Tensor& g, const Tensor& c, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(g.defined());
  CHECK(g.dtype() == c.dtype());
  double scale = 0;
  for (double v : c.to_f64_vector()) scale = std::max(scale, std::isfinite(v) ? std::fabs(v) : 0.0);
  expect_close(g, c, rtol, atol * scale, what);
}

// Runs f on the GPU (expecting `gpu_ops` dispatches there) and on the CPU oracle.
template <class F>
auto both(F&& f, int64_t gpu_ops = 1) {
  GpuScope scope;
  auto g = on_gpu(f, gpu_ops);
  auto c = on_cpu(f);
  return std::pair{g, c};
}

}  // namespace

TEST_CASE("vk f16: binary, unary and affine kernels match the CPU oracle at awkward sizes") {
  for (int64_t n : kElementwiseSizes) {
    const std::string sz = "n=" + std::to_string(n);
    const Tensor a = h(randn({n}, 1)), b = h(randu({n}, 2, 0.5f, 2.0f)), row = h(randn({3, n}, 3));
    for (auto [name, fn] : {std::pair{"add", &ops::add}, {"sub", &ops::sub}, {"mul", &ops::mul}, {"div", &ops::div}}) {
      auto [g, c] = both([&] { return fn(a, b); });
      expect_f16(g, c, 1e-3, 0, std::string(name) + " " + sz);
      auto [gb, cb] = both([&] { return fn(row, b); });  // trailing-vector broadcast
      expect_f16(gb, cb, 1e-3, 0, std::string(name) + " broadcast " + sz);
    }
    const Tensor pos = h(randu({n}, 4, 0.1f, 4.0f));
    for (auto [name, fn] : {std::pair{"neg", &ops::neg}, {"exp", &ops::exp}, {"log", &ops::log}, {"sqrt", &ops::sqrt}}) {
      auto [g, c] = both([&] { return fn(pos); });
      expect_f16(g, c, 1e-3, 0, std::string(name) + " " + sz);
    }
    auto [g, c] = both([&] { return ops::scale(a, 0.37); });
    expect_f16(g, c, 1e-3, 0, "scale " + sz);
    CHECK(g.dtype() == DType::f16);
  }
  expect_clean();
}

TEST_CASE("vk f16: sums over rows and columns accumulate in f32 and match the CPU oracle") {
  for (int64_t n : kSizes) {
    const Tensor x = h(randn({3, n, 5}, 10 + uint64_t(n)));
    for (int64_t dim : {0, 1, 2}) {
      auto [g, c] = both([&] { return ops::sum(x, dim); });
      expect_f16(g, c, 1e-3, 2e-3, "sum dim " + std::to_string(dim) + " n=" + std::to_string(n));
    }
  }
  // 5000 rows of ones: an f16 accumulator would stop at 2048; f32 accumulation gives 5000 exactly.
  const Tensor ones = Tensor::ones({5000, 2}, DType::f16);
  auto [g, c] = both([&] { return ops::sum(ones, 0); });
  CHECK(g.to_f64_vector() == std::vector<double>{5000, 5000});
  CHECK(c.to_f64_vector() == std::vector<double>{5000, 5000});
  expect_clean();
}

TEST_CASE("vk f16: softmax (plain and causal) forward and backward match the CPU oracle") {
  for (int64_t n : kSizes) {
    const std::string sz = "cols=" + std::to_string(n);
    const Tensor x = h(randn({4, n}, 20, 3.0)), sq = h(randn({2, n, n}, 21, 3.0)), dy = h(randn({4, n}, 22));
    auto [g, c] = both([&] { return ops::softmax(x, false); });
    expect_f16(g, c, 1e-3, 1e-3, "softmax " + sz);
    auto [gc, cc] = both([&] { return ops::softmax(sq, true); });
    expect_f16(gc, cc, 1e-3, 1e-3, "causal softmax " + sz);
    auto [gb, cb] = both([&] { return ops::softmax_backward(dy, c); });
    expect_f16(gb, cb, 1e-3, 2e-3, "softmax backward " + sz);
  }
  expect_clean();
}

TEST_CASE("vk f16: layernorm forward and backward match the CPU oracle; mean, rstd, dw, db stay f32") {
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{33}, int64_t{65}, int64_t{129}, int64_t{8}, int64_t{1024}}) {
    // C % 4 == 0 up to 1024: the 4-wide kernels (row held in registers, dw/db in quads).
    const std::string sz = "C=" + std::to_string(n);
    const Tensor x = h(randn({5, n}, 30, 2.0)), w = h(randn({n}, 31)), b = h(randn({n}, 32)), dy = h(randn({5, n}, 33));
    auto [g, c] = both([&] { return ops::layernorm(x, w, b, 1e-5); });
    expect_f16(g.y, c.y, 1e-3, 2e-3, "layernorm y " + sz);
    CHECK(g.mean.dtype() == DType::f32);
    expect_f16(g.mean, c.mean, 0, 1e-4, "layernorm mean " + sz);
    expect_f16(g.rstd, c.rstd, 1e-4, 0, "layernorm rstd " + sz);
    auto [gb, cb] = both([&] { return ops::layernorm_backward(dy, x, w, c.mean, c.rstd, true); });
    expect_f16(gb.dx, cb.dx, 1e-3, 2e-3, "layernorm dx " + sz);
    CHECK(gb.dx.dtype() == DType::f16);
    CHECK(gb.dw.dtype() == DType::f32);
    expect_f16(gb.dw, cb.dw, 0, 1e-4, "layernorm dw " + sz);
    expect_f16(gb.db, cb.db, 0, 1e-4, "layernorm db " + sz);
  }
  expect_clean();
}

TEST_CASE("vk f16: gelu and dropout forward and backward match the CPU oracle") {
  for (int64_t n : kElementwiseSizes) {
    const std::string sz = "n=" + std::to_string(n);
    const Tensor x = h(randn({2, n}, 40, 3.0)), dy = h(randn({2, n}, 41));
    auto [g, c] = both([&] { return ops::gelu(x); });
    expect_f16(g, c, 1e-3, 1e-3, "gelu " + sz);
    auto [gb, cb] = both([&] { return ops::gelu_backward(dy, x); });
    expect_f16(gb, cb, 1e-3, 1e-3, "gelu backward " + sz);
    auto [gd, cd] = both([&] { return ops::dropout(x, 0.3, 99, 12345); });
    expect_f16(gd, cd, 1e-3, 0, "dropout " + sz);
    const auto gv = gd.to_f64_vector(), cv = cd.to_f64_vector();
    for (size_t i = 0; i < gv.size(); ++i) CHECK((gv[i] == 0) == (cv[i] == 0));  // the same Philox mask
  }
  expect_clean();
}

TEST_CASE("vk f16: cross-entropy (f16 logits, f32 loss) and its backward match the CPU oracle") {
  for (int64_t v : kElementwiseSizes) {  // V % 4 == 0: the 4-wide backward
    const std::string sz = "V=" + std::to_string(v);
    const Tensor logits = h(randn({7, v}, 50, 3.0));
    std::vector<int32_t> t(7);
    for (int i = 0; i < 7; ++i) t[i] = i == 3 ? -1 : static_cast<int32_t>((i * 5) % v);  // row 3 ignored
    const Tensor targets = Tensor::from_vector(t, {7});
    auto [g, c] = both([&] { return ops::cross_entropy(logits, targets, -1); });
    CHECK(g.loss.dtype() == DType::f32);
    CHECK(g.count == c.count);
    expect_f16(g.loss, c.loss, 1e-5, 0, "cross-entropy loss " + sz);
    auto [gb, cb] = both([&] { return ops::cross_entropy_backward(logits, targets, c.lse, 0.5, c.count, -1); });
    CHECK(gb.dtype() == DType::f16);
    expect_f16(gb, cb, 1e-3, 1e-3, "cross-entropy dlogits " + sz);
  }
  expect_clean();
}

// Bitwise equality of two tensors' values (NaNs compare equal).
static void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  CHECK(a.dtype() == b.dtype());
  const auto av = a.to_f64_vector(), bv = b.to_f64_vector();
  REQUIRE(av.size() == bv.size());
  int64_t differ = 0;
  for (size_t i = 0; i < av.size(); ++i) differ += !(av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i])));
  CHECK(differ == 0);
}

TEST_CASE("vk f16: cross_entropy_fused: the forward's results and the backward's dlogits in one pass") {
  REQUIRE(kKernelCounts);
  // V % 4 == 0 up to 4 * CE_FUSED_WG * CE_FUSED_KEEP: the fused kernel (GPT-2's padded 50304 among them, its last
  // register slot partly filled); 51204 is past it and 65 has scalar rows: both run the two kernels.
  for (const int64_t v : {8, 132, 2052, 50304, 51204, 65}) {
    const std::string sz = "V=" + std::to_string(v);
    const Tensor logits = h(randn({3, v}, 52, 3.0));
    const Tensor targets = Tensor::from_vector(std::vector<int32_t>{int32_t(v - 1), -1, int32_t(v / 2)}, {3});
    const double dloss = 1024.0 / 3.0;  // a loss scale over 3 micro-steps
    const bool one_kernel = v % 4 == 0 && v <= 4 * CE_FUSED_WG * CE_FUSED_KEEP;
    GpuScope scope;
    const auto sep = on_gpu([&] { return ops::cross_entropy(logits, targets, -1); });
    const int64_t k0 = kernel_runs("cross_entropy_fused_f16_vec4");
    const auto fused = on_gpu([&] { return ops::cross_entropy_fused(logits, targets, -1, dloss); });
    CHECK(kernel_runs("cross_entropy_fused_f16_vec4") - k0 == (one_kernel ? 1 : 0));
    CHECK(fused.count == sep.count);
    // Its lse sums in another order than the forward kernel's: f32 rounding apart. dlogits are the backward
    // kernel's for that lse, to the bit.
    expect_f16(fused.loss, sep.loss, 1e-6, 0, "fused loss " + sz);
    expect_f16(fused.lse, sep.lse, 1e-6, 0, "fused lse " + sz);
    const Tensor dsep = on_gpu([&] { return ops::cross_entropy_backward(logits, targets, fused.lse, dloss, fused.count, -1); });
    expect_same_bits(fused.dlogits, dsep, "fused dlogits " + sz);
    if (!one_kernel) expect_same_bits(fused.lse, sep.lse, "two kernels' lse " + sz);
    const auto cpu = on_cpu([&] { return ops::cross_entropy_fused(logits, targets, -1, dloss); });
    CHECK(fused.dlogits.dtype() == DType::f16);
    expect_f16(fused.dlogits, cpu.dlogits, 1e-3, 1e-3, "fused dlogits vs CPU " + sz);
    expect_f16(fused.loss, cpu.loss, 1e-5, 0, "fused loss vs CPU " + sz);
  }
  expect_clean();
}

TEST_CASE("vk f16: cross_entropy_fused keeps a NaN logit's row NaN and the other rows clean") {
  GpuScope scope;
  std::vector<float> v(2 * 132, 0.5f);
  v[132 + 7] = std::nanf("");  // row 1
  const Tensor logits = h(Tensor::from_vector(v, {2, 132}));
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  const auto out = on_gpu([&] { return ops::cross_entropy_fused(logits, targets, -1, 1.0); });
  CHECK(std::isnan(out.loss.item()));
  const auto lse = out.lse.to_f64_vector();
  CHECK(std::abs(lse[0] - (0.5 + std::log(132.0))) < 1e-5);
  CHECK(std::isnan(lse[1]));
  const auto d = out.dlogits.to_f64_vector();
  CHECK(std::isfinite(d[0]));
  CHECK(std::isnan(d[132]));
  expect_clean();
}

TEST_CASE("ag::cross_entropy under ExpectSeed: the fused pass's gradient where the seed matches, the plain one else") {
  REQUIRE(kKernelCounts);
  GpuScope scope;
  const Tensor logits = h(randn({5, 132}, 53, 3.0));
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{0, 131, -1, 7, 64}, {5});
  // The gradient of the logits for a backward seeded `seed`, with `expect` announced before the forward (0: none).
  auto grad_of = [&](double expect, double seed, int64_t* fused_runs) {
    Tensor x = logits.clone();
    x.set_requires_grad(true);
    const int64_t k0 = kernel_runs("cross_entropy_fused_f16_vec4");
    Tensor loss;
    {
      const ag::ExpectSeed e(expect);
      loss = ag::cross_entropy(x, targets);
    }
    ag::backward(loss, seed);
    *fused_runs = kernel_runs("cross_entropy_fused_f16_vec4") - k0;
    return x.grad();
  };
  int64_t runs = 0;
  const Tensor plain = grad_of(0.0, 1024.0, &runs);
  CHECK(runs == 0);
  const Tensor fused = grad_of(1024.0, 1024.0, &runs);
  CHECK(runs == 1);
  expect_f16(fused, plain, 1e-3, 1e-3, "expected seed");  // the fused lse's last bits may differ
  const Tensor other = grad_of(512.0, 1024.0, &runs);     // announced 512, backward brings 1024: the plain backward
  CHECK(runs == 1);
  expect_same_bits(other, fused, "another seed: the plain backward on the fused lse");
  const Tensor third = grad_of(1.0 / 3.0, 1.0 / 3.0, &runs);  // matched as the f32 seed tensor carries it
  CHECK(runs == 1);
  const Tensor third_plain = grad_of(0.0, 1.0 / 3.0, &runs);
  expect_f16(third, third_plain, 1e-3, 1e-3, "seed 1/3");
  expect_clean();
}

TEST_CASE("vk f16: embedding gather is exact; the weight gradient is summed in f32") {
  for (int64_t c : kSizes) {
    const std::string sz = "C=" + std::to_string(c);
    const Tensor w = h(randn({11, c}, 60));
    std::vector<int32_t> idx(17);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>((i * 7) % 11);  // 17 > 11: repeats
    const Tensor ix = Tensor::from_vector(idx, {17});
    auto [g, cp] = both([&] { return ops::embedding(w, ix); });
    expect_f16(g, cp, 0, 0, "embedding " + sz);
    const Tensor dout = h(randn({17, c}, 61));
    auto [gb, cb] = both([&] { return ops::embedding_backward(dout, ix, 11); });
    CHECK(gb.dtype() == DType::f32);
    expect_f16(gb, cb, 0, 1e-5, "embedding backward " + sz);
  }
  expect_clean();
}

TEST_CASE("vk f16: casts round to nearest even like the CPU, inf/NaN/subnormals included (NaN payload free)") {
  for (int64_t n : kElementwiseSizes) {  // 8 (the specials in one vector pass) and 132: the 4-wide casts
    std::vector<float> v(static_cast<size_t>(n));
    Rng rng(70 + uint64_t(n));
    const float special[] = {65504.f, 65520.f, 70000.f, -1e9f, 6e-8f, 3e-8f, 1e-5f, INFINITY, -INFINITY, NAN, 0.f, -0.f};
    for (size_t i = 0; i < v.size(); ++i) v[i] = i < 12 ? special[i] : static_cast<float>(rng.normal() * 100);
    const Tensor x = Tensor::from_vector(v, {n});
    auto [g, c] = both([&] { return ops::cast(x, DType::f16); });
    REQUIRE(g.dtype() == DType::f16);
    const uint16_t *gp = g.data<uint16_t>(), *cp = c.data<uint16_t>();
    // NaN payloads are the driver's choice (NVIDIA: 0x7fff, the CPU: 0x7e00): NaN must stay a NaN (exponent
    // all ones, mantissa non-zero); every other value must round to the same bits.
    auto is_nan16 = [](uint16_t b) { return (b & 0x7c00u) == 0x7c00u && (b & 0x03ffu) != 0; };
    for (int64_t i = 0; i < n; ++i)
      CHECK_MESSAGE((gp[i] == cp[i] || (is_nan16(gp[i]) && is_nan16(cp[i]))),
                    "f32 -> f16 bits differ at " << i << " (" << v[size_t(i)] << ")");
    auto [g2, c2] = both([&] { return ops::cast(c, DType::f32); });
    REQUIRE(g2.dtype() == DType::f32);
    const auto gv = g2.to_f64_vector(), cv = c2.to_f64_vector();
    for (int64_t i = 0; i < n; ++i)  // exact, infinities included
      CHECK_MESSAGE((gv[size_t(i)] == cv[size_t(i)] || (std::isnan(gv[size_t(i)]) && std::isnan(cv[size_t(i)]))),
                    "f16 -> f32 differs at " << i);
  }
  expect_clean();
}

TEST_CASE("vk f16: non-contiguous views: strided copies run on the GPU, other ops stay correct") {
  for (int64_t n : kSizes) {
    const std::string sz = "n=" + std::to_string(n);
    const Tensor x = h(randn({n, 6}, 80));
    const Tensor xt = x.transpose(0, 1);  // (6, n), non-contiguous
    auto [g, c] = both([&] { return ops::contiguous(xt); }, xt.is_contiguous() ? 0 : 1);  // n = 1: already is
    expect_f16(g, c, 0, 0, "contiguous of a transposed f16 view " + sz);
    expect_f16(g, xt.clone(), 0, 0, "contiguous == clone " + sz);
    const Tensor nw = x.narrow(1, 1, 3);
    auto [gn, cn] = both([&] { return ops::narrow_backward(nw.contiguous(), {n, 6}, 1, 2); });
    expect_f16(gn, cn, 0, 0, "narrow_backward " + sz);
    // Ops on the view itself (the kernels take contiguous tensors: the dispatcher copies or falls back).
    GpuScope scope;
    const Tensor sm = ops::softmax(xt, false), ge = ops::gelu(xt), ad = ops::add(xt, xt);
    const auto want = on_cpu([&] { return std::vector<Tensor>{ops::softmax(xt.clone(), false), ops::gelu(xt.clone()),
                                                              ops::add(xt.clone(), xt.clone())}; });
    expect_f16(sm, want[0], 1e-3, 1e-3, "softmax of a view " + sz);
    expect_f16(ge, want[1], 1e-3, 1e-3, "gelu of a view " + sz);
    expect_f16(ad, want[2], 1e-3, 0, "add of views " + sz);
  }
  expect_clean();
}

TEST_CASE("vk f16: ALPHA_VK_CHECK compares f16 results and catches a corrupted one") {
  GpuScope scope;
  set_gpu_check(true);
  const Tensor x = h(randn({3, 33}, 90, 3.0));
  CHECK_NOTHROW(ops::softmax(x, false));
  CHECK_NOTHROW(ops::gelu(x));
  corrupt_next_gpu_result();
  CHECK_THROWS_AS(ops::gelu(x), GpuCheckError);
  set_gpu_check(false);
  expect_clean();
}

namespace {
// A tiny GPT (dropout on) trained `steps` AdamW steps; f16 runs use dynamic loss scaling as the trainer does.
std::vector<double> train_tiny(bool gpu_backend, bool f16, int steps, int64_t* skips = nullptr) {
  GPTConfig cfg{2, 2, 32, 16, 65, 0.1, true};
  cfg.fused_attention = false;
  cfg.f16 = f16;
  Rng init(7);
  GPT model(cfg, init);
  const std::vector<Tensor> params = model.parameters();
  AdamW opt(params, AdamWOptions{0.9, 0.95, 1e-8, 0.1});
  LossScaler scaler;
  Rng data(8), drop(9);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    std::vector<int32_t> x(2 * 16), y(2 * 16);
    for (auto& v : x) v = static_cast<int32_t>(data.below(65));
    for (auto& v : y) v = static_cast<int32_t>(data.below(65));
    const Tensor xi = Tensor::from_vector(x, {2, 16}), yi = Tensor::from_vector(y, {2, 16});
    if (gpu_backend) set_active_backend(&gpu());
    Tensor loss = model.loss(xi, yi, /*training=*/true, drop);
    ag::backward(loss, f16 ? scaler.scale() : 1.0);
    bool finite = true;
    if (f16) {
      finite = scaler.unscale(params);
      scaler.update(finite);
    }
    set_active_backend(nullptr);
    CHECK(loss.dtype() == DType::f32);
    losses.push_back(loss.item());
    if (finite) opt.step(1e-3);
    opt.zero_grad();
  }
  if (skips) *skips = scaler.state().skipped;
  return losses;
}
}  // namespace

TEST_CASE("vk f16 mode: a tiny GPT trains 20 steps at threshold 0 within 1e-2 of the f32 run, finite") {
  for (int c = 0; c < 9; ++c) gpu().set_threshold(static_cast<OpClass>(c), 0);
  const int64_t gpu0 = dispatch_stats().gpu_ops;
  int64_t skips = -1;
  const std::vector<double> g16 = train_tiny(true, true, 20, &skips);
  MESSAGE("GPU ops in the f16 run: " << dispatch_stats().gpu_ops - gpu0 << ", loss-scale skips: " << skips);
  const std::vector<double> c32 = train_tiny(false, false, 20);
  REQUIRE(g16.size() == 20);
  CHECK(skips == 0);
  for (size_t s = 0; s < g16.size(); ++s) {
    CHECK(std::isfinite(g16[s]));
    CHECK_MESSAGE(std::fabs(g16[s] - c32[s]) <= 1e-2 * std::fabs(c32[s]), "step " << s << ": f16 " << g16[s] << " f32 " << c32[s]);
  }
  CHECK(g16.back() < g16.front());
  expect_clean();
}

namespace {
// Attention results: f16 ones within the tolerance documented at the top (lse: f32, 1e-4).
void expect_attn(const Tensor& g, const Tensor& c, DType dtype, const std::string& what) {
  INFO(what);
  REQUIRE(g.defined());
  CHECK(g.dtype() == dtype);
  CHECK(c.dtype() == dtype);
  double scale = 1e-2;
  for (double v : c.to_f64_vector()) scale = std::max(scale, std::fabs(v));
  if (dtype == DType::f32) expect_close(g, c, 1e-4, 1e-4 * std::max(scale, 1.0), what);
  else expect_close(g, c, 2e-3, 2e-3 * scale, what);
}
}  // namespace

TEST_CASE("vk f16: fused attention forward (out, lse) and backward (dq, dk, dv, packed dqkv) match the CPU oracle") {
  GpuScope scope;
  struct Case {
    int64_t B, H, T, D;
    double p;
    bool views;  // q, k, v as head views of one f16 (B, T, 3*H*D) tensor (GPT's qkv); else contiguous
  };
  const Case cases[] = {{1, 1, 1, 16, 0.0, true},  {1, 1, 1, 64, 0.2, false}, {2, 3, 17, 16, 0.0, true},
                        {1, 4, 17, 64, 0.2, true}, {3, 2, 65, 16, 0.2, false}, {1, 5, 65, 64, 0.0, true},
                        {2, 1, 65, 64, 0.1, true}};
  for (const Case c : cases) {
    const std::string nm = fmt::format("B={} H={} T={} D={} p={} views={}", c.B, c.H, c.T, c.D, c.p, c.views);
    INFO(nm);
    const int64_t C = c.H * c.D;
    Tensor q, k, v;
    if (c.views) {
      const Tensor split = h(randn({c.B, c.T, 3 * C}, 120 + uint64_t(c.T))).view({c.B, c.T, 3, c.H, c.D});
      auto head = [&](int64_t i) { return split.narrow(2, i, 1).squeeze(2).transpose(1, 2); };
      q = head(0), k = head(1), v = head(2);
    } else {
      q = h(randn({c.B, c.H, c.T, c.D}, 121)), k = h(randn({c.B, c.H, c.T, c.D}, 122)), v = h(randn({c.B, c.H, c.T, c.D}, 123));
    }
    const Tensor dout = h(randn({c.B, c.H, c.T, c.D}, 124));
    ops::AttentionParams ap;
    ap.scale = 1.0 / std::sqrt(double(c.D));
    ap.p = c.p;
    ap.seed = 17;
    ap.offset = 5;
    auto [gf, cf] = both([&] { return ops::attention(q, k, v, ap); });
    expect_attn(gf.out, cf.out, DType::f16, "out " + nm);
    expect_attn(gf.lse, cf.lse, DType::f32, "lse " + nm);
    CHECK(gf.out.transpose(1, 2).is_contiguous());
    // Both backwards from the CPU's forward results, so they see the same out and lse.
    for (bool packed : {false, true}) {
      auto [gb, cb] = both([&] { return ops::attention_backward(dout, q, k, v, cf.out, cf.lse, ap, packed); });
      const std::string w = (packed ? " packed " : " ") + nm;
      expect_attn(gb.dq, cb.dq, DType::f16, "dq" + w);
      expect_attn(gb.dk, cb.dk, DType::f16, "dk" + w);
      expect_attn(gb.dv, cb.dv, DType::f16, "dv" + w);
      if (packed) {
        expect_attn(gb.dqkv, cb.dqkv, DType::f16, "dqkv" + w);
        CHECK(gb.dk.storage() == gb.dqkv.storage());
        CHECK(cb.dk.storage() == cb.dqkv.storage());
      }
    }
  }
  expect_clean();
}

namespace {
// Dispatches of GPT's attention section (qkv -> y, then y * R summed and its backward) at `dtype`.
std::pair<int64_t, int64_t> attention_section_dispatches(DType dtype, Tensor* grad = nullptr) {
  const int64_t B = 2, T = 16, H = 2, C = 32;
  Tensor qkv = randn({B, T, 3 * C}, 130).to(dtype);
  qkv.set_requires_grad(true);
  const Tensor R = randn({B, T, C}, 131).to(dtype);
  Rng rng(4);
  gpu().sync();
  const int64_t d0 = gpu().queue_counters().dispatches;
  const Tensor y = ag::attention_qkv(qkv, H, true, 0.1, rng);
  const int64_t d1 = gpu().queue_counters().dispatches;
  CHECK(y.dtype() == dtype);
  ag::backward(ag::sum_all(ag::mul(y, R)));
  const int64_t d2 = gpu().queue_counters().dispatches;
  if (grad) *grad = qkv.grad();
  return {d1 - d0, d2 - d1};
}

std::map<std::string, int64_t> kernel_counts() { return gpu().runtime().kernel_counts(); }
int64_t count_of(const std::map<std::string, int64_t>& a, const std::map<std::string, int64_t>& b, const std::string& k) {
  const auto ia = a.find(k), ib = b.find(k);
  return (ia == a.end() ? 0 : ia->second) - (ib == b.end() ? 0 : ib->second);
}
}  // namespace

TEST_CASE("vk f16: attention_qkv on f16 qkv casts nothing: the f32 section's dispatch counts, f16 grads") {
  GpuScope scope;
  REQUIRE(kKernelCounts);
  Tensor g16;
  const auto d16 = attention_section_dispatches(DType::f16, &g16);
  const auto d32 = attention_section_dispatches(DType::f32);
  MESSAGE("attention section dispatches f16 ", d16.first, " + ", d16.second, ", f32 ", d32.first, " + ", d32.second);
  CHECK(d16.first == 1);
  CHECK(d16 == d32);
  REQUIRE(g16.defined());
  CHECK(g16.dtype() == DType::f16);
  expect_clean();
}

TEST_CASE("vk f16 mode with fused attention: attention runs as _f16 kernels; casts as in the unfused run") {
  for (int c = 0; c < 9; ++c) gpu().set_threshold(static_cast<OpClass>(c), 0);
  // One training step of a tiny 2-layer f16 GPT (dropout on); kernel dispatch counts of that step.
  auto step = [](bool fused) {
    GPTConfig cfg{2, 2, 32, 16, 65, 0.1, true};
    cfg.fused_attention = fused;
    cfg.f16 = true;
    Rng init(7), data(8), drop(9);
    GPT model(cfg, init);
    std::vector<int32_t> x(2 * 16), y(2 * 16);
    for (auto& v : x) v = static_cast<int32_t>(data.below(65));
    for (auto& v : y) v = static_cast<int32_t>(data.below(65));
    gpu().sync();
    const auto k0 = kernel_counts();
    set_active_backend(&gpu());
    Tensor loss = model.loss(Tensor::from_vector(x, {2, 16}), Tensor::from_vector(y, {2, 16}), true, drop);
    ag::backward(loss, 1024.0);
    set_active_backend(nullptr);
    gpu().sync();
    const auto k1 = kernel_counts();
    CHECK(std::isfinite(loss.item()));
    std::map<std::string, int64_t> d;
    for (const auto& [name, n] : k1) d[name] = count_of(k1, k0, name);
    return d;
  };
  auto fused = step(true), unfused = step(false);
  auto n = [](const std::map<std::string, int64_t>& m, const char* k) {  // a kernel and its 4- and 8-wide variants
    int64_t total = 0;
    for (const std::string& name : {std::string(k), std::string(k) + "_vec4", std::string(k) + "_vec8"}) {
      const auto it = m.find(name);
      total += it == m.end() ? int64_t{0} : it->second;
    }
    return total;
  };
  for (const char* k : {"attention_f16", "attention_rowdot_f16", "attention_dq_f16", "attention_dkdv_f16"}) {
    CHECK_MESSAGE(n(fused, k) == 2, k);  // one per layer
  }
  for (const char* k : {"attention_f32", "attention_rowdot_f32", "attention_dq_f32", "attention_dkdv_f32"}) {
    CHECK_MESSAGE(n(fused, k) == 0, k);
  }
  // The weight casts (and their gradients' casts back) are the same in both; a cast pair around attention
  // would add 2 per layer in each direction.
  for (const char* k : {"cast_f32_f16", "cast_f16_f32"}) {
    CHECK_MESSAGE(n(fused, k) == n(unfused, k), k << ": fused " << n(fused, k) << " unfused " << n(unfused, k));
  }
  CHECK(n(fused, "cast_f32_f16") > 0);  // the counts are live
  expect_clean();
}
