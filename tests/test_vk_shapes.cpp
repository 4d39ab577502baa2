// GPU vs CPU kernels at GPT training shapes (configs/shakespeare_char.json: C=384, H=6, D=64, T=256, V=65)
// for every op the Vulkan backend implements, forward and backward: races, tile edges, index math and grids
// over 65535 workgroups show up only at such sizes on a real GPU. B defaults to 2 so lavapipe stays fast;
// ALPHA_SHAPES_B=64 runs the training batch on a GPU. Each op reports its error,
//   err = max_i |gpu_i - cpu_i| / max_i |cpu_i|   (a race or a wrong index gives O(1); rounding ~1e-6),
// and the chain tests run many dependent ops without a host sync (a missing pipeline barrier shows there).
//
// Dimension legend: B batch, T time, C channels, H heads, D head dim (C / H), V vocabulary, N = B*T rows,
// M/K/N' matmul dims.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {

struct Dims {
  int64_t B = 2, T = 256, C = 384, H = 6, D = 64, V = 65;
  int64_t N() const { return B * T; }
};

Dims dims() {
  Dims d;
  if (const char* e = std::getenv("ALPHA_SHAPES_B"); e && *e) d.B = std::max<int64_t>(1, std::atoll(e));
  return d;
}

double max_err(const Tensor& got, const Tensor& want) {
  const auto g = got.to_f64_vector(), w = want.to_f64_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(w[i])) return INFINITY;
    if (std::isnan(w[i])) continue;
    num = std::max(num, std::fabs(g[i] - w[i]));
    den = std::max(den, std::fabs(w[i]));
  }
  return den > 0 ? num / den : num;
}

// Compares a GPU result with the CPU kernel's, reports the error and checks it against tol.
void compare(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(want.defined());
  REQUIRE(got.shape() == want.shape());
  const double e = max_err(got, want);
  MESSAGE(fmt::format("{:<44} {:>14} err {:.3g}", what, shape_str(got.shape()), e));
  CHECK_MESSAGE(e <= tol, what << ": error " << e << " > " << tol);
}

// Runs f on the GPU (checking it was dispatched there: `ops` GPU ops) and on the CPU; compares.
template <class F>
void gpu_vs_cpu(const std::string& what, F&& f, double tol, int64_t ops = 1) {
  const Tensor g = on_gpu(f, ops);
  const Tensor c = on_cpu(f);
  compare(what, g, c, tol);
}

Tensor idx_tensor(const Shape& s, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  return Tensor::from_vector(v, s);
}

constexpr double kTol = 1e-4;    // reductions/transcendentals in f32, other summation orders
constexpr double kExact = 1e-6;  // element-wise maps that should agree to an ulp or two

}  // namespace

TEST_CASE("vk shapes: element-wise ops at GPT shapes (same shape, bias and position broadcasts, unary)") {
  GpuScope g;
  const Dims d = dims();
  const Tensor x = randn({d.B, d.T, d.C}, 100), y = randn({d.B, d.T, d.C}, 101);
  const Tensor pos = randn({d.T, d.C}, 102), bias = randn({3 * d.C}, 103), h3 = randn({d.B, d.T, 3 * d.C}, 104);
  const Tensor den = randu({d.B, d.T, d.C}, 105, 0.5f, 2.0f);
  gpu_vs_cpu("add (B,T,C)+(B,T,C)", [&] { return ops::add(x, y); }, kExact);
  gpu_vs_cpu("add (B,T,C)+(T,C) position", [&] { return ops::add(x, pos); }, kExact);
  gpu_vs_cpu("add (B,T,3C)+(3C) bias", [&] { return ops::add(h3, bias); }, kExact);
  gpu_vs_cpu("sub", [&] { return ops::sub(x, y); }, kExact);
  gpu_vs_cpu("mul", [&] { return ops::mul(x, y); }, kExact);
  gpu_vs_cpu("div", [&] { return ops::div(x, den); }, kExact);
  // V = 65: not a multiple of 4, the scalar (non-vec4) path.
  const Tensor logits = randn({d.B, d.T, d.V}, 106), vb = randn({d.V}, 107);
  gpu_vs_cpu("add (B,T,V)+(V) scalar path", [&] { return ops::add(logits, vb); }, kExact);
  const Tensor att = randn({d.B, d.H, d.T, d.T}, 108), pos_att = randu({d.B, d.H, d.T, d.T}, 109, 0.1f, 4.0f);
  gpu_vs_cpu("scale (B,H,T,T) by 1/sqrt(D)", [&] { return ops::scale(att, 1.0 / std::sqrt(double(d.D))); }, kExact);
  gpu_vs_cpu("add_scalar (B,H,T,T)", [&] { return ops::add_scalar(att, -0.25); }, kExact);
  gpu_vs_cpu("neg (B,H,T,T)", [&] { return ops::neg(att); }, 0);
  gpu_vs_cpu("exp (B,H,T,T)", [&] { return ops::exp(att); }, 1e-5);
  gpu_vs_cpu("log (B,H,T,T)", [&] { return ops::log(pos_att); }, 1e-5);
  gpu_vs_cpu("sqrt (B,H,T,T)", [&] { return ops::sqrt(pos_att); }, kExact);
  gpu_vs_cpu("exp (B,T,V) scalar path", [&] { return ops::exp(logits); }, 1e-5);
  expect_clean();
}

TEST_CASE("vk shapes: sums at GPT shapes (bias grads, position grad, row sums)") {
  GpuScope g;
  const Dims d = dims();
  const Tensor x = randn({d.B, d.T, d.C}, 110), h4 = randn({d.N(), 4 * d.C}, 111);
  gpu_vs_cpu("sum (B,T,C) dim 0 -> (T,C)", [&] { return ops::sum(x, 0); }, kTol);
  gpu_vs_cpu("sum (N,4C) dim 0 -> (4C)", [&] { return ops::sum(h4, 0); }, kTol);
  gpu_vs_cpu("sum (N,4C) dim 1 -> (N)", [&] { return ops::sum(h4, 1); }, kTol);
  gpu_vs_cpu("sum (B,T,C) dim 1 keepdim", [&] { return ops::sum(x, 1, true); }, kTol);
  expect_clean();
}

TEST_CASE("vk shapes: 2-D matmuls of the GPT linears (every transpose flag on three of the shapes)") {
  GpuScope g;
  const Dims d = dims();
  struct Case {
    const char* name;
    int64_t M, K, N;
    bool all_flags;  // else only the flags autograd uses: x W^T (0,1), dY W (0,0), X^T dY (1,0)
  };
  // Linear forward/backward shapes: rows x in -> out, and the weight gradient's K = N rows reduction.
  const Case cases[] = {{"c_attn (N,C)x(C,3C)", d.N(), d.C, 3 * d.C, true},
                        {"c_fc (N,C)x(C,4C)", d.N(), d.C, 4 * d.C, false},
                        {"c_proj (N,4C)x(4C,C)", d.N(), 4 * d.C, d.C, false},
                        {"lm_head (N,C)x(C,V)", d.N(), d.C, d.V, true},
                        {"dW c_attn (3C,N)x(N,C)", 3 * d.C, d.N(), d.C, false},
                        {"dW lm_head (V,N)x(N,C)", d.V, d.N(), d.C, true}};
  uint64_t seed = 120;
  for (const Case& c : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        if (!c.all_flags && ta && tb) continue;
        const Tensor a = randn(ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, seed++);
        const Tensor b = randn(tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, seed++);
        gpu_vs_cpu(fmt::format("matmul {} ta={} tb={}", c.name, int(ta), int(tb)),
                   [&] { return ops::matmul(a, b, ta, tb); }, kTol);
      }
  expect_clean();
}

TEST_CASE("vk shapes: batched matmuls of the GPT (linear over (B,T,C), attention over (B,H,T,D))") {
  GpuScope g;
  const Dims d = dims();
  // ag::linear: (B,T,C) @ (3C,C)^T with a shared weight, and its input gradient (B,T,3C) @ (3C,C).
  const Tensor x = randn({d.B, d.T, d.C}, 140), w = randn({3 * d.C, d.C}, 141), gy = randn({d.B, d.T, 3 * d.C}, 142);
  gpu_vs_cpu("linear (B,T,C)x(3C,C)^T", [&] { return ops::matmul(x, w, false, true); }, kTol);
  gpu_vs_cpu("linear dx (B,T,3C)x(3C,C)", [&] { return ops::matmul(gy, w, false, false); }, kTol);
  // Attention: q k^T, att v and their gradients (every transpose flag on (B,H,T,D) / (B,H,T,T)).
  const Tensor q = randn({d.B, d.H, d.T, d.D}, 143), k = randn({d.B, d.H, d.T, d.D}, 144);
  const Tensor att = randu({d.B, d.H, d.T, d.T}, 145, 0.0f, 0.1f);
  gpu_vs_cpu("q k^T (B,H,T,D)x(B,H,T,D)^T", [&] { return ops::matmul(q, k, false, true); }, kTol);
  gpu_vs_cpu("att v (B,H,T,T)x(B,H,T,D)", [&] { return ops::matmul(att, k, false, false); }, kTol);
  gpu_vs_cpu("att^T dy (B,H,T,T)^Tx(B,H,T,D)", [&] { return ops::matmul(att, q, true, false); }, kTol);
  const Tensor kt = randn({d.B, d.H, d.D, d.T}, 146);
  gpu_vs_cpu("att^T kt^T (B,H,T,T)^Tx(B,H,D,T)^T", [&] { return ops::matmul(att, kt, true, true); }, kTol);
  gpu_vs_cpu("q^T k (B,H,T,D)^Tx(B,H,T,D)", [&] { return ops::matmul(q, k, true, false); }, kTol);
  expect_clean();
}

TEST_CASE("vk shapes: causal softmax over (B,H,T,T) and its backward") {
  GpuScope g;
  const Dims d = dims();
  const Tensor att = randn({d.B, d.H, d.T, d.T}, 150, 2.0), dy = randn({d.B, d.H, d.T, d.T}, 151);
  gpu_vs_cpu("softmax causal (B,H,T,T)", [&] { return ops::softmax(att, true); }, kTol);
  gpu_vs_cpu("softmax plain (B,H,T,T)", [&] { return ops::softmax(att, false); }, kTol);
  const Tensor y = on_cpu([&] { return ops::softmax(att, true); });
  gpu_vs_cpu("softmax_backward (B,H,T,T)", [&] { return ops::softmax_backward(dy, y); }, kTol);
  expect_clean();
}

TEST_CASE("vk shapes: layernorm over (B,T,C) forward and backward, with and without bias") {
  GpuScope g;
  const Dims d = dims();
  const Tensor x = randn({d.B, d.T, d.C}, 160, 2.0), dy = randn({d.B, d.T, d.C}, 161);
  const Tensor w = randn({d.C}, 162), b = randn({d.C}, 163);
  for (bool has_b : {true, false}) {
    const Tensor bb = has_b ? b : Tensor();
    const std::string tag = has_b ? " (w,b)" : " (w)";
    const auto go = on_gpu([&] { return ops::layernorm(x, w, bb, 1e-5); });
    const auto co = on_cpu([&] { return ops::layernorm(x, w, bb, 1e-5); });
    compare("layernorm y" + tag, go.y, co.y, kTol);
    compare("layernorm mean" + tag, go.mean, co.mean, kTol);
    compare("layernorm rstd" + tag, go.rstd, co.rstd, kTol);
    const auto gg = on_gpu([&] { return ops::layernorm_backward(dy, x, w, co.mean, co.rstd, has_b); });
    const auto cg = on_cpu([&] { return ops::layernorm_backward(dy, x, w, co.mean, co.rstd, has_b); });
    compare("layernorm_backward dx" + tag, gg.dx, cg.dx, kTol);
    compare("layernorm_backward dw" + tag, gg.dw, cg.dw, kTol);
    CHECK(gg.db.defined() == has_b);
    if (has_b) compare("layernorm_backward db" + tag, gg.db, cg.db, kTol);
  }
  expect_clean();
}

TEST_CASE("vk shapes: gelu over (B,T,4C) forward and backward") {
  GpuScope g;
  const Dims d = dims();
  const Tensor x = randn({d.B, d.T, 4 * d.C}, 170, 2.0), dy = randn({d.B, d.T, 4 * d.C}, 171);
  gpu_vs_cpu("gelu (B,T,4C)", [&] { return ops::gelu(x); }, 1e-5);
  gpu_vs_cpu("gelu_backward (B,T,4C)", [&] { return ops::gelu_backward(dy, x); }, 1e-5);
  expect_clean();
}

TEST_CASE("vk shapes: cross-entropy over (N,V) forward and backward") {
  GpuScope g;
  const Dims d = dims();
  const Tensor logits = randn({d.N(), d.V}, 180, 3.0), targets = idx_tensor({d.N()}, d.V, 181);
  const auto go = on_gpu([&] { return ops::cross_entropy(logits, targets, -1); });
  const auto co = on_cpu([&] { return ops::cross_entropy(logits, targets, -1); });
  CHECK(go.count == co.count);
  compare("cross_entropy loss", go.loss, co.loss, 1e-5);
  compare("cross_entropy lse", go.lse, co.lse, 1e-5);
  gpu_vs_cpu("cross_entropy_backward (N,V)",
             [&] { return ops::cross_entropy_backward(logits, targets, co.lse, 1.0, co.count, -1); }, 1e-5);
  expect_clean();
}

TEST_CASE("vk shapes: embedding (V,C) gather over (B,T) and its backward") {
  GpuScope g;
  const Dims d = dims();
  const Tensor wte = randn({d.V, d.C}, 190), idx = idx_tensor({d.B, d.T}, d.V, 191);
  const Tensor dout = randn({d.B, d.T, d.C}, 192);
  gpu_vs_cpu("embedding (V,C)[(B,T)]", [&] { return ops::embedding(wte, idx); }, 0);
  gpu_vs_cpu("embedding_backward -> (V,C)", [&] { return ops::embedding_backward(dout, idx, d.V); }, kTol);
  expect_clean();
}

TEST_CASE("vk shapes: dropout masks over (B,H,T,T) at large and 2^32-crossing offsets") {
  GpuScope g;
  const Dims d = dims();
  const Tensor att = randn({d.B, d.H, d.T, d.T}, 200);
  const uint64_t n = static_cast<uint64_t>(att.numel());
  for (uint64_t off : {uint64_t{0}, (uint64_t{1} << 32) - n / 2 - 1, uint64_t{5'000'000'003}, (uint64_t{1} << 40) + 6})
    gpu_vs_cpu(fmt::format("dropout p=0.2 offset {}", off), [&] { return ops::dropout(att, 0.2, 1337, off); }, 0);
  expect_clean();
}

TEST_CASE("vk shapes: grids over 65535 workgroups (folded into y) for every 1-D and row kernel") {
  // Cheap shapes whose grids fold even on lavapipe: 70000 rows of a row kernel; 2^24 + 2^17 + 7 elements of
  // a one-per-element kernel (66049 groups of 256, odd: the scalar paths). Past 65535 * 257 elements: a
  // y stride of NumWorkGroups.x * 1 (gl_WorkGroupSize.x folded to its default) leaves those unwritten.
  GpuScope g;
  const int64_t rows = 70000, n = (int64_t{1} << 24) + (int64_t{1} << 17) + 7;
  const Tensor r8 = randn({rows, 8}, 210), dy8 = randn({rows, 8}, 211), w8 = randn({8}, 212);
  const Tensor c16 = randn({rows / 16, 16, 16}, 213);
  gpu_vs_cpu("softmax 70000 rows", [&] { return ops::softmax(r8, false); }, kTol);
  gpu_vs_cpu("softmax causal 70000 rows", [&] { return ops::softmax(c16, true); }, kTol);
  gpu_vs_cpu("softmax_backward 70000 rows", [&] { return ops::softmax_backward(dy8, r8); }, kTol);
  gpu_vs_cpu("sum rows 70000", [&] { return ops::sum(r8, 1); }, kTol);
  // Column sums over 70000 rows (bias-gradient shape): chunked partial sums, as lavapipe ends any shader
  // loop after 65535 iterations.
  gpu_vs_cpu("sum columns over 70000 rows", [&] { return ops::sum(r8, 0); }, kTol);
  const auto go = on_gpu([&] { return ops::layernorm(r8, w8, w8, 1e-5); });
  const auto co = on_cpu([&] { return ops::layernorm(r8, w8, w8, 1e-5); });
  compare("layernorm 70000 rows", go.y, co.y, kTol);
  compare("layernorm rstd 70000 rows", go.rstd, co.rstd, kTol);
  const auto gg = on_gpu([&] { return ops::layernorm_backward(dy8, r8, w8, co.mean, co.rstd, true); });
  const auto cg = on_cpu([&] { return ops::layernorm_backward(dy8, r8, w8, co.mean, co.rstd, true); });
  compare("layernorm_backward dx 70000 rows", gg.dx, cg.dx, kTol);
  compare("layernorm_backward dw 70000 rows", gg.dw, cg.dw, kTol);
  const Tensor l3 = randn({rows, 3}, 214), t3 = idx_tensor({rows}, 3, 215);
  const auto ge = on_gpu([&] { return ops::cross_entropy(l3, t3, -1); });
  const auto ce = on_cpu([&] { return ops::cross_entropy(l3, t3, -1); });
  compare("cross_entropy lse 70000 rows", ge.lse, ce.lse, 1e-5);
  compare("cross_entropy loss 70000 rows", ge.loss, ce.loss, 1e-5);
  gpu_vs_cpu("cross_entropy_backward 70000 rows",
             [&] { return ops::cross_entropy_backward(l3, t3, ce.lse, 1.0, ce.count, -1); }, 1e-5);
  const Tensor big = randn({n}, 216), big2 = randu({n}, 217, 0.5f, 2.0f);
  gpu_vs_cpu("add 2^24+2^17+7 (scalar path)", [&] { return ops::add(big, big2); }, kExact);
  gpu_vs_cpu("exp 2^24+2^17+7 (scalar path)", [&] { return ops::exp(big); }, 1e-5);
  gpu_vs_cpu("gelu 2^24+2^17+7", [&] { return ops::gelu(big); }, 1e-5);
  gpu_vs_cpu("gelu_backward 2^24+2^17+7", [&] { return ops::gelu_backward(big2, big); }, 1e-5);
  gpu_vs_cpu("dropout 2^24+2^17+7", [&] { return ops::dropout(big, 0.2, 7, 12345); }, 0);
  const Tensor e2 = randn({2, 8}, 218), ei = idx_tensor({n / 8}, 2, 219);
  gpu_vs_cpu("embedding 2^21 rows", [&] { return ops::embedding(e2, ei); }, 0);
  expect_clean();
}

namespace {
// One pre-LN MLP block, forward then a hand-written backward, all through ops:: (no host reads between):
// every op depends on the previous one, and buffers freed mid-chain get reused by later ops.
// x (N,C), w1 (4C,C), w2 (C,4C). Returns {y, dx, dw1, dw2} after `reps` repetitions (x <- y).
std::vector<Tensor> mlp_chain(Tensor x, const Tensor& w1, const Tensor& w2, const Tensor& lw, int reps) {
  std::vector<Tensor> out;
  for (int r = 0; r < reps; ++r) {
    const auto ln = ops::layernorm(x, lw, Tensor(), 1e-5);
    const Tensor h = ops::matmul(ln.y, w1, false, true);   // (N,4C)
    const Tensor a = ops::gelu(h);
    const Tensor o = ops::matmul(a, w2, false, true);      // (N,C)
    const Tensor y = ops::add(x, ops::scale(o, 0.5));
    // Backward of sum(y * y) / 2 through the block (dy = y).
    const Tensor dy = y;
    const Tensor da = ops::matmul(ops::scale(dy, 0.5), w2, false, false);  // (N,4C)
    const Tensor dw2 = ops::matmul(ops::scale(dy, 0.5), a, true, false);   // (C,4C)
    const Tensor dh = ops::gelu_backward(da, h);
    const Tensor dw1 = ops::matmul(dh, ln.y, true, false);                 // (4C,C)
    const Tensor dln = ops::matmul(dh, w1, false, false);                  // (N,C)
    const auto lg = ops::layernorm_backward(dln, x, lw, ln.mean, ln.rstd, false);
    const Tensor dx = ops::add(dy, lg.dx);
    out = {y, dx, dw1, dw2, lg.dw};
    x = ops::scale(y, 0.25);
  }
  return out;
}
}  // namespace

TEST_CASE("vk shapes: a chain of dependent forward and backward ops without host syncs matches the CPU") {
  GpuScope g;
  const Dims d = dims();
  const Tensor x = randn({d.N(), d.C}, 220), w1 = randn({4 * d.C, d.C}, 221, 0.05), w2 = randn({d.C, 4 * d.C}, 222, 0.05);
  const Tensor lw = randu({d.C}, 223, 0.5f, 1.5f);
  auto& q = gpu().runtime().queue();
  gpu().sync();
  const auto s0 = q.stats();
  const int64_t gpu0 = dispatch_stats().gpu_ops;
  const auto gout = mlp_chain(x, w1, w2, lw, 2);
  CHECK(dispatch_stats().gpu_ops - gpu0 >= 2 * 15);  // everything above ran on the GPU
  CHECK(q.stats().syncs == s0.syncs);                // and nothing waited for the GPU yet
  CHECK(q.stats().bytes_down == s0.bytes_down);
  const auto cout = on_cpu([&] { return mlp_chain(x, w1, w2, lw, 2); });
  const char* names[] = {"chain y", "chain dx", "chain dw1", "chain dw2", "chain dlnw"};
  for (size_t i = 0; i < gout.size(); ++i) compare(names[i], gout[i], cout[i], 1e-3);
  expect_clean();
}

TEST_CASE("vk shapes: host writes between GPU uses of one tensor are ordered (WAR/RAW through the queue)") {
  GpuScope g;
  const Dims d = dims();
  Tensor x = randn({d.B, d.H, d.T, d.T}, 230);
  const Tensor w = randn({d.T, d.D}, 231);
  // GPU reads x (queued, not run), then the host overwrites x; the next upload must wait for that read.
  const Tensor y1 = ops::matmul(x, w);
  const Tensor y1_cpu = on_cpu([&] { return ops::matmul(x, w); });
  float* p = x.mutable_data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = -p[i] * 0.5f;
  const Tensor y2 = ops::matmul(x, w);
  const Tensor y3 = ops::softmax(ops::add(x, ops::matmul(y2, w, false, true)), true);  // (B,H,T,T)
  const Tensor y2_cpu = on_cpu([&] { return ops::matmul(x, w); });
  const Tensor y3_cpu = on_cpu([&] { return ops::softmax(ops::add(x, ops::matmul(y2_cpu, w, false, true)), true); });
  compare("read before host write", y1, y1_cpu, kTol);
  compare("read after host write", y2, y2_cpu, kTol);
  compare("dependent softmax", y3, y3_cpu, kTol);
  expect_clean();
}
