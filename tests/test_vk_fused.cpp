// Fused linear layers (core/ops_fused.cpp): bias, GELU and GELU's backward in the epilogues of the f16 coopmat GEMM
// tiles (spirv/matmul_cm.comp EPI_*), against the CPU composition, and ag::mlp_gelu_master's gradients against the
// unfused ops. Devices without NV cooperative matrices (lavapipe) run the composed fallback; on the GPU machine
// the fused kernels must have run (kernel counts).
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/dtype.h"
#include "vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
const bool kKernelCounts = setenv("ALPHA_VK_STATS", "1", 0) == 0;  // before the shared backend is built

// Dispatches of fused epilogue kernels (names ending in the epilogue) since `before`.
int64_t epilogue_runs(const std::map<std::string, int64_t>& before, const std::string& epi) {
  int64_t n = 0;
  for (const auto& [name, count] : gpu().runtime().kernel_counts()) {
    if (name.size() < epi.size() + 1 || name.compare(name.size() - epi.size() - 1, std::string::npos, "_" + epi) != 0)
      continue;
    const auto it = before.find(name);
    n += count - (it == before.end() ? 0 : it->second);
  }
  return n;
}

Tensor f16(const Tensor& t) { return ops::cast(t, DType::f16); }
}  // namespace

TEST_CASE("vk fused linear epilogues (bias, GELU, GELU backward) match the CPU composition at tile-cutting shapes") {
  GpuScope g;
  REQUIRE(kKernelCounts);
  const bool cm = gpu().runtime().device().features().nv_coopmat_f16;
  struct Shape3 { int64_t rows, in, out; };
  // Rows and columns that cut the 64/128-row tiles and 16-column fragments (out % 16 == 8: half fragments through
  // the edge path), and a GPT-like block.
  for (const Shape3 s : {Shape3{200, 64, 72}, Shape3{136, 40, 24}, Shape3{512, 128, 256}}) {
    const std::string at = fmt::format("rows {} in {} out {}", s.rows, s.in, s.out);
    const Tensor x = f16(randn({2, s.rows / 2, s.in}, 700 + s.out)), w = f16(randn({s.out, s.in}, 701, 0.3));
    const Tensor b = f16(randn({s.out}, 702)), w2 = f16(randn({s.in, s.out}, 703, 0.3));
    const Tensor dy = f16(randn({2, s.rows / 2, s.in}, 704));
    const auto k0 = gpu().runtime().kernel_counts();

    const Tensor y = on_gpu([&] { return ops::linear(x, w, b); }, cm ? 1 : 2);  // fallback: matmul, add
    CHECK(y.dtype() == DType::f16);
    CHECK(y.shape() == Shape{2, s.rows / 2, s.out});
    // f16 outputs: one rounding (fused: of the f32 sum; the CPU rounds the product and the sum)
    expect_close(y, on_cpu([&] { return ops::linear(x, w, b); }), 2e-3, 4e-3, "linear " + at);

    for (const bool bias : {true, false}) {
      const Tensor bb = bias ? b : Tensor();
      const ops::LinearGeluOut got = on_gpu([&] { return ops::linear_gelu(x, w, bb); }, cm ? 1 : bias ? 3 : 2);
      const ops::LinearGeluOut want = on_cpu([&] { return ops::linear_gelu(x, w, bb); });
      CHECK(got.h.shape() == want.h.shape());
      expect_close(got.h, want.h, 2e-3, 4e-3, fmt::format("linear_gelu h, bias {}, {}", bias, at));
      // g from the GPU's own h, so h's rounding differences do not move it (GELU's slope is up to ~1.13)
      const Tensor g_of_h = on_cpu([&] { return ops::gelu(got.h); });
      expect_close(got.g, g_of_h, 2e-3, 2e-3, fmt::format("linear_gelu g, bias {}, {}", bias, at));
    }

    const Tensor h = on_cpu([&] { return ops::linear_gelu(x, w, b).h; });
    const Tensor dh = on_gpu([&] { return ops::matmul_gelu_backward(dy, w2, h); }, cm ? 1 : 2);
    CHECK(dh.shape() == h.shape());
    expect_close(dh, on_cpu([&] { return ops::matmul_gelu_backward(dy, w2, h); }), 3e-3, 6e-3,
                 "matmul_gelu_backward " + at);

    for (const char* epi : {"bias", "gelu", "bias_gelu", "dgelu"}) {
      INFO(at, " epilogue ", epi);
      CHECK(epilogue_runs(k0, epi) == (cm ? 1 : 0));
    }
  }
  // Bad shapes are errors on every device.
  const Tensor x = f16(randn({4, 8}, 705)), w = f16(randn({16, 8}, 706));
  CHECK_THROWS_AS(ops::linear(x, w, f16(randn({8}, 707))), ShapeError);
  CHECK_THROWS_AS(ops::linear_gelu(x, f16(randn({16, 4}, 708)), Tensor()), ShapeError);
  CHECK_THROWS_AS(ops::matmul_gelu_backward(f16(randn({4, 16}, 709)), w, f16(randn({4, 16}, 710))), ShapeError);
  expect_clean();
}

TEST_CASE("mlp_gelu_master: the fused MLP node's output and gradients match the unfused ops") {
  GpuScope g;
  const int64_t C = 48, F = 192;  // a GPT MLP: (B, T, C) -> (B, T, 4C) -> (B, T, C)
  const Tensor gy = f16(randn({2, 40, C}, 720));
  // fresh leaves each run; the loss sum(y * gy) seeds dy = gy. fused: mlp_gelu_master, else gelu and linear_master.
  const auto run = [&](bool fused, bool bias) {
    Tensor x = f16(randn({2, 40, C}, 721)), w1 = randn({F, C}, 722, 0.2), w2 = randn({C, F}, 723, 0.2);
    Tensor b1 = randn({F}, 724, 0.5), b2 = randn({C}, 725, 0.5);
    for (Tensor* t : {&x, &w1, &w2, &b1, &b2}) t->set_requires_grad(true);
    const Tensor b1h = bias ? ag::cast(b1, DType::f16) : Tensor(), b2h = bias ? ag::cast(b2, DType::f16) : Tensor();
    Tensor act;
    const Tensor y = fused ? ag::mlp_gelu_master(x, w1, b1h, w2, b2h, &act)
                           : ag::linear_master(act = ag::gelu(ag::linear_master(x, w1, b1h)), w2, b2h);
    ag::backward(ag::sum_all(ag::mul(y, gy)));
    std::vector<Tensor> r{y, act, x.grad(), w1.grad(), w2.grad()};
    if (bias) r.insert(r.end(), {b1.grad(), b2.grad()});
    return r;
  };
  for (const bool bias : {true, false}) {
    const auto ref = on_cpu([&] { return run(false, bias); });
    for (const bool gpu_run : {false, true}) {
      const auto got = gpu_run ? run(true, bias) : on_cpu([&] { return run(true, bias); });
      REQUIRE(got.size() == ref.size());
      const char* names[] = {"y", "act", "dx", "dw1", "dw2", "db1", "db2"};
      CHECK(got[3].dtype() == DType::f32);
      CHECK(got[4].dtype() == DType::f32);
      for (size_t i = 0; i < got.size(); ++i) {
        // The CPU's fused node is the same composition (bitwise); the GPU's rounds once per fused kernel.
        const double tol = gpu_run ? 1e-2 : 0.0;
        expect_close(got[i], ref[i], tol, tol, fmt::format("{} (bias {}, {})", names[i], bias, gpu_run ? "GPU" : "CPU"));
      }
    }
  }
  CHECK_THROWS_AS(ag::mlp_gelu_master(randn({2, C}, 726), randn({F, C}, 727), Tensor(), randn({C, F}, 728), Tensor()),
                  DTypeError);
  expect_clean();
}
