// The linear layer with its bias in the epilogue of the f16 coopmat GEMM tiles (core/ops_linear.cpp,
// spirv/matmul_cm.comp EPI_BIAS) against the CPU, and linear_master's bias gradient. Devices without NV cooperative
// matrices (lavapipe) run matmul then add; on the GPU machine the bias kernels must have run (kernel counts). The
// weight and bias gradients in one GEMM (ops::linear_weight_grads, spirv/matmul_cm.comp ROWSUM) and the residual add in
// the epilogue (ops::linear_residual, EPI_RESID) likewise.
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;  // before the shared backend is built

// Dispatches of the bias epilogue kernels (matmul_cm_f16_vec8_<tile>_bias, any tile) since `before`.
int64_t bias_runs(const std::map<std::string, int64_t>& before) {
  int64_t n = 0;
  const auto& now = gpu().runtime().kernel_counts();
  for (const vk::CmTile& t : vk::cm_tiles()) {
    const std::string name = std::string("matmul_cm_f16_vec8_") + t.name + "_bias";
    const auto a = now.find(name), b = before.find(name);
    n += (a == now.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
  }
  return n;
}

Tensor f16(const Tensor& t) { return ops::cast(t, DType::f16); }
}  // namespace

TEST_CASE("vk linear with the bias in the GEMM epilogue matches the CPU at tile-cutting shapes") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  struct Shape3 { int64_t rows, in, out; };
  // Rows and columns that cut the 64/128-row tiles and 16-column fragments (out % 16 == 8: half fragments through
  // the edge path), and a GPT-like block.
  for (const Shape3 s : {Shape3{200, 64, 72}, Shape3{136, 40, 24}, Shape3{512, 128, 256}}) {
    const std::string at = fmt::format("rows {} in {} out {}", s.rows, s.in, s.out);
    const Tensor x = f16(randn({2, s.rows / 2, s.in}, 700 + s.out)), w = f16(randn({s.out, s.in}, 701, 0.3));
    const Tensor b = f16(randn({s.out}, 702));
    const auto k0 = gpu().runtime().kernel_counts();
    const Tensor y = on_gpu([&] { return ops::linear(x, w, b); }, cm ? 1 : 2);  // else matmul, add
    CHECK(y.dtype() == DType::f16);
    CHECK(y.shape() == Shape{2, s.rows / 2, s.out});
    // One f16 rounding of the f32 sum (the CPU rounds the product, then the sum).
    expect_close(y, on_cpu([&] { return ops::linear(x, w, b); }), 2e-3, 4e-3, "linear " + at);
    INFO(at);
    CHECK(bias_runs(k0) == (cm ? 1 : 0));
    const Tensor y0 = on_gpu([&] { return ops::linear(x, w, Tensor()); });  // no bias: the plain matmul
    expect_close(y0, on_cpu([&] { return ops::matmul(x, w, false, true); }), 2e-3, 4e-3, "linear without bias " + at);
  }
  const Tensor x = f16(randn({4, 8}, 705)), w = f16(randn({16, 8}, 706));
  CHECK_THROWS_AS(ops::linear(x, w, f16(randn({8}, 707))), ShapeError);       // bias (in), not (out)
  CHECK_THROWS_AS(ops::linear(x, f16(randn({16, 4}, 708)), Tensor()), ShapeError);  // in 8 vs 4
  expect_clean();
}

TEST_CASE("linear_master with a bias: y, dx, dw and db match the CPU; the CPU's node equals matmul then add") {
  GpuScope g;
  const Tensor gy = f16(randn({3, 40, 72}, 712));
  // fresh leaves each run; the loss sum(y * gy) seeds dy = gy. fused: linear_master with the bias, else add after.
  const auto run = [&](bool with_bias_inside) {
    Tensor x = f16(randn({3, 40, 48}, 710)), w = randn({72, 48}, 711, 0.3), b = randn({72}, 713);
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    const Tensor b16 = ag::cast(b, DType::f16);
    const Tensor y = with_bias_inside ? ag::linear_master(x, w, b16) : ag::add(ag::linear_master(x, w, Tensor()), b16);
    ag::backward(ag::sum_all(ag::mul(y, gy)));
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  const auto ref = on_cpu([&] { return run(false); });
  const auto cpu = on_cpu([&] { return run(true); });
  const auto got = run(true);
  const char* names[] = {"y", "dx", "dw", "db"};
  for (size_t i = 0; i < ref.size(); ++i) {
    expect_close(cpu[i], ref[i], 0, 0, fmt::format("{} (CPU, bitwise)", names[i]));
    expect_close(got[i], ref[i], 1e-2, 1e-2, fmt::format("{} (GPU)", names[i]));
  }
  CHECK(got[2].dtype() == DType::f32);
  CHECK(got[3].dtype() == DType::f32);
  expect_clean();
}

TEST_CASE("linear_master with an f32 master bias: y as with its f16 cast, db the f32 column sum of dy (unrounded)") {
  GpuScope g;
  const Tensor gy = f16(randn({3, 40, 72}, 722));
  // Reference: the f16-cast bias (the cast's node rounds nothing on the way back: db would be the f16 sum widened).
  const auto run = [&](bool master_bias) {
    Tensor x = f16(randn({3, 40, 48}, 720)), w = randn({72, 48}, 721, 0.3), b = randn({72}, 723);
    for (Tensor* t : {&x, &w, &b}) t->set_requires_grad(true);
    const Tensor y = ag::linear_master(x, w, master_bias ? b : ag::cast(b, DType::f16));
    ag::backward(ag::sum_all(ag::mul(y, gy)));
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad()};
  };
  // The exact db: each column of gy summed in double (f16 values; 120 rows), then rounded to f32.
  const std::vector<double> v = gy.to_f64_vector();
  std::vector<float> exact(72, 0.0f);
  for (int64_t c = 0; c < 72; ++c) {
    double s = 0;
    for (int64_t r = 0; r < 120; ++r) s += v[static_cast<size_t>(r * 72 + c)];
    exact[static_cast<size_t>(c)] = static_cast<float>(s);
  }
  const Tensor db_exact = Tensor::from_vector(exact, {72});
  for (const bool gpu_run : {false, true}) {
    CAPTURE(gpu_run);
    const auto ref = gpu_run ? run(false) : on_cpu([&] { return run(false); });
    const auto got = gpu_run ? run(true) : on_cpu([&] { return run(true); });
    for (size_t i = 0; i < 3; ++i) expect_close(got[i], ref[i], 0, 0, "y, dx, dw as with the f16 bias (bitwise)");
    CHECK(got[3].dtype() == DType::f32);
    expect_close(got[3], db_exact, 1e-6, 1e-6, "db: f32 sums");
    // The f16-cast bias's gradient carries the f16 rounding (|db| ~ 10 here: steps of 2^-7 or 2^-6).
    CHECK(vktest::rel_err(ref[3], db_exact) > 1e-5);
  }
  expect_clean();
}

TEST_CASE("vk linear_weight_grads: dw bitwise as matmul_f32, db as the CPU's column sums, with and without split-K") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  struct Shape3 { int64_t rows, in, out; };
  const auto count = [&] {  // dispatches of the row-sum GEMMs so far
    int64_t n = 0;
    for (const auto& [name, c] : gpu().runtime().kernel_counts())
      if (name.find("_rowsum") != std::string::npos) n += c;
    return n;
  };
  // out cuts the 64/128-row tiles; rows (K) from one K step to many split-K slices with a partial last step.
  for (const Shape3 s : {Shape3{64, 48, 72}, Shape3{2056, 200, 136}, Shape3{8200, 64, 264}, Shape3{4096, 256, 8}}) {
    const std::string at = fmt::format("rows {} in {} out {}", s.rows, s.in, s.out);
    INFO(at);
    const Tensor gy = f16(randn({s.rows, s.out}, 740 + s.out)), x = f16(randn({s.rows, s.in}, 741 + s.in));
    const int64_t k0 = count();
    const ops::LinearWeightGrads d = ops::linear_weight_grads(gy, x);
    CHECK(count() - k0 == (cm ? 1 : 0));
    REQUIRE(d.dw.dtype() == DType::f32);
    REQUIRE(d.db.dtype() == DType::f32);
    CHECK(d.dw.shape() == Shape{s.out, s.in});
    CHECK(d.db.shape() == Shape{s.out});
    expect_close(d.dw, ops::matmul_f32(gy, x, true, false), 0, 0, "dw (bitwise as matmul_f32) " + at);
    expect_close(d.db, on_cpu([&] { return ops::sum_f32(gy, 0); }), 1e-5, 1e-4, "db " + at);
  }
  // Every tile with the variant, forced (the choice by shape above takes one or two): split and unsplit K.
  for (const vk::CmTile& t : vk::cm_tiles()) {
    if (!cm || !vk::has_rowsum_variant(t.name)) continue;
    struct Tile {
      ~Tile() { gpu().set_cm_tile(""); }
    } reset;
    gpu().set_cm_tile(t.name);
    for (const Shape3 s : {Shape3{136, 72, 200}, Shape3{8200, 64, 264}}) {
      const std::string at = fmt::format("tile {} rows {} in {} out {}", t.name, s.rows, s.in, s.out);
      INFO(at);
      const Tensor gy = f16(randn({s.rows, s.out}, 760)), x = f16(randn({s.rows, s.in}, 761));
      const int64_t k0 = count();
      const ops::LinearWeightGrads d = ops::linear_weight_grads(gy, x);
      CHECK(count() - k0 == 1);
      expect_close(d.dw, ops::matmul_f32(gy, x, true, false), 0, 0, "dw (bitwise as matmul_f32) " + at);
      expect_close(d.db, on_cpu([&] { return ops::sum_f32(gy, 0); }), 1e-5, 1e-4, "db " + at);
    }
  }
  CHECK_THROWS_AS(ops::linear_weight_grads(f16(randn({8, 4}, 750)), f16(randn({16, 4}, 751))), ShapeError);
  expect_clean();
}

TEST_CASE("vk linear_residual: the residual add in the GEMM epilogue, bitwise as linear then add") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  const auto count = [&] {  // dispatches of the residual epilogue kernels so far
    int64_t n = 0;
    for (const auto& [name, c] : gpu().runtime().kernel_counts())
      if (name.size() > 6 && name.compare(name.size() - 6, 6, "_resid") == 0) n += c;
    return n;
  };
  struct Shape3 { int64_t rows, in, out; };
  const auto check = [&](const Shape3 s, bool bias, bool fused, const std::string& at) {
    INFO(at);
    const Tensor x = f16(randn({2, s.rows / 2, s.in}, 770 + s.out)), w = f16(randn({s.out, s.in}, 771, 0.3));
    const Tensor b = bias ? f16(randn({s.out}, 772)) : Tensor(), r = f16(randn({2, s.rows / 2, s.out}, 773, 4.0));
    const int64_t k0 = count();
    const Tensor y = ops::linear_residual(x, w, b, r);
    CHECK(count() - k0 == (fused ? 1 : 0));
    CHECK(y.shape() == r.shape());
    expect_close(y, ops::add(r, ops::linear(x, w, b)), 0, 0, "bitwise as linear, add");
    expect_close(y, on_cpu([&] { return ops::linear_residual(x, w, b, r); }), 2e-3, 8e-3, "vs CPU");
  };
  for (const Shape3 s : {Shape3{200, 64, 72}, Shape3{136, 40, 200}, Shape3{512, 128, 256}})
    for (const bool bias : {true, false})
      check(s, bias, cm, fmt::format("rows {} in {} out {} bias {}", s.rows, s.in, s.out, bias));
  check(Shape3{64, 20, 36}, true, false, "out 36: not a multiple of 8, linear then add");
  for (const vk::CmTile& t : vk::cm_tiles()) {  // every tile with the variants, forced
    if (!cm || !vk::has_bias_variants(t.name)) continue;
    struct Tile {
      ~Tile() { gpu().set_cm_tile(""); }
    } reset;
    gpu().set_cm_tile(t.name);
    check(Shape3{136, 72, 200}, true, true, fmt::format("tile {}", t.name));
  }
  const Tensor x = f16(randn({4, 8}, 774)), w = f16(randn({16, 8}, 775));
  CHECK_THROWS_AS(ops::linear_residual(x, w, Tensor(), f16(randn({4, 8}, 776))), ShapeError);  // r (4, 16)
  expect_clean();
}

TEST_CASE("linear_master_residual: y and the four gradients as linear_master then add (CPU and GPU bitwise)") {
  GpuScope g;
  const Tensor gy = f16(randn({3, 40, 72}, 782));
  const auto run = [&](bool fused) {
    Tensor x = f16(randn({3, 40, 48}, 780)), w = randn({72, 48}, 781, 0.3), b = randn({72}, 783);
    Tensor r = f16(randn({3, 40, 72}, 784));
    for (Tensor* t : {&x, &w, &b, &r}) t->set_requires_grad(true);
    const Tensor y = fused ? ag::linear_master_residual(x, w, b, r) : ag::add(r, ag::linear_master(x, w, b));
    ag::backward(ag::sum_all(ag::mul(y, gy)));
    return std::vector<Tensor>{y, x.grad(), w.grad(), b.grad(), r.grad()};
  };
  const char* names[] = {"y", "dx", "dw", "db", "dr"};
  const auto cref = on_cpu([&] { return run(false); }), cgot = on_cpu([&] { return run(true); });
  const auto gref = run(false), got = run(true);
  for (size_t i = 0; i < cref.size(); ++i) {
    expect_close(cgot[i], cref[i], 0, 0, fmt::format("{} (CPU, bitwise)", names[i]));
    expect_close(got[i], gref[i], 0, 0, fmt::format("{} (GPU, bitwise)", names[i]));
    expect_close(got[i], cref[i], 1e-2, 2e-2, fmt::format("{} (GPU vs CPU)", names[i]));
  }
  CHECK_THROWS_AS(ag::linear_master_residual(f16(randn({2, 8}, 785)), f16(randn({4, 8}, 786)), Tensor(),
                                             f16(randn({2, 4}, 787))), DTypeError);  // an f16 weight
  expect_clean();
}

TEST_CASE("deferred weight gradients: the bits of the walk's, contributions in walk order, accumulated grads too") {
  GpuScope g;
  const Tensor gy1 = f16(randn({2, 24, 40}, 790)), gy2 = f16(randn({2, 24, 40}, 791)), c = randn({40, 32}, 792);
  // One weight and bias in two linears with a plain op between them on the tape, two backward passes (the second
  // adds to the first's grads): each leaf gets four or six contributions, whose order sets the bits.
  const auto run = [&](bool defer) {
    ag::set_defer_leaf_grads(defer);
    Tensor x1 = f16(randn({2, 24, 32}, 793)), x2 = f16(randn({2, 24, 32}, 794));
    Tensor w = randn({40, 32}, 795, 0.3), b = randn({40}, 796);
    for (Tensor* t : {&x1, &x2, &w, &b}) t->set_requires_grad(true);
    for (int pass = 0; pass < 2; ++pass) {
      const Tensor y1 = ag::linear_master(x1, w, b);
      const Tensor mid = ag::sum_all(ag::mul(w, c));
      const Tensor y2 = ag::linear_master_residual(x2, w, b, y1);
      ag::backward(ag::add(ag::add(ag::sum_all(ag::mul(y1, gy1)), mid), ag::sum_all(ag::mul(y2, gy2))));
    }
    ag::set_defer_leaf_grads(true);
    return std::vector<Tensor>{x1.grad(), x2.grad(), w.grad(), b.grad()};
  };
  const int64_t jobs0 = ag::deferred_jobs_run();
  const auto got = run(true);
  CHECK(ag::deferred_jobs_run() - jobs0 == 4);  // two linears, two passes
  const int64_t jobs1 = ag::deferred_jobs_run();
  const auto ref = run(false);
  CHECK(ag::deferred_jobs_run() == jobs1);
  const char* names[] = {"dx1", "dx2", "dw", "db"};
  for (size_t i = 0; i < ref.size(); ++i) expect_close(got[i], ref[i], 0, 0, fmt::format("{} (bitwise)", names[i]));
  // On the CPU (no backend) nothing is deferred.
  const int64_t jobs2 = ag::deferred_jobs_run();
  const auto cpu = on_cpu([&] { return run(true); });
  CHECK(ag::deferred_jobs_run() == jobs2);
  for (size_t i = 0; i < ref.size(); ++i) expect_close(got[i], cpu[i], 1e-2, 2e-2, fmt::format("{} (GPU vs CPU)", names[i]));
  expect_clean();
}

TEST_CASE("layernorm_master: dw/db deferred with the bits of the walk's and of cast then layernorm, bias or none") {
  GpuScope g;
  const Tensor gy = f16(randn({2, 100, 24}, 800));
  // LayerNorm then a linear, two passes: dw/db of the norm are deferred beside the linear's dW (several row chunks,
  // so the chunk sums run after the deferred phase), and the second pass adds to the first's grads.
  const auto run = [&](bool defer, bool bias, bool master = true) {
    ag::set_defer_leaf_grads(defer);
    Tensor x = f16(randn({2, 100, 32}, 801));
    Tensor lw = randn({32}, 802, 0.5), lb = bias ? randn({32}, 803) : Tensor(), w = randn({24, 32}, 804, 0.3);
    for (Tensor* t : {&x, &lw, &lb, &w})
      if (t->defined()) t->set_requires_grad(true);
    const auto norm = [&] {
      return master ? ag::layernorm_master(x, lw, lb)
                    : ag::layernorm(x, ag::cast(lw, DType::f16), bias ? ag::cast(lb, DType::f16) : Tensor());
    };
    for (int pass = 0; pass < 2; ++pass) ag::backward(ag::sum_all(ag::mul(ag::linear_master(norm(), w, Tensor()), gy)));
    ag::set_defer_leaf_grads(true);
    return std::vector<Tensor>{x.grad(), lw.grad(), bias ? lb.grad() : Tensor(), w.grad()};
  };
  const char* names[] = {"dx", "ln dw", "ln db", "dw"};
  for (bool bias : {true, false}) {
    CAPTURE(bias);
    const int64_t jobs0 = ag::deferred_jobs_run();
    const auto got = run(true, bias);
    CHECK(ag::deferred_jobs_run() - jobs0 == 4);  // the norm and the linear, two passes
    const auto ref = run(false, bias), cast = run(false, bias, false);
    const auto cpu = on_cpu([&] { return run(true, bias); });
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!ref[i].defined()) continue;
      expect_close(got[i], ref[i], 0, 0, fmt::format("{} (bitwise)", names[i]));
      expect_close(got[i], cast[i], 0, 0, fmt::format("{} (bitwise, as cast then layernorm)", names[i]));
      expect_close(got[i], cpu[i], 2e-2, 2e-2, fmt::format("{} (GPU vs CPU)", names[i]));
    }
  }
  // ALPHA_VK_CHECK compares each GPU result as it is recorded: the deferred norms' sums must not be pending then.
  {
    set_gpu_check(true);
    struct Off {
      ~Off() { set_gpu_check(false); }
    } off;
    std::vector<Tensor> walk, deferred;
    CHECK_NOTHROW(walk = run(false, true));
    CHECK_NOTHROW(deferred = run(true, true));
    for (size_t i = 0; i < walk.size() && i < deferred.size(); ++i)
      expect_close(deferred[i], walk[i], 0, 0, fmt::format("{} (checked)", names[i]));
  }
  CHECK_THROWS_AS(ag::layernorm_master(randn({4, 8}, 805), randn({8}, 806), Tensor()), DTypeError);  // f32 x
  expect_clean();
}

TEST_CASE("layernorm residual: x's gradient so far is added in LayerNorm's dx pass with the separate add's bits") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  // y = x + linear(layernorm(x)), two passes: the walk reaches the norm with x's residual gradient (and, in the
  // second pass, the first pass's) in its slot; the 32 columns take the f16 4-wide kernel, 30 the separate add.
  const bool fuse0 = ag::fuse_grad_accumulation();
  const auto run = [&](bool fuse, int64_t C) {
    ag::set_fuse_grad_accumulation(fuse);
    const Tensor gy = f16(randn({2, 100, C}, 810));
    Tensor x = f16(randn({2, 100, C}, 811));
    Tensor lw = randn({C}, 812, 0.5), lb = randn({C}, 813), w = randn({C, C}, 814, 0.3);
    for (Tensor* t : {&x, &lw, &lb, &w}) t->set_requires_grad(true);
    for (int pass = 0; pass < 2; ++pass)
      ag::backward(ag::sum_all(ag::mul(ag::add(x, ag::linear_master(ag::layernorm_master(x, lw, lb), w, Tensor())), gy)));
    ag::set_fuse_grad_accumulation(fuse0);
    return std::vector<Tensor>{x.grad(), lw.grad(), lb.grad(), w.grad()};
  };
  const char* names[] = {"dx", "ln dw", "ln db", "dw"};
  for (int64_t C : {32, 30}) {
    CAPTURE(C);
    const int64_t fused0 = kernel_runs("layernorm_bwd_dx_f16_vec4_acc");
    const auto got = run(true, C);
    CHECK(kernel_runs("layernorm_bwd_dx_f16_vec4_acc") - fused0 == (C % 4 == 0 ? 2 : 0));
    const auto ref = run(false, C);
    CHECK(kernel_runs("layernorm_bwd_dx_f16_vec4_acc") - fused0 == (C % 4 == 0 ? 2 : 0));  // off: not taken
    const auto cpu = on_cpu([&] { return run(true, C); });
    const auto cpu_ref = on_cpu([&] { return run(false, C); });
    for (size_t i = 0; i < ref.size(); ++i) {
      expect_close(got[i], ref[i], 0, 0, fmt::format("{} (bitwise)", names[i]));
      expect_close(cpu[i], cpu_ref[i], 0, 0, fmt::format("{} (CPU, bitwise)", names[i]));
      expect_close(got[i], cpu[i], 2e-2, 2e-2, fmt::format("{} (GPU vs CPU)", names[i]));
    }
  }
  // The op itself: acc must be x's shape and dtype.
  const Tensor x = f16(randn({4, 8}, 815)), w = f16(randn({8}, 816));
  const ops::LayerNormOut ln = ops::layernorm(x, w, Tensor(), 1e-5);
  CHECK_THROWS_AS(ops::layernorm_backward(x, x, w, ln.mean, ln.rstd, false, ops::LnGrads::dx, f16(randn({4, 4}, 817))),
                  ShapeError);
  expect_clean();
}

TEST_CASE("tied embedding: the token gradient is added into the head's deferred gradient in place, add's bits") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  // A tied f16 model in two passes: the head's weight gradient is deferred (or, with deferral off, computed in the
  // walk); the embedding's gradient then lands on it (and, in the second pass, on the first pass's total). Token 3
  // repeats; rows 20-39 are used by no position.
  const bool fuse0 = ag::fuse_grad_accumulation();
  const int64_t V = 40, C = 32;
  std::vector<int32_t> ids(24);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i % 2 ? 3 : int32_t(i % 20);
  const Tensor idx = Tensor::from_vector(ids, {2, 12});
  const auto run = [&](bool fuse) {
    ag::set_fuse_grad_accumulation(fuse);
    Tensor w = randn({V, C}, 820, 0.5);
    w.set_requires_grad(true);
    const Tensor gy = f16(randn({2, 12, V}, 821));
    for (int pass = 0; pass < 2; ++pass) {
      const Tensor x = ag::embedding_cast(w, idx, DType::f16);  // (2, 12, C) f16
      ag::backward(ag::sum_all(ag::mul(ag::linear_master(ag::gelu(x), w, Tensor()), gy)));
    }
    ag::set_fuse_grad_accumulation(fuse0);
    return w.grad();
  };
  for (const bool defer : {true, false}) {
    CAPTURE(defer);
    ag::set_defer_leaf_grads(defer);
    const int64_t fused0 = kernel_runs("embedding_bwd_rows_acc"), plain0 = kernel_runs("embedding_bwd_rows");
    const Tensor got = run(true);
    CHECK(kernel_runs("embedding_bwd_rows_acc") - fused0 == 2);
    CHECK(kernel_runs("embedding_bwd_rows") - plain0 == 0);
    const Tensor ref = run(false);
    CHECK(kernel_runs("embedding_bwd_rows_acc") - fused0 == 2);  // off: not taken
    CHECK(kernel_runs("embedding_bwd_rows") - plain0 == 2);
    expect_close(got, ref, 0, 0, "tied weight's gradient (bitwise)");
    const Tensor cpu = on_cpu([&] { return run(true); }), cpu_ref = on_cpu([&] { return run(false); });
    expect_close(cpu, cpu_ref, 0, 0, "tied weight's gradient (CPU, bitwise)");
    expect_close(got, cpu, 2e-2, 2e-2, "tied weight's gradient (GPU vs CPU)");
  }
  ag::set_defer_leaf_grads(true);
  expect_clean();
}

TEST_CASE("ALPHA_VK_CHECK mode covers the fused linears: a wrong GPU result throws naming the op") {
  GpuScope g;
  set_gpu_check(true);
  struct Off {
    ~Off() { set_gpu_check(false); }
  } off;
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  const Tensor x = f16(randn({2, 68, 64}, 730)), w = f16(randn({72, 64}, 731, 0.3)), b = f16(randn({72}, 732));
  const Tensor r = f16(randn({2, 68, 72}, 733));
  const std::pair<const char*, std::function<Tensor()>> ops_[] = {
      {"[linear]", [&] { return ops::linear(x, w, b); }},
      {"[linear_residual]", [&] { return ops::linear_residual(x, w, b, r); }}};
  for (const auto& [name, op] : ops_) {
    CAPTURE(name);
    CHECK_NOTHROW(op());
    corrupt_next_gpu_result();  // the fused kernel's output on coopmat devices, else the matmul before the add
    try {
      op();
      FAIL("the corrupted result was not reported");
    } catch (const GpuCheckError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find(cm ? name : "[matmul]") != std::string::npos);
    }
  }
  expect_clean();
}
