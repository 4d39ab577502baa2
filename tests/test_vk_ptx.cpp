// The PTX matmul path (ptx/matmul.cu through VK_NVX_binary_import, vk/nvx.cpp): the embedded module and its
// variant list on every machine; where the device has the extension (the GPU machine), every variant against the
// CPU at shapes of several block tiles, K from one step to several pipeline wraps, and the choice by shape. The path
// is on by default on Hopper GPUs (the GPU machine: gpu_suite.sh and ptx_check.sh run these), opt-in elsewhere.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/dtype.h"
#include "ptx/kernels.h"
#include "vk_test_util.h"

using namespace alpha;
using namespace alpha::vktest;

namespace {
// Hopper GPUs, the only ones whose drivers compile the sm_90a module (its variants run there, and must).
bool hopper_gpu() { return vk::hopper_name(gpu().runtime().device().features().name); }

bool ptx_path_off() {
  if (gpu().runtime().device().features().nvx_ptx) return false;
  MESSAGE("PTX path off (no VK_NVX_binary_import; not Hopper without ALPHA_VK_PTX=1; or ALPHA_VK_PTX=0)");
  return true;
}
}  // namespace

TEST_CASE("ptx modules: each listed variant is an entry of its module's PTX, with a whole launch shape") {
  const std::string_view sm80 = ptx::matmul_module(80), sm90 = ptx::matmul_module(90);
  CHECK(sm80.find(".target sm_80\n") != std::string_view::npos);
  CHECK(sm80.find("mma.sync.aligned.m16n8k16") != std::string_view::npos);
  // The Hopper module: clang's sm_80 output marked sm_90a / PTX 8.0 by the build (wgmma needs both).
  CHECK(sm90.find(".target sm_90a\n") != std::string_view::npos);
  CHECK(sm90.find(".version 8.0\n") != std::string_view::npos);
  CHECK(sm90.find("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16") != std::string_view::npos);
  for (const std::string_view text : {sm80, sm90}) {
    CHECK(text.find('\0') == std::string_view::npos);  // one C string: the driver stops at the first NUL
    CHECK(text.data()[text.size()] == '\0');
  }
  REQUIRE_FALSE(ptx::matmul_variants().empty());
  CHECK(ptx::matmul_variants()[0].sm == 90);  // Hopper's first: the choice by shape prefers them
  for (const ptx::MatmulVariant& v : ptx::matmul_variants()) {
    const std::string entry = fmt::format(".entry {}(", v.name);
    CHECK_MESSAGE(ptx::matmul_module(v.sm).find(entry) != std::string_view::npos, v.name);
    CHECK(ptx::matmul_module(v.sm == 90 ? 80 : 90).find(entry) == std::string_view::npos);
    CHECK(v.threads % (v.sm == 90 ? 128 : 32) == 0);  // whole warpgroups / warps
    CHECK(v.threads <= 1024);
    CHECK(v.shared_bytes == v.stages * (v.bm + v.bn) * v.bk * 2);
    CHECK(v.shared_bytes <= 227 * 1024);  // the most a Hopper block may have
    CHECK(ptx::find_matmul_variant(v.name) == &v);
  }
  CHECK(ptx::find_matmul_variant("ptx_nope") == nullptr);
}

TEST_CASE("ptx path default: on for Hopper device names only") {
  CHECK(vk::hopper_name("NVIDIA H100 80GB HBM3"));
  CHECK(vk::hopper_name("NVIDIA H200"));
  CHECK(vk::hopper_name("NVIDIA GH200 480GB"));
  CHECK_FALSE(vk::hopper_name("NVIDIA A100-SXM4-80GB"));
  CHECK_FALSE(vk::hopper_name("NVIDIA GeForce RTX 4090"));
  CHECK_FALSE(vk::hopper_name("llvmpipe (LLVM 15.0.6, 256 bits)"));
}

TEST_CASE("ptx tile choice: unknown names fail; with the path off no product takes it") {
  GpuScope g;
  CHECK_THROWS_AS(gpu().set_cm_tile("ptx_nope"), ValueError);
  const bool nvx = gpu().runtime().device().features().nvx_ptx;
  const char* first = ptx::matmul_variants()[0].name;
  if (!nvx) {
    CHECK(gpu().ptx_tile(4096, 4096, 4096, false, false, false) == nullptr);
    CHECK_THROWS_AS(gpu().set_cm_tile(first), ValueError);  // names the missing extension
    MESSAGE("PTX path off (no VK_NVX_binary_import; not Hopper without ALPHA_VK_PTX=1; or ALPHA_VK_PTX=0)");
    return;
  }
  const ptx::MatmulVariant* v = gpu().ptx_tile(4096, 4096, 4096, false, false, false);
  REQUIRE(v != nullptr);
  CHECK(!v->ta);
  CHECK(!v->tb);
  CHECK(gpu().ptx_tile(4096 + 8, 4096, 4096, false, false, false) == nullptr);  // not whole block tiles
  CHECK(gpu().ptx_tile(256, 256, 4096, false, false, false) == nullptr);        // a grid too small
  // Too short (shakespeare_char's K = 384 products): the coopmat tiles; at kPtxMinK the path again.
  constexpr int64_t kMinK = vk::VulkanBackend::kPtxMinK;
  CHECK(gpu().ptx_tile(16384, 1536, kMinK - 128, false, false, false) == nullptr);
  CHECK(gpu().ptx_tile(16384, 1536, kMinK, false, false, false) != nullptr);
  // The wave estimate: GPT-2's N = 768 dx products make 192 tiles of 128 x 256, 1-2 waves on 97-191 SMs (H100: 132),
  // and take 128-wide tiles; 4096^3 (512 of them, 2.7-5.3 waves) keeps 256.
  if (const uint32_t sms = gpu().runtime().device().features().sm_count; sms >= 97 && sms < 192) {
    const ptx::MatmulVariant* w = gpu().ptx_tile(8192, 768, 3072, false, false, false);
    REQUIRE(w != nullptr);
    CHECK(w->bn == 128);
    CHECK(v->bn == 256);
  }
  if (hopper_gpu())  // TN fits only sm_80 tiles, which a Hopper GPU leaves to the coopmat tiles by shape
    CHECK(gpu().ptx_tile(4096, 4096, 4096, true, false, false) == nullptr);
  gpu().set_cm_tile("128x128w4k64s1p0");  // a forced coopmat tile keeps every product there
  CHECK(gpu().ptx_tile(4096, 4096, 4096, false, false, false) == nullptr);
  gpu().set_cm_tile(first);  // a forced variant: the products it fits, whatever their grid
  CHECK(gpu().ptx_tile(256, 256, 4096, false, false, false) == ptx::find_matmul_variant(first));
  gpu().set_cm_tile("");
}

TEST_CASE("ptx matmul variants match the CPU (f16 operands; f16 out within a rounding, f32 out)") {
  GpuScope g;
  if (ptx_path_off()) return;
  for (const ptx::MatmulVariant& v : ptx::matmul_variants()) {
    if (v.sm == 90 && !hopper_gpu()) {  // sm_90a PTX: only Hopper drivers compile it
      MESSAGE(fmt::format("{}: not a Hopper GPU, not run", v.name));
      continue;
    }
    gpu().set_cm_tile(v.name);
    // K: one step (fewer than the pipeline's stages), and the stages wrapped more than once; 2 x 3 block tiles.
    for (const int64_t K : {int64_t(v.bk), int64_t(v.bk) * (2 * v.stages + 1)}) {
      const int64_t M = 2 * v.bm, N = 3 * v.bn;
      const Tensor a = ops::cast(randn(v.ta ? Shape{K, M} : Shape{M, K}, 700 + K), DType::f16);
      const Tensor b = ops::cast(randn(v.tb ? Shape{N, K} : Shape{K, N}, 800 + K), DType::f16);
      const std::string what = fmt::format("{} {}x{}x{}", v.name, M, K, N);
      const int64_t launches = gpu().ptx_launches();
      if (v.f32_out) {
        const Tensor got = on_gpu([&] { return ops::matmul_f32(a, b, v.ta, v.tb); });
        expect_close(got, on_cpu([&] { return ops::matmul_f32(a, b, v.ta, v.tb); }), 1e-4, 1e-4 * std::sqrt(double(K)), what);
      } else {
        const Tensor got = on_gpu([&] { return ops::matmul(a, b, v.ta, v.tb); });
        expect_close(got, on_cpu([&] { return ops::matmul(a, b, v.ta, v.tb); }), 2e-3, 2e-3 * std::sqrt(double(K)), what);
      }
      CHECK_MESSAGE(gpu().ptx_launches() == launches + 1, what, ": the product did not run the PTX kernel");
    }
  }
  gpu().set_cm_tile("");
}

TEST_CASE("ptx linear epilogues: x @ w^T + b, and r + (x @ w^T (+ b)), on each f16 NT variant, match the CPU") {
  GpuScope g;
  if (ptx_path_off()) return;
  for (const ptx::MatmulVariant& v : ptx::matmul_variants()) {
    if (v.ta || !v.tb || v.f32_out || (v.sm == 90 && !hopper_gpu())) continue;
    gpu().set_cm_tile(v.name);
    const int64_t M = 2 * v.bm, N = 3 * v.bn, K = 3 * v.bk;
    const auto f16 = [](const Tensor& t) { return ops::cast(t, DType::f16); };
    const Tensor x = f16(randn({M, K}, 901)), w = f16(randn({N, K}, 902)), b = f16(randn({N}, 903));
    const Tensor r = f16(randn({M, N}, 904));
    const int64_t launches = gpu().ptx_launches();
    const double atol = 2e-3 * std::sqrt(double(K));
    expect_close(on_gpu([&] { return ops::linear(x, w, b); }), on_cpu([&] { return ops::linear(x, w, b); }), 2e-3,
                 atol, std::string(v.name) + " linear");
    expect_close(on_gpu([&] { return ops::linear_residual(x, w, b, r); }),
                 on_cpu([&] { return ops::linear_residual(x, w, b, r); }), 2e-3, atol, std::string(v.name) + " bias resid");
    expect_close(on_gpu([&] { return ops::linear_residual(x, w, Tensor(), r); }),
                 on_cpu([&] { return ops::linear_residual(x, w, Tensor(), r); }), 2e-3, atol,
                 std::string(v.name) + " resid");
    CHECK_MESSAGE(gpu().ptx_launches() == launches + 3, v.name);
  }
  gpu().set_cm_tile("");
}

TEST_CASE("ptx weight gradients: Hopper's TN tiles by shape under ALPHA_VK_PTX_TN, K split into f32 partials") {
  GpuScope g;
  if (ptx_path_off()) return;
  if (!hopper_gpu()) {
    MESSAGE("not a Hopper GPU: no TN wgmma tile");
    return;
  }
  struct Reset {
    ~Reset() { gpu().set_ptx_tn(vk::ptx_tn_from_env()); }
  } reset;
  // GPT-2's attention-projection weight gradient, K cut to 2048: 36 tiles of 128 x 128, too few unsplit.
  const int64_t M = 768, N = 768, K = 2048;
  gpu().set_ptx_tn(false);
  CHECK(gpu().ptx_tile(M, N, K, true, false, true) == nullptr);  // off: the coopmat tiles with their row sums
  gpu().set_ptx_tn(true);
  const ptx::MatmulVariant* v = gpu().ptx_tile(M, N, K, true, false, true);
  REQUIRE(v != nullptr);
  CHECK(v->ta);
  CHECK(v->f32_out);
  const int64_t splits = gpu().ptx_splits(*v, M, N, K);
  if (gpu().runtime().device().features().sm_count > 0) CHECK(splits > 1);
  CHECK(K % (splits * v->bk) == 0);
  const auto f16 = [](const Tensor& t) { return ops::cast(t, DType::f16); };
  const Tensor gy = f16(randn({K, M}, 931)), x = f16(randn({K, N}, 932));
  const int64_t launches = gpu().ptx_launches();
  // Two GPU ops: the PTX product and the column sum (no fused row-sum GEMM on this path).
  const ops::LinearWeightGrads d = on_gpu([&] { return ops::linear_weight_grads(gy, x); }, 2);
  CHECK(gpu().ptx_launches() == launches + 1);
  const std::string what = fmt::format("{} in {} slices", v->name, splits);
  expect_close(d.dw, on_cpu([&] { return ops::matmul_f32(gy, x, true, false); }), 1e-4, 1e-4 * std::sqrt(double(K)),
               "dw " + what);
  expect_close(d.db, on_cpu([&] { return ops::sum_f32(gy, 0); }), 1e-5, 1e-4, "db " + what);
  // The same bits again: the partials are summed in order.
  const ops::LinearWeightGrads again = on_gpu([&] { return ops::linear_weight_grads(gy, x); }, 2);
  expect_close(again.dw, d.dw, 0, 0, "dw twice " + what);
}
