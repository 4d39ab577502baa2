// The GPU matmul kernels against the CPU: each SIMT tile variant (128- and 64-wide) at sizes that cut tiles
// and K steps mid-way, every transpose, batched and broadcast operands; the cooperative-matrix kernel where
// the device has it (NV coopmat: the GPU machine), against the CPU on f16-rounded operands.
// Dimension legend: M/K/N matmul, nb batches.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/dtype.h"
#include "vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
struct Case {
  int64_t nb, M, K, N;
};

// Runs every transpose combination of (nb, M, K) x (nb, K, N) on the GPU and the CPU; returns the kernel used.
std::string check_case(const Case& c, double rtol, double atol, bool round_f16 = false) {
  std::string kernel;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = randn(ta ? Shape{c.nb, c.K, c.M} : Shape{c.nb, c.M, c.K}, 100 + c.M);
      Tensor b = randn(tb ? Shape{c.nb, c.N, c.K} : Shape{c.nb, c.K, c.N}, 200 + c.N);
      if (round_f16) {  // the coopmat kernel rounds operands to f16: the reference multiplies the rounded values
        for (Tensor* t : {&a, &b}) {
          float* p = t->mutable_data<float>();
          for (int64_t i = 0; i < t->numel(); ++i) p[i] = f16_to_f32(f32_to_f16(p[i]));
        }
      }
      const Tensor got = on_gpu([&] { return ops::matmul(a, b, ta, tb); });
      expect_close(got, on_cpu([&] { return ops::matmul(a, b, ta, tb); }), rtol, atol,
                   fmt::format("{} x {}x{}x{} ta={} tb={}", c.nb, c.M, c.K, c.N, ta, tb));
      kernel = gpu().matmul_kernel(DType::f32, c.M, c.N, c.K, c.nb);
      if (gpu().matmul_splits(kernel, c.M, c.N, c.K, c.nb) > 1) kernel += " split";
    }
  return kernel;
}
}  // namespace

TEST_CASE("vk matmul SIMT kernels: 128-wide and 64-wide tiles match the CPU at tile-cutting sizes") {
  GpuScope g;
  gpu().set_matmul_mode(vk::MatmulMode::simt);
  // 64 x 2 x 2 = 256 tiles of 128: the 128-wide kernel; M, N = 129 leave a 1-row/col edge tile, K = 33 a partial step.
  CHECK(check_case({64, 129, 33, 129}, 1e-5, 1e-5) == "matmul_f32");
  // Few tiles: the 64-wide kernel; K = 17 cuts its 16-deep step, M = 65 / N = 3 cut the tile.
  CHECK(check_case({1, 65, 17, 3}, 1e-5, 1e-5) == "matmul_small_f32");
  CHECK(check_case({3, 1, 1, 1}, 1e-5, 1e-5) == "matmul_small_f32");
  CHECK(check_case({2, 17, 130, 70}, 1e-5, 1e-5) == "matmul_small_f32");
  // Few tiles and a long K (a weight gradient, K = B*T): split-K, K = 1000 cutting the last 256-deep slice.
  CHECK(check_case({1, 130, 1000, 33}, 1e-5, 1e-4) == "matmul_f32 split");
  CHECK(check_case({2, 5, 520, 3}, 1e-5, 1e-4) == "matmul_f32 split");
  // K = 4100 in 16 slices of 288 (257 rounded up to whole 32-deep steps): 15 slices cover it, none may be empty.
  // atol 5e-4: f32 rounding over a 4100-long sum (the H100 was 1.6e-4 off).
  CHECK(check_case({1, 130, 4100, 33}, 1e-5, 5e-4) == "matmul_f32 split");
  // A single matrix shared by every batch (stride 0): the GPT linear layers' weight.
  const Tensor x = randn({300, 4, 9}, 7), w = randn({9, 5}, 8);
  expect_close(on_gpu([&] { return ops::matmul(x, w); }), on_cpu([&] { return ops::matmul(x, w); }), 1e-5, 1e-5,
               "broadcast weight");
  // It runs as one 1200-row product (vk::flat_rows): few tiles, the 64-wide kernel.
  CHECK(vk::flat_rows(4, 9, 300, 4 * 9, 0, false) == 1200);
  CHECK(gpu().matmul_kernel(DType::f32, 1200, 5, 9, 1) == "matmul_small_f32");
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

TEST_CASE("vk matmul kernel choice: coopmat only where the device has NV cooperative matrices") {
  GpuScope g;
  const bool has = gpu().runtime().device().features().nv_coopmat_f16;
  gpu().set_matmul_mode(vk::MatmulMode::coopmat);
  CHECK(gpu().matmul_kernel(DType::f32, 512, 512, 64, 1) == (has ? "matmul_cm_f32" : "matmul_small_f32"));
  gpu().set_matmul_mode(vk::MatmulMode::automatic);
  CHECK(gpu().matmul_kernel(DType::f32, 512, 512, 64, 1) == "matmul_small_f32");  // f32 operands stay exact by default
  CHECK(gpu().matmul_kernel(DType::f16, 512, 512, 64, 1) == (has ? "matmul_cm_f16" : "matmul_small_f16"));
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
}

TEST_CASE("vk matmul coopmat tile choice by shape (the sweeps' rule; the choice is made on every device)") {
  GpuScope g;
  gpu().set_cm_tile("");
  // GPT-2 124M (B8 T1024): wide products on 128 x 64 tiles; the 768-wide weight gradients too, in enough K slices
  // for kTargetGroupsCm workgroups; the LM head's gradient (many tiles) on 128 x 64; large squares on 128 x 128;
  // a small grid that a short K cannot split (fewer than kSmallGrid workgroups) on 64 x 64.
  // With the KHR kernels (no B transposes) wide outputs and long products take 128 x 128 (the H200 sweeps), both
  // tiles without the register prefetch and with fragments pipelined ("f"); f16 squares the 128 x 128 p0 tile whose
  // K steps all stage with the per-piece checks ("p0c"), f32 squares the 128 x 128 without "f".
  const bool khr = gpu().runtime().device().features().khr_coopmat_f16;
  const std::string mid = khr ? "128x64w4k64s1p0f" : "128x64w4k64s1p0";
  const std::string wide = khr ? "128x128w4k64s1p0f" : mid;
  const std::string square = khr ? "128x128w4k64s1p0c" : "128x128w4k64s1";  // f16 out ("c": checked staging)
  // f16 outputs of M >= 8192 in one K slice of >= 256 tiles: 192 x 128 with KHR (GPT-2's forward and dx products).
  const std::string tall = khr ? "192x128w4k64s1p0" : wide;
  CHECK(std::string(gpu().cm_tile(8192, 50304, 768, 1).name) == (khr ? tall : square));  // LM head fwd
  CHECK(std::string(gpu().cm_tile(8192, 384, 768, 1).name) == mid);  // 129 tiles of 192 x 128: under a wave
  CHECK(std::string(gpu().cm_tile(16384, 384, 1536, 1).name) == (khr ? tall : mid));  // shakespeare_char's N = 384
  CHECK(std::string(gpu().cm_tile(8192, 2304, 768, 1).name) == tall);
  CHECK(std::string(gpu().cm_tile(8192, 768, 3072, 1).name) == (khr ? tall : mid));  // N = 768
  // LM head dx (K 50304: 128 x 128 would split it): whole K on 192 x 128 (cm_whole_k), f16 out only; not a forced tile.
  CHECK(std::string(gpu().cm_tile(8192, 768, 50304, 1).name) == (khr ? tall : wide));
  CHECK(gpu().cm_whole_k(8192, 768, 50304, 1) == khr);
  CHECK_FALSE(gpu().cm_whole_k(8192, 768, 50304, 1, true));  // f32 out
  CHECK_FALSE(gpu().cm_whole_k(8192, 768, 4096, 1));          // K under kWholeK
  CHECK_FALSE(gpu().cm_whole_k(4096, 768, 50304, 1));         // M under 8192
  CHECK(std::string(gpu().cm_tile(8192, 2304, 768, 1, true).name) == wide);  // f32 out: not 192 x 128
  // f16 out at a weight gradient's shape: 72 tiles of 128 x 64 in 4 slices (of 2048) are under kSmallGrid: 64 x 64.
  CHECK(std::string(gpu().cm_tile(768, 768, 8192, 1).name) == (khr ? "64x64w4k64s1p0f" : "64x64w4k64s1p0"));
  CHECK(std::string(gpu().cm_tile(768, 768, 8192, 1, true).name) == mid);
  // f16 outputs split K only in slices of 2048 or more: GPT-2's N = 768 products on 96 x 128 tiles stay whole, its
  // LM head's dx (K 50304) splits in two; a long K with one tile stops at K / 2048.
  CHECK(gpu().matmul_splits("matmul_cm_f16", 8192, 768, 3072, 1, 96, 128) == 1);
  CHECK(gpu().matmul_splits("matmul_cm_f16", 1024, 768, 50304, 8, 128, 128) == 2);
  CHECK(gpu().matmul_splits("matmul_cm_f16", 64, 64, 8192, 1, 64, 64) == 4);
  CHECK(gpu().matmul_splits("matmul_cm_f16", 768, 768, 8192, 1, 128, 64) == 4);  // 72 tiles: 11 slices would cut 745
  gpu().set_split_target(1188);  // ALPHA_VK_SPLIT_TARGET's sweeps: 72 tiles -> 17 slices, for f32 outputs only
  CHECK(gpu().matmul_splits("matmul_cm_f16", 768, 768, 8192, 1, 128, 64, true) == 17);
  CHECK(gpu().matmul_splits("matmul_cm_f16", 768, 768, 8192, 1, 128, 64) == 4);
  CHECK(gpu().matmul_splits("matmul_f16", 768, 768, 8192, 1, 128, 64) == 1);  // (SIMT f16: no split variant)
  gpu().set_split_target(0);
  // f32 outputs aim at 1024 workgroups while the slices keep 2048 of K, else at 768 like f16 outputs.
  CHECK(gpu().matmul_splits("matmul_cm_f16", 3072, 768, 8192, 1, 128, 64, true) == 4);   // 288 tiles (GPT-2 fc dW)
  CHECK(gpu().matmul_splits("matmul_cm_f16", 3072, 768, 8192, 1, 128, 64) == 3);
  CHECK(gpu().matmul_splits("matmul_cm_f16", 2304, 768, 8192, 1, 128, 64, true) == 4);   // 216: 5 would cut 1638
  CHECK(gpu().matmul_splits("matmul_cm_f16", 1152, 384, 16384, 1, 128, 64, true) == 15);  // 54 (shakespeare qkv dW)
  CHECK(std::string(gpu().cm_tile(3072, 768, 8192, 1).name) == mid);
  CHECK(std::string(gpu().cm_tile(2304, 768, 8192, 1).name) == mid);
  CHECK(std::string(gpu().cm_tile(768, 768, 256, 1).name) == (khr ? "64x64w4k64s1p0f" : "64x64w4k64s1p0"));
  CHECK(std::string(gpu().cm_tile(50304, 768, 8192, 1).name) == tall);
  CHECK(std::string(gpu().cm_tile(16384, 1536, 384, 1).name) == tall);  // shakespeare_char's MLP
  CHECK(std::string(gpu().cm_tile(1536, 384, 16384, 1).name) == mid);  // ... its weight gradient
  CHECK(std::string(gpu().cm_tile(4096, 4096, 4096, 1).name) == square);
  // f32 out (weight gradients): split over K, the staged 128 x 64 tile (GPT-2's proj dW, 144 tiles of 128 x 128);
  // the LM head's (2358 tiles, no split) and the squares keep 128 x 128 where KHR has it.
  CHECK(std::string(gpu().cm_tile(768, 3072, 8192, 1, false).name) == wide);
  CHECK(std::string(gpu().cm_tile(768, 3072, 8192, 1, true).name) == mid);
  CHECK(std::string(gpu().cm_tile(50304, 768, 8192, 1, true).name) == wide);
  CHECK(std::string(gpu().cm_tile(4096, 4096, 4096, 1, true).name) == (khr ? "128x128w4k64s1p0" : square));
  // Every tile the rule names exists as a variant, and a forced tile wins.
  gpu().set_cm_tile("128x128w8k64s1");
  CHECK(std::string(gpu().cm_tile(8192, 2304, 768, 1).name) == "128x128w8k64s1");
  gpu().set_cm_tile("");
}

TEST_CASE("vk matmul coopmat kernel (NV, f16 operands, f32 accumulation) matches the CPU on f16-rounded operands") {
  GpuScope g;
  if (!gpu().runtime().device().features().nv_coopmat_f16) {
    // lavapipe (CI) has no cooperative matrices; the kernel-choice test above checks the SIMT fallback.
    MESSAGE("device without NV cooperative matrices: the coopmat kernel runs on the GPU machine (scripts/gpu/gpu_suite.sh)");
    CHECK(gpu().matmul_kernel(DType::f32, 512, 512, 64, 1) != "matmul_cm_f32");
    return;
  }
  gpu().set_matmul_mode(vk::MatmulMode::coopmat);
  // Products of f16 values are exact in f32, so only the f32 summation order differs from the CPU.
  for (const Case& c : {Case{1, 1, 1, 1}, Case{2, 17, 33, 65}, Case{1, 129, 100, 130}, Case{4, 256, 64, 256},
                        Case{1, 1000, 384, 1152}})
    CHECK(check_case(c, 1e-4, 1e-4, true) == "matmul_cm_f32");
  CHECK(check_case({1, 384, 4096, 130}, 1e-4, 1e-3, true) == "matmul_cm_f32 split");  // a weight gradient's shape
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

TEST_CASE("vk matmul with f16 operands: f16 out within one f16 rounding of the CPU, every kernel path of the device") {
  GpuScope g;
  gpu().set_matmul_mode(vk::MatmulMode::automatic);
  const bool has = gpu().runtime().device().features().nv_coopmat_f16;
  // Sizes multiples of 8 (coopmat: 16-byte loads), ragged sizes, and a long K (coopmat: split-K through f32
  // partials, then one rounding to f16). The CPU multiplies the same f16 values in f32 and rounds once.
  for (const Case& c : {Case{2, 64, 32, 48}, Case{1, 17, 33, 65}, Case{1, 128, 1024, 40}, Case{3, 40, 24, 8},
                        Case{1, 264, 96, 520}}) {  // the last crosses 128- and 256-wide tile edges
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = ops::cast(randn(ta ? Shape{c.nb, c.K, c.M} : Shape{c.nb, c.M, c.K}, 300 + c.M), DType::f16);
        const Tensor b = ops::cast(randn(tb ? Shape{c.nb, c.N, c.K} : Shape{c.nb, c.K, c.N}, 400 + c.N), DType::f16);
        const Tensor got = on_gpu([&] { return ops::matmul(a, b, ta, tb); });
        CHECK(got.dtype() == DType::f16);
        // One f16 rounding of the result (2^-11 relative) plus f32 summation-order differences.
        expect_close(got, on_cpu([&] { return ops::matmul(a, b, ta, tb); }), 2e-3, 2e-3 * std::sqrt(double(c.K)),
                     fmt::format("f16 {} x {}x{}x{} ta={} tb={}", c.nb, c.M, c.K, c.N, ta, tb));
      }
    const std::string k = gpu().matmul_kernel(DType::f16, c.M, c.N, c.K, c.nb);
    CHECK(k == (has ? "matmul_cm_f16" : c.M * c.N * c.nb >= 128 * 128 * 256 ? "matmul_f16" : "matmul_small_f16"));
  }
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

TEST_CASE("vk matmul_f32 of f16 operands: the f32 product (no f16 rounding), every kernel path; linear_master's grads") {
  GpuScope g;
  gpu().set_matmul_mode(vk::MatmulMode::automatic);
  // Weight-gradient shapes: (R, out)^T (R, in) with a long R (split-K on coopmat devices) and ragged sizes.
  // The last: enough 128 x 128 tiles for the SIMT devices' large f16 kernel (matmul_f16_f32out).
  for (const Case& c : {Case{1, 24, 1000, 40}, Case{1, 17, 33, 65}, Case{1, 64, 4096, 72}, Case{1, 2048, 64, 2048}}) {
    const Tensor a = ops::cast(randn({c.K, c.M}, 500 + c.M), DType::f16), b = ops::cast(randn({c.K, c.N}, 600 + c.N), DType::f16);
    const Tensor got = on_gpu([&] { return ops::matmul_f32(a, b, true, false); });
    const Tensor want = on_cpu([&] { return ops::matmul_f32(a, b, true, false); });
    CHECK(got.dtype() == DType::f32);
    CHECK(want.dtype() == DType::f32);
    // f32 summation-order differences only: every path (coopmat, SIMT f16) writes its f32 accumulators unrounded.
    expect_close(got, want, 1e-5, 1e-5 * std::sqrt(double(c.K)), fmt::format("matmul_f32 {}x{}x{}", c.M, c.K, c.N));
  }
  // linear_master: f16 x against an f32 weight: y f16, dx f16, dw f32 equal to the f32 GEMM of the same f16 values.
  const Tensor gy = ops::cast(randn({3, 50, 40}, 612), DType::f16);
  const auto run = [&] {  // fresh leaves each run; the loss sum(y * gy) seeds dy = gy
    Tensor x = ops::cast(randn({3, 50, 24}, 610), DType::f16), w = randn({40, 24}, 611);
    x.set_requires_grad(true), w.set_requires_grad(true);
    const Tensor y = ag::linear_master(x, w, Tensor());
    ag::backward(ag::sum_all(ag::mul(y, gy)));
    return std::vector<Tensor>{y, x.grad(), w.grad(), x};
  };
  const int64_t ops0 = dispatch_stats().gpu_ops;
  const auto gg = run();  // under the GpuScope: every op on the GPU
  CHECK(dispatch_stats().gpu_ops - ops0 >= 5);
  const auto cg = on_cpu(run);
  const Tensor& x = cg[3];
  CHECK(gg[0].dtype() == DType::f16);
  CHECK(gg[1].dtype() == DType::f16);
  CHECK(gg[2].dtype() == DType::f32);
  expect_close(gg[0], cg[0], 2e-3, 2e-3, "y");
  expect_close(gg[1], cg[1], 2e-3, 2e-3, "dx");
  const Tensor dw_ref = on_cpu([&] {
    return ops::matmul_f32(ops::reshape(gy, {-1, 40}), ops::reshape(x, {-1, 24}), true, false); });
  expect_close(cg[2], dw_ref, 0, 0, "dw (CPU) is the f32 GEMM");
  expect_close(gg[2], dw_ref, 1e-5, 1e-5, "dw (GPU)");
  CHECK_THROWS_AS(ag::linear_master(cg[2], cg[2], Tensor()), DTypeError);
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

TEST_CASE("vk matmul: batches of A against one shared B run as one product of nb M rows, as the CPU computes them") {
  // Which products are one: back-to-back row-major A matrices and a single B (a linear layer's dx = dy @ W).
  CHECK(vk::flat_rows(1024, 768, 8, 1024 * 768, 0, false) == 8192);
  CHECK(vk::flat_rows(1024, 768, 8, 1024 * 768, 0, true) == 0);       // A transposed: its batches' rows interleave
  CHECK(vk::flat_rows(1024, 768, 8, 1024 * 768, 768 * 64, false) == 0);  // one B per batch
  CHECK(vk::flat_rows(1024, 768, 8, 0, 0, false) == 0);                // one A for every batch
  CHECK(vk::flat_rows(1024, 768, 1, 0, 0, false) == 0);
  GpuScope g;
  gpu().set_matmul_mode(vk::MatmulMode::automatic);
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  // Small on lavapipe; on coopmat devices also GPT-2's dx and LM-head shapes, whose 8 x 1024 rows take the tile of
  // M = 8192 (192 x 128), including a ragged N and a K that splits (f32 partials over the flattened rows).
  std::vector<Case> cases{{3, 40, 24, 16}, {5, 17, 33, 9}, {4, 64, 1048, 24}};
  if (cm) cases.insert(cases.end(), {{8, 1024, 768, 768}, {8, 1024, 3072, 768}, {8, 1024, 768, 1000}, {2, 1024, 8192, 256}});
  for (const Case& c : cases)
    for (bool tb : {false, true}) {
      const Tensor a = ops::cast(randn({c.nb, c.M, c.K}, 700 + c.M), DType::f16);
      const Tensor b = ops::cast(randn(tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, 800 + c.N), DType::f16);
      const Tensor got = on_gpu([&] { return ops::matmul(a, b, false, tb); });
      CHECK(got.shape() == Shape{c.nb, c.M, c.N});
      expect_close(got, on_cpu([&] { return ops::matmul(a, b, false, tb); }), 2e-3, 2e-3 * std::sqrt(double(c.K)),
                   fmt::format("shared B {} x {}x{}x{} tb={}", c.nb, c.M, c.K, c.N, tb));
      // The same bits as the 2-D product of the stacked rows: it is that product.
      const Tensor flat = on_gpu([&] { return ops::matmul(ops::reshape(a, {c.nb * c.M, c.K}), b, false, tb); });
      expect_close(ops::reshape(got, {c.nb * c.M, c.N}), flat, 0, 0, "shared B as one product");
    }
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

TEST_CASE("vk matmul coopmat block tiles: every 16-byte-load f16 tile matches the CPU at tile-cutting sizes") {
  GpuScope g;
  // ALPHA_VK_CM_TILE names are checked on every device; the kernels themselves need NV cooperative matrices.
  CHECK_THROWS_AS(gpu().set_cm_tile("3x3w1k1s1"), ValueError);
  if (!gpu().runtime().device().features().nv_coopmat_f16) {
    MESSAGE("device without NV cooperative matrices: the coopmat tiles run on the GPU machine (scripts/gpu)");
    return;
  }
  gpu().set_matmul_mode(vk::MatmulMode::automatic);
  // Multiples of 8 (16-byte loads) that cut 64/128/256-wide tiles and K steps mid-way; a batch; a long K with few
  // tiles (split-K: f32 partials summed in order, one f16 rounding); whole fragments (direct stores) and edges;
  // M, N multiples of 128 with K a multiple of 16 but not of 64 (a partial last K step in whole tiles).
  const Case cases[] = {{1, 8, 8, 8},       {2, 72, 40, 136},   {1, 264, 96, 520},   {1, 136, 1048, 200},
                        {1, 256, 64, 256},  {1, 128, 48, 128},  {2, 256, 208, 384},  {1, 128, 2064, 256},
                        {1, 136, 4168, 72}};
  // Every tile, then the trial tiles (f16 outputs of one K slice, no f32-partials variant: long K runs whole too).
  for (const std::span<const vk::CmTile> list : {vk::cm_tiles(), vk::cm_trials()})
    for (const vk::CmTile& t : list) {
      gpu().set_cm_tile(t.name);
      for (const Case& c : cases)
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            const Tensor a = ops::cast(randn(ta ? Shape{c.nb, c.K, c.M} : Shape{c.nb, c.M, c.K}, 500 + c.M), DType::f16);
            const Tensor b = ops::cast(randn(tb ? Shape{c.nb, c.N, c.K} : Shape{c.nb, c.K, c.N}, 600 + c.N), DType::f16);
            const Tensor got = on_gpu([&] { return ops::matmul(a, b, ta, tb); });
            expect_close(got, on_cpu([&] { return ops::matmul(a, b, ta, tb); }), 2e-3, 2e-3 * std::sqrt(double(c.K)),
                         fmt::format("tile {} f16 {} x {}x{}x{} ta={} tb={}", t.name, c.nb, c.M, c.K, c.N, ta, tb));
          }
    }
  // The walk's band height orders the tiles and nothing else: each walk twin gives its tile's bits at every band
  // height (products of several bands and a partial last band, a long K, a batch). K stays under 2 kMinSlice, so
  // the base tile runs whole K as the twins do (at K 4168 it split in two: one f16 rounding apart on the H100).
  for (const vk::CmTile& t : vk::cm_trials()) {
    if (!t.walk) continue;
    const std::string base_name = std::string(t.name).substr(0, std::strlen(t.name) - 2);  // without "_w"
    for (const Case& c : {Case{1, 1032, 72, 2056}, Case{2, 264, 4088, 520}}) {
      REQUIRE(gpu().matmul_splits("matmul_cm", c.M, c.N, c.K, c.nb, 128, 128, false) == 1);
      const Tensor a = ops::cast(randn({c.nb, c.M, c.K}, 520), DType::f16);
      const Tensor b = ops::cast(randn({c.nb, c.K, c.N}, 521), DType::f16);
      gpu().set_cm_tile(base_name);
      const Tensor base = on_gpu([&] { return ops::matmul(a, b, false, false); });
      gpu().set_cm_tile(t.name);
      for (const uint32_t w : {0u, 1u, 3u, 16u, 65535u}) {
        gpu().set_cm_walk(w);
        CHECK(gpu().cm_walk() == (w == 0 ? vk::kCmWalk : w));
        expect_close(on_gpu([&] { return ops::matmul(a, b, false, false); }), base, 0, 0,
                     fmt::format("{} walk {} {}x{}x{} (bitwise as {})", t.name, w, c.M, c.K, c.N, base_name));
      }
      gpu().set_cm_walk(0);
    }
  }
  // The LM head dx's choice (cm_whole_k): 192 x 128 over the whole K that a forced 192 x 128 would split. Its bits
  // are those of the tile's walk twin (f16 out only, so one slice); its first rows match the CPU.
  if (gpu().runtime().device().features().khr_coopmat_f16) {
    const int64_t M = 8192, K = vk::VulkanBackend::kWholeK, N = 768;
    gpu().set_cm_tile("");
    REQUIRE(gpu().cm_whole_k(M, N, K, 1));
    REQUIRE(gpu().matmul_splits("matmul_cm_f16", M, N, K, 1, 192, 128) > 1);
    const Tensor a = ops::cast(randn({M, K}, 530), DType::f16), b = ops::cast(randn({K, N}, 531), DType::f16);
    const Tensor got = on_gpu([&] { return ops::matmul(a, b, false, false); });
    gpu().set_cm_tile("192x128w4k64s1p0_w");
    expect_close(got, on_gpu([&] { return ops::matmul(a, b, false, false); }), 0, 0, "whole K (bitwise as its walk twin)");
    const Tensor top = ops::cat({a.narrow(0, 0, 64)}, 0);
    expect_close(ops::cat({got.narrow(0, 0, 64)}, 0), on_cpu([&] { return ops::matmul(top, b, false, false); }), 2e-3,
                 2e-3 * std::sqrt(double(K)), "whole K, first 64 rows against the CPU");
  }
  // A forced tile without the f32-output variant refuses an f32-output product by name (no missing pipeline).
  gpu().set_cm_tile(vk::cm_trials()[0].name);
  const Tensor a = ops::cast(randn({64, 32}, 510), DType::f16), b = ops::cast(randn({32, 64}, 511), DType::f16);
  CHECK_THROWS_AS(ops::matmul_f32(a, b, false, false), ValueError);
  gpu().set_cm_tile("");
  gpu().set_matmul_mode(vk::matmul_mode_from_env());
  expect_clean();
}

// A count from the environment: unset gives `unset`, `good` parses to `parsed`, each of `bad` throws naming the variable.
template <class F>
void check_env_count(const char* var, F parse, int64_t unset, const char* good, int64_t parsed,
                     std::initializer_list<const char*> bad) {
  unsetenv(var);
  CHECK(int64_t(parse()) == unset);
  setenv(var, good, 1);
  CHECK(int64_t(parse()) == parsed);
  for (const char* b : bad) {
    setenv(var, b, 1);
    CHECK_THROWS_WITH_AS(parse(), doctest::Contains(var), ValueError);
  }
  unsetenv(var);
}

TEST_CASE("ALPHA_VK_CM_WALK: unset is the default band, 1 to 65535 tiles replace it, anything else is an error") {
  check_env_count("ALPHA_VK_CM_WALK", vk::cm_walk_from_env, vk::kCmWalk, "12", 12, {"0", "-5", "12x", "lots", "65536"});
  GpuScope g;
  CHECK_THROWS_AS(gpu().set_cm_walk(65536), ValueError);
}

TEST_CASE("ALPHA_VK_SPLIT_TARGET: unset is the default target, a positive count replaces it, anything else is an error") {
  check_env_count("ALPHA_VK_SPLIT_TARGET", vk::split_target_from_env, 0, "1188", 1188,
                  {"0", "-5", "12x", "lots", "99999999999"});
}

TEST_CASE("ALPHA_VK_PTX_MIN_K: unset is the default depth, a positive depth replaces it, anything else is an error") {
  check_env_count("ALPHA_VK_PTX_MIN_K", vk::ptx_min_k_from_env, vk::VulkanBackend::kPtxMinK, "1", 1, {"0", "-5", "12x", "deep", "99999999999"});
}

TEST_CASE("ALPHA_VK_PTX_TN: unset and 0 are off, 1 on, anything else is an error naming it") {
  unsetenv("ALPHA_VK_PTX_TN");
  CHECK_FALSE(vk::ptx_tn_from_env());
  setenv("ALPHA_VK_PTX_TN", "0", 1);
  CHECK_FALSE(vk::ptx_tn_from_env());
  setenv("ALPHA_VK_PTX_TN", "1", 1);
  CHECK(vk::ptx_tn_from_env());
  for (const char* bad : {"2", "yes", "on", "-1"}) {
    setenv("ALPHA_VK_PTX_TN", bad, 1);
    CHECK_THROWS_WITH_AS(vk::ptx_tn_from_env(), doctest::Contains("ALPHA_VK_PTX_TN"), ValueError);
  }
  unsetenv("ALPHA_VK_PTX_TN");
}
