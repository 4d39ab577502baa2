// Batched matmul on the GPU: spirv/matmul.comp (register-tiled SIMT, f32 or f16 storage, 128- or 64-wide
// tiles) and spirv/matmul_cm.comp (NV cooperative matrix: f16 operands, f32 accumulation). Batch dims: an
// operand either has the output's batch dims (left-padded with 1s) or a single matrix shared by every batch
// (stride 0); other broadcasts decline.
//
// Kernel choice (matmul_kernel): coopmat when the device has it and the operands are f16 (precision f16),
// in a block tile chosen per shape (cm_tile; ALPHA_VK_CM_TILE forces one, `alpha bench gpu --tiles` sweeps them),
// or when ALPHA_VK_MATMUL=coopmat asks for it on f32 operands (f16 rounding of the operands, like TF32);
// else SIMT, with 64 x 64 tiles when 128 x 128 tiles would leave the GPU idle. ALPHA_VK_MATMUL=simt forces SIMT.
// Split-K (matmul_splits): products with few output tiles and a long K (the weight gradients dW = dy^T x, K = B*T)
// run as S slices of K writing f32 partial sums, then one fixed-order sum over the slices: deterministic.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ptx/kernels.h"
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
// Batch stride (elements) of operand x against output batch dims; -1 when unsupported.
int64_t batch_stride(const Tensor& x, const Shape& batch) {
  const Shape bx(x.shape().begin(), x.shape().end() - 2);
  if (shape_numel(bx) == 1) return 0;
  Shape padded(batch.size() - bx.size(), 1);
  padded.insert(padded.end(), bx.begin(), bx.end());
  if (padded != batch) return -1;
  return x.size(-1) * x.size(-2);
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Mirrors spirv/CMakeLists.txt's tile list (a missing variant fails at pipeline creation in the GPU tests).
constexpr CmTile kCmTiles[] = {
    {"128x128w8k64s1", 128, 128, 64}, {"128x128w4k64s1", 128, 128, 64}, {"128x64w4k64s1", 128, 64, 64},
    {"64x128w4k64s1", 64, 128, 64},   {"128x128w4k32s2", 128, 128, 32}, {"256x128w8k32s1", 256, 128, 32},
    {"64x64w4k64s1", 64, 64, 64},     {"128x64w4k64s1p0", 128, 64, 64}, {"64x64w4k64s1p0", 64, 64, 64},
    {"128x128w4k64s1p0", 128, 128, 64},
    {"128x128w4k64s1p0f", 128, 128, 64}, {"128x64w4k64s1p0f", 128, 64, 64}, {"64x64w4k64s1p0f", 64, 64, 64},
    {"128x128w4k64s1p0fc", 128, 128, 64},  // "f" with every K step's staging checked (large squares)
    {"128x128w4k64s1p0c", 128, 128, 64},   // p0 with every K step's staging checked (faster still there)
    {"96x128w4k64s1p0f", 96, 128, 64},
    {"192x128w4k64s1p0", 192, 128, 64},  // 2 x 2 subgroups of 96 x 64
};

// Timing probes (spirv/CMakeLists.txt): a tile's inner loop alone, for `alpha bench gpu --tiles`.
constexpr CmTile kCmProbes[] = {
    {"128x128w4k64s1_pregs", 128, 128, 64}, {"128x64w4k64s1_pregs", 128, 64, 64}, {"128x64w4k64s1_pshared", 128, 64, 64},
    {"128x64w4k64s1_pnostore", 128, 64, 64}, {"128x64w4k64s1_pempty", 128, 64, 64},
    {"128x128w4k64s1_pstage", 128, 128, 64},  {"128x128w4k64s1_pnobar", 128, 128, 64},
    {"128x128w4k64s1_pnoload", 128, 128, 64}, {"128x128w4k64s1_pnosts", 128, 128, 64}};

// Trial tiles, timed in `alpha bench gpu --tiles` and checked by test_vk: f16 outputs of one K slice only.
// The _w twins of the per-shape tiles take the walk's band height as a specialization constant (`--tiles --walks`).
constexpr CmTile kCmTrials[] = {{"160x128w4k64s1p0f", 160, 128, 64, false},
                                {"128x128w4k64s1p0_w", 128, 128, 64, false, true},
                                {"128x128w4k64s1p0f_w", 128, 128, 64, false, true},
                                {"192x128w4k64s1p0_w", 192, 128, 64, false, true}};

// Traces of the p0 tiles (ALPHA_VK_TILE_TRACE=1; per-step clocks written over C by design).
constexpr CmTile kCmTraces[] = {{"128x128w4k64s1p0_ptrace", 128, 128, 64},
                                {"128x128w4k64s1p0f_ptrace", 128, 128, 64},
                                {"128x64w4k64s1p0f_ptrace", 128, 64, 64},
                                {"128x128w4k64s1_ptrace", 128, 128, 64}};

const CmTile& tile_named(const std::string& name) {
  for (const CmTile& t : kCmTraces)
    if (name == t.name) return t;
  for (const CmTile& t : kCmTiles)
    if (name == t.name) return t;
  for (const CmTile& t : kCmProbes)
    if (name == t.name) return t;
  for (const CmTile& t : kCmTrials)
    if (name == t.name) return t;
  std::string known;
  for (const CmTile& t : kCmTiles) known += std::string(known.empty() ? "" : ", ") + t.name;
  throw ValueError(fmt::format("[vk] coopmat tile '{}' is not one of {}", name, known));
}
}  // namespace

std::span<const CmTile> cm_tiles() { return kCmTiles; }
std::span<const CmTile> cm_probes() { return kCmProbes; }
std::span<const CmTile> cm_trials() { return kCmTrials; }
std::span<const CmTile> cm_traces() { return kCmTraces; }

std::string cm_tile_from_env() {
  const char* e = std::getenv("ALPHA_VK_CM_TILE");
  if (!e || !*e || std::strcmp(e, "auto") == 0 || std::strcmp(e, "coopmat") == 0) return "";
  return tile_named(e).name;
}

bool cm_only_from_env() {
  const char* e = std::getenv("ALPHA_VK_CM_TILE");
  return e && std::strcmp(e, "coopmat") == 0;
}

namespace {
// Environment variable `name` as a whole number in [1, hi] (`what` names it in the error); `unset` when absent.
int64_t env_count(const char* name, int64_t hi, int64_t unset, const char* what) {
  const char* e = std::getenv(name);
  if (!e || !*e) return unset;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (*end != '\0' || v < 1 || v > hi)
    throw ValueError(fmt::format("[vk] {}='{}' is not {} from 1 to {}", name, e, what, hi));
  return v;
}
}  // namespace

uint32_t cm_walk_from_env() { return uint32_t(env_count("ALPHA_VK_CM_WALK", 65535, kCmWalk, "a band height in tiles")); }

void VulkanBackend::set_cm_walk(uint32_t band) {
  ALPHA_CHECK(band <= 65535, ValueError, "[vk] coopmat walk band {} is not 0 (the default) to 65535 tiles", band);
  cm_walk_ = band == 0 ? kCmWalk : band;
}

void VulkanBackend::set_cm_tile(std::string name) {
  ptx_tile_.clear();
  cm_only_ = name == "coopmat";
  if (cm_only_ || set_ptx_tile(name)) name.clear();
  cm_tile_ = name.empty() ? "" : tile_named(name).name;
}

const CmTile& VulkanBackend::cm_tile(int64_t M, int64_t N, int64_t K, int64_t batches, bool f32_out) const {
  if (!cm_tile_.empty()) return tile_named(cm_tile_);
  // From `alpha bench gpu --tiles` on an H100 (docs/PERFORMANCE.md): 128 x 64 tiles without the register prefetch
  // are the fastest or within ~5% at every GPT-2 shape (4096^3 195 TFLOP/s, like the prefetching 128 x 128); a grid
  // of under ~1.5 waves of them even after split-K (a K too short to split) runs 64 x 64 tiles, 3 workgroups per SM.
  // Split-K aims at split_target() workgroups (768, or ALPHA_VK_SPLIT_TARGET), so the weight gradients (K = B*T) keep
  // 128 x 64 tiles.
  // Large squares keep the prefetching 128 x 128 tile: as fast there, and the p0 tiles' 4096^3 rate swung 92-199
  // TFLOP/s between calls.
  // With the KHR kernels the 128 x 128 tile without the register prefetch is the faster one on squares (4096^3
  // 310 vs 271 TFLOP/s on an H200, steady over three sweeps), and with the next K slice's fragments loaded before
  // the products ("f", 218 registers) on GPT-2's wide products (+5-11%) and its 128 x 64 tiles (+3-18%).
  const bool khr = rt_->device().features().khr_coopmat_f16;
  // Side by side with the other deferred weight gradients (set_concurrent), whole K: the grids fill the GPU together,
  // so the fastest tile per product, not the one that fills it alone (GPT-2 step on an H200: 128 x 128 34.6 ms,
  // 128 x 64 35.3).
  if (concurrent_ && f32_out) return tile_named(khr ? "128x128w4k64s1p0f" : "128x64w4k64s1p0");
  // f16 outputs of M >= 8192 in one K slice and a wave or more: 2 x 2 subgroups of 96 x 64 read 17% fewer shared-memory
  // bytes per product than 64 x 64 blocks, in 255 registers without spilling. `--tiles` on an H200 (session 31): GPT-2's
  // forward and dx products +5-22% but two ties, its LM head 331 vs 296 TFLOP/s, shakespeare_char's N = 384 +16-18%;
  // the 4096^3 square's 704 tiles (2.7 waves) 277 vs 303 on 128 x 128, so that keeps it. f32 outputs keep 128 x 128
  // (the LM head's dW 284 vs 315 TFLOP/s). The same grids with a K long enough to split (cm_whole_k: GPT-2's LM head
  // dx, K 50304, 258 tiles, about one wave) run whole K on it: H100, `--tiles --alternate` (session 55), 320-327
  // TFLOP/s against 306-313 with checked staging (session 54's choice) and 274 for 128 x 128 "f" in two slices.
  if (khr && !f32_out && M >= 8192 && cdiv(M, 192) * cdiv(N, 128) * batches >= 256 &&
      (K >= kWholeK || matmul_splits("matmul_cm_f16", M, N, K, batches, 192, 128) == 1))
    return tile_named("192x128w4k64s1p0");
  // f16 squares: "f" with the checked staging in every K step ("fc"; `--tiles` on an H100, one process, 4096^3 NN /
  // NT / TN: 313 / 302 / 303 TFLOP/s against p0's 288 / 293 / 286). p0c (p0 so staged) was faster still in session
  // 53's sweeps (H100 310 / 314 / 314 against "fc" 307 / 298 / 303; H200 310 / 316 / 314 against 307 / 298-300 /
  // 300-302), and takes the squares since session 54's GPU suite ran its epilogue variants. The driver unrolls its K
  // loop; kept rolled (DontUnroll) it ran as fast at NN, 4-5% slower at NT (session 55): mostly the staging. At 6144^3 and
  // 8192^3 the 192 x 128 tile is faster still (323-333), not chosen below M 8192 (4096^3 on it: 288-294 whole K).
  if (M >= 4096 && N >= 4096)
    return tile_named(khr ? (f32_out ? "128x128w4k64s1p0" : "128x128w4k64s1p0c") : "128x128w4k64s1");
  // With the KHR kernels (no B-operand transposes) the 128 x 128 tile also wins on wide outputs and long products:
  // GPT-2's qkv/fc forward and proj dx (N 2304-3072, +7-11%), the LM head's three products (+15-25%) on an H200;
  // with the output rows staged through shared memory also shakespeare_char's (M 16384, N 1152-1536: +13-16%).
  // Not for f32 outputs that split K (weight gradients of few tiles): the 128 x 128 tile stores its f32 partials
  // straight to global memory (staging them was slower), the 128 x 64 tile stages them (GPT-2's proj dW: 170 vs 164
  // TFLOP/s in `--tiles`, steps -0.6%); the LM head dW (no split) stays on 128 x 128 (272 TFLOP/s in a step, 253 on
  // 128 x 64).
  const bool f32_split = f32_out && matmul_splits("matmul_cm_f16", M, N, K, batches, 128, 128, true) > 1;
  if (khr && !f32_split && (N >= 2048 || (N >= 1024 && M >= 8192) || M >= 32768 || K >= 32768))
    return tile_named("128x128w4k64s1p0f");
  // GPT-2's N = 768 forward and dx products: 96 x 128 tiles (516 workgroups, ~2 waves at two per SM) ran 4-6%
  // faster than 128 x 64 in `--tiles` and the step 0.35 ms faster; shakespeare_char's N = 384 (M 16384) 4% slower.
  if (khr && !f32_out && M >= 8192 && N > 512 && N <= 1024) return tile_named("96x128w4k64s1p0f");
  const CmTile& mid = tile_named(khr ? "128x64w4k64s1p0f" : "128x64w4k64s1p0");
  const int64_t groups = cdiv(M, mid.bm) * cdiv(N, mid.bn) * batches;
  const int64_t splits = matmul_splits("matmul_cm_f16", M, N, K, batches, mid.bm, mid.bn, f32_out);
  // 64 x 64 "f": 86 registers, +5-10% over p0 at every GPT-2 shape in `--tiles` (H200).
  return groups * splits < kSmallGrid ? tile_named(khr ? "64x64w4k64s1p0f" : "64x64w4k64s1p0") : mid;
}

bool VulkanBackend::cm_whole_k(int64_t M, int64_t N, int64_t K, int64_t batches, bool f32_out) const {
  return cm_tile_.empty() && rt_->device().features().khr_coopmat_f16 && !f32_out && M >= 8192 &&
         cdiv(M, 192) * cdiv(N, 128) * batches >= 256 && K >= kWholeK;
}

void VulkanBackend::set_concurrent(bool on) {
  if (!on) {
    std::vector<std::function<void()>> passes;
    passes.swap(after_concurrent_);
    for (auto& p : passes) p();  // in the jobs' order, still in the held submission
  }
  concurrent_ = on;
  rt_->queue().hold(on);  // one submission: a submission boundary would serialize the products again
}

int64_t split_target_from_env() {
  return env_count("ALPHA_VK_SPLIT_TARGET", 1000000, 0, "a number of workgroups");
}

int64_t ptx_min_k_from_env() {
  return env_count("ALPHA_VK_PTX_MIN_K", 1 << 30, VulkanBackend::kPtxMinK, "a product depth");
}

bool ptx_tn_from_env() {
  const char* e = std::getenv("ALPHA_VK_PTX_TN");
  if (!e || !*e || std::strcmp(e, "0") == 0) return false;
  if (std::strcmp(e, "1") == 0) return true;
  throw ValueError(fmt::format("[vk] ALPHA_VK_PTX_TN='{}' is not 0 (off) or 1 (on)", e));
}

bool profile_shapes_from_env() {
  const char* e = std::getenv("ALPHA_VK_PROFILE_SHAPES");
  return e && std::strcmp(e, "1") == 0;
}

std::string VulkanBackend::shape_label(const std::string& kernel, int64_t M, int64_t K, int64_t N, bool ta, bool tb,
                                       int64_t splits) const {
  if (!profile_shapes_) return {};
  return fmt::format("{}[{}x{}x{} {}{}{}]", kernel, M, K, N, ta ? 'T' : 'N', tb ? 'T' : 'N',
                     splits > 1 ? fmt::format(" /{}", splits) : std::string());
}

MatmulMode matmul_mode_from_env() {
  const char* e = std::getenv("ALPHA_VK_MATMUL");
  if (!e || !*e || std::strcmp(e, "auto") == 0) return MatmulMode::automatic;
  if (std::strcmp(e, "simt") == 0) return MatmulMode::simt;
  if (std::strcmp(e, "coopmat") == 0) return MatmulMode::coopmat;
  throw ValueError(fmt::format("[vk] ALPHA_VK_MATMUL='{}' is not one of auto, simt, coopmat", e));
}

std::string VulkanBackend::matmul_kernel(DType dtype, int64_t M, int64_t N, int64_t K, int64_t batches) const {
  const bool cm = rt_->device().features().nv_coopmat_f16 &&
                  (matmul_mode_ == MatmulMode::coopmat || (matmul_mode_ == MatmulMode::automatic && dtype == DType::f16));
  const std::string s = dtype == DType::f16 ? "_f16" : "_f32";
  if (cm) return "matmul_cm" + s;
  // 128 x 128 tiles when they fill the GPU, or can through split-K (f32 partials); else 4x as many 64 x 64 tiles.
  const int64_t big_tiles = cdiv(M, 128) * cdiv(N, 128) * batches;
  const bool split = dtype == DType::f32 && K >= 2 * kMinSplitK;
  return (big_tiles >= kTargetGroups || split ? "matmul" : "matmul_small") + s;
}

int64_t VulkanBackend::matmul_splits(const std::string& kernel, int64_t M, int64_t N, int64_t K, int64_t batches,
                                     int64_t bm, int64_t bn, bool f32_out) const {
  if (kernel == "matmul_f16" || kernel.rfind("matmul_small", 0) == 0) return 1;  // no f32-partials variant / small grids
  const bool cm = kernel.rfind("matmul_cm", 0) == 0;
  const int64_t tiles = cdiv(M, bm) * cdiv(N, bn) * batches;
  const auto splits_for = [&](int64_t target) {
    return tiles >= target || K < 2 * kMinSplitK ? int64_t(1) : std::min(cdiv(target, tiles), K / kMinSplitK);
  };
  if (!cm) return splits_for(kTargetGroups);
  if (f32_out) {
    // Side by side with other products (set_concurrent), f32 outputs fill the device together: no slices to sum.
    if (concurrent_) return 1;
    // The weight gradients' larger default target fills the last wave of GPT-2's fc/proj dW (4 slices of 2048, not
    // 3); where it would cut K below kMinSlice the slices' fixed costs win and the f16 target holds (H200 steps:
    // shakespeare_char's dW, K 16384 in 15-19 slices, +2% at 1024).
    const int64_t splits = splits_for(split_target());
    return split_target_ == 0 && splits > 1 && K / splits < kMinSlice ? splits_for(kTargetGroupsCm) : splits;
  }
  // f16 outputs that split add f32 partials, a sum and a cast pass: they aim at kTargetGroupsCm (at 1024 GPT-2's
  // 128 x 64 forward and dx products split in two: its step +2.2 ms on an H200) and only in slices of kMinSlice or
  // more of K. GPT-2's N = 768 products on 96 x 128 tiles (516 workgroups, K <= 3072) split in two ran 84-93
  // TFLOP/s against 206-231 whole; its LM head's dx (K 50304, 384 tiles of 128 x 128) 306 split against 238.
  return std::max<int64_t>(1, std::min(splits_for(kTargetGroupsCm), K / kMinSlice));
}

// A batch of row-major A matrices, back to back, against one shared B (a linear layer's dx = dy @ W, the tied LM
// head) is one (nb M, K) product in the same memory for A and C, so the tile is chosen for the whole M: GPT-2's dx
// products and LM head forward take the 192 x 128 tile of M >= 8192 rather than the tiles of 8 batches of 1024 rows.
int64_t flat_rows(int64_t M, int64_t lda, int64_t nb, int64_t sa, int64_t sb, bool ta) {
  return nb > 1 && sb == 0 && !ta && sa == M * lda ? M * nb : 0;
}

Tensor VulkanBackend::matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return matmul_out(a, b, ta, tb, a.dtype());
}

Tensor VulkanBackend::matmul_f32out(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  return a.dtype() == DType::f16 ? matmul_out(a, b, ta, tb, DType::f32) : Tensor();
}

// out_dtype: a's dtype, or f32 for f16 operands (the "_f32out" variants; split-K sums are not rounded to f16).
Tensor VulkanBackend::matmul_out(const Tensor& a, const Tensor& b, bool ta, bool tb, DType out_dtype) {
  if (!flt(a) || !flt(b, a)) return {};
  const int64_t M = ta ? a.size(-1) : a.size(-2), K = ta ? a.size(-2) : a.size(-1);
  const int64_t N = tb ? b.size(-2) : b.size(-1);
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  int64_t nb = shape_numel(batch);
  int64_t sa = batch_stride(a, batch), sb = batch_stride(b, batch);
  if (sa < 0 || sb < 0 || nb == 0 || M == 0 || N == 0 || nb > 65535) return {};
  int64_t Mrun = M;
  if (const int64_t rows = flat_rows(M, a.size(-1), nb, sa, sb, ta)) {
    Mrun = rows;
    nb = 1;
    sa = 0;
  }
  std::string kernel = matmul_kernel(a.dtype(), Mrun, N, K, nb);
  // The PTX path (vk/nvx.cpp): one matrix of f16 operands at their natural strides, in whole block tiles.
  if (kernel == "matmul_cm_f16" && nb == 1 && a.size(-1) == (ta ? Mrun : K) && b.size(-1) == (tb ? K : N))
    if (const ptx::MatmulVariant* v = ptx_tile(Mrun, N, K, ta, tb, out_dtype == DType::f32)) {
      Shape shape = batch;
      shape.push_back(M);
      shape.push_back(N);
      Tensor out = rt_->output(shape, out_dtype);
      const int64_t splits = ptx_splits(*v, Mrun, N, K);
      if (run_ptx_matmul(*v, rt_->input(a), rt_->input(b), Runtime::buffer_of(out), Mrun, N, K,
                         shape_label(v->name, Mrun, K, N, ta, tb, splits), nullptr, nullptr, splits))
        return out;
    }
  // f16 coopmat with every size and stride a multiple of 8: 16-byte loads of 8 halves.
  const bool vec8 = kernel == "matmul_cm_f16" && Mrun % 8 == 0 && N % 8 == 0 && K % 8 == 0 && a.size(-1) % 8 == 0 &&
                    b.size(-1) % 8 == 0 && sa % 8 == 0 && sb % 8 == 0;
  const CmTile* ct = vec8 ? &cm_tile(Mrun, N, K, nb, out_dtype == DType::f32) : nullptr;
  const int64_t bm = ct ? ct->bm : kernel.rfind("matmul_small", 0) == 0 ? 64 : 128, bn = ct ? ct->bn : bm;
  if (cdiv(Mrun, bm) > 65535 || cdiv(N, bn) > 65535) return {};
  int64_t splits = matmul_splits(kernel, Mrun, N, K, nb, bm, bn, out_dtype == DType::f32);
  if (ct && !ct->f32out && out_dtype == DType::f32)
    throw ValueError(fmt::format("[vk] coopmat tile '{}' has f16 outputs only; this product needs f32 ones", ct->name));
  // A tile without f32 partials runs whole K, as does the choice for a long K (cm_whole_k).
  if (ct && (!ct->f32out || cm_whole_k(Mrun, N, K, nb, out_dtype == DType::f32))) splits = 1;
  // Slices of whole K steps (32, or the tile's) so only the last one has a partial step. Rounding the slice up can
  // leave the last slices empty (K 4100 in 16 slices of 288: 15 cover it): there are only as many as cover K, since
  // the coopmat kernels count their K steps as (kend - kbeg + BK - 1) / BK.
  const int64_t kstep = ct ? ct->bk : 32;
  const int64_t k_chunk = splits > 1 ? cdiv(cdiv(K, splits), kstep) * kstep : K;
  if (splits > 1) splits = cdiv(K, k_chunk);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  const auto bufa = rt_->input(a), bufb = rt_->input(b);
  Tensor out = rt_->output(out_shape, out_dtype);
  const bool f16_in = a.dtype() == DType::f16, f32_from_f16 = f16_in && out_dtype == DType::f32;
  const pc::MatmulPC pc{uint32_t(Mrun), uint32_t(N), uint32_t(K), uint32_t(a.size(-1)), uint32_t(b.size(-1)),
                        uint32_t(sa), uint32_t(sb), uint32_t(splits), uint32_t(k_chunk)};
  const std::array<uint32_t, 3> groups{uint32_t(cdiv(N, bn)), uint32_t(cdiv(Mrun, bm)), uint32_t(nb * splits)};
  const double flops = 2.0 * double(nb) * double(Mrun) * double(N) * double(K);
  const std::string variant = ct ? kernel + "_vec8_" + ct->name : kernel;
  const auto label = [&](const std::string& k) { return shape_label(k, Mrun, K, N, ta, tb, splits); };
  // Specialization: the transposes, and for the walk twins the walk's band height.
  const uint32_t spec[] = {ta ? 1u : 0u, tb ? 1u : 0u, cm_walk_};
  const std::span<const uint32_t> sp(spec, ct && ct->walk ? 3 : 2);
  if (splits == 1) {
    const std::string k = f32_from_f16 ? variant + "_f32out" : variant;
    const Binding bs[] = {{bufa, false}, {bufb, false}, {Runtime::buffer_of(out), true}};
    rt_->run(k, sp, bs, pc, groups, flops, label(k));
    return out;
  }
  // (nb, splits, M, N) f32 partials -> (nb, M, N) sums over the splits in order; f16 outputs round once at the end.
  const bool f16_out = out_dtype == DType::f16;
  const auto part = rt_->scratch(uint64_t(nb * splits * Mrun * N) * 4);
  const std::string k = f16_in ? variant + "_f32out" : variant;
  const Binding bs[] = {{bufa, false}, {bufb, false}, {part, true}};
  rt_->run(k, sp, bs, pc, groups, flops, label(k));
  const auto sums = f16_out ? rt_->scratch(uint64_t(nb * Mrun * N) * 4) : Runtime::buffer_of(out);
  record_sum(part, sums, uint32_t(nb), uint32_t(splits), uint32_t(Mrun * N), 1.0f);
  if (f16_out) record_cast(sums, Runtime::buffer_of(out), uint32_t(nb * Mrun * N), true);
  return out;
}

// Tiles with the bias and residual epilogues (spirv/CMakeLists.txt): the ones cm_tile picks; all but 96 x 128 also
// have the row-sum variant (linear_weight_grads).
bool has_bias_variants(const std::string& tile) {
  for (const char* t : {"128x128w4k64s1", "128x128w4k64s1p0", "128x128w4k64s1p0f", "128x128w4k64s1p0fc", "128x128w4k64s1p0c",
                        "128x64w4k64s1p0",
                        "128x64w4k64s1p0f", "64x64w4k64s1p0", "64x64w4k64s1p0f", "96x128w4k64s1p0f", "192x128w4k64s1p0"})
    if (tile == t) return true;
  return false;
}

bool has_rowsum_variant(const std::string& tile) {
  return has_bias_variants(tile) && tile != "96x128w4k64s1p0f" && tile != "192x128w4k64s1p0";
}

// The tile of an f16 coopmat product x (M, K) @ w (N, K)^T in one K slice whose variants have the epilogues (EPI_BIAS,
// EPI_RESID); nullptr where the product would take another path (no coopmat, odd sizes, split-K, a forced tile
// without the variants).
const CmTile* VulkanBackend::epilogue_tile(int64_t M, int64_t N, int64_t K) const {
  if (M == 0 || N == 0 || M % 8 != 0 || N % 8 != 0 || K % 8 != 0) return nullptr;
  if (matmul_kernel(DType::f16, M, N, K, 1) != "matmul_cm_f16") return nullptr;
  const CmTile& ct = cm_tile(M, N, K, 1);
  if (!has_bias_variants(ct.name)) return nullptr;
  if (matmul_splits("matmul_cm_f16", M, N, K, 1, ct.bm, ct.bn) != 1 && !cm_whole_k(M, N, K, 1)) return nullptr;
  if (cdiv(M, ct.bm) > 65535 || cdiv(N, ct.bn) > 65535) return nullptr;
  return &ct;
}

// Records tile ct's variant `suffix` of x (M, K) @ w (N, K)^T, both row-major and contiguous.
void VulkanBackend::run_epilogue(const CmTile& ct, const std::string& suffix, int64_t M, int64_t N, int64_t K,
                                 std::span<const Binding> bindings) {
  const pc::MatmulPC pc{uint32_t(M), uint32_t(N), uint32_t(K), uint32_t(K), uint32_t(K), 0, 0, 1, uint32_t(K)};
  const std::string k = std::string("matmul_cm_f16_vec8_") + ct.name + suffix;
  rt_->run(k, {0u, 1u}, bindings, pc, {uint32_t(cdiv(N, ct.bn)), uint32_t(cdiv(M, ct.bm)), 1},
           2.0 * double(M) * double(N) * double(K), shape_label(k, M, K, N, false, true, 1));
}

// x (M, K) @ w (N, K)^T + b with b added in the epilogue (spirv/matmul_cm.comp EPI_BIAS).
Tensor VulkanBackend::linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  if (x.dim() != 2 || w.dim() != 2 || b.dim() != 1 || !f16(x) || !f16(w) || !f16(b)) return {};
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (w.size(1) != K || b.size(0) != N) return {};
  if (const ptx::MatmulVariant* v = ptx_tile(M, N, K, false, true, false)) {  // vk/nvx.cpp
    Tensor out = rt_->output({M, N}, DType::f16);
    if (run_ptx_matmul(*v, rt_->input(x), rt_->input(w), Runtime::buffer_of(out), M, N, K,
                       shape_label(v->name, M, K, N, false, true, 1), rt_->input(b)))
      return out;
  }
  const CmTile* ct = epilogue_tile(M, N, K);
  if (!ct) return {};
  Tensor out = rt_->output({M, N}, DType::f16);
  const Binding bs[] = {{rt_->input(x), false}, {rt_->input(w), false}, {Runtime::buffer_of(out), true},
                        {rt_->input(b), false}};
  run_epilogue(*ct, "_bias", M, N, K, bs);
  return out;
}

// r (M, N) + x (M, K) @ w (N, K)^T (+ b), r added in the epilogue (EPI_RESID).
Tensor VulkanBackend::linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  if (x.dim() != 2 || w.dim() != 2 || r.dim() != 2 || !f16(x) || !f16(w) || !f16(r)) return {};
  if (b.defined() && (b.dim() != 1 || !f16(b))) return {};
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (w.size(1) != K || r.size(0) != M || r.size(1) != N || (b.defined() && b.size(0) != N)) return {};
  if (const ptx::MatmulVariant* v = ptx_tile(M, N, K, false, true, false)) {  // vk/nvx.cpp
    Tensor out = rt_->output({M, N}, DType::f16);
    if (run_ptx_matmul(*v, rt_->input(x), rt_->input(w), Runtime::buffer_of(out), M, N, K,
                       shape_label(v->name, M, K, N, false, true, 1), b.defined() ? rt_->input(b) : nullptr,
                       rt_->input(r)))
      return out;
  }
  const CmTile* ct = epilogue_tile(M, N, K);
  if (!ct) return {};
  Tensor out = rt_->output({M, N}, DType::f16);
  const Binding bx{rt_->input(x), false}, bw{rt_->input(w), false}, bo{Runtime::buffer_of(out), true};
  const Binding br{rt_->input(r), false};
  if (b.defined()) {
    const Binding bs[] = {bx, bw, bo, {rt_->input(b), false}, br};
    run_epilogue(*ct, "_bias_resid", M, N, K, bs);
  } else {
    const Binding bs[] = {bx, bw, bo, br};
    run_epilogue(*ct, "_resid", M, N, K, bs);
  }
  return out;
}

// dw = g^T x and db = g's column sums, both f32, in one coopmat GEMM whose first column of tiles also sums the rows
// of g^T it stages (spirv/matmul_cm.comp ROWSUM): the bias gradient's own pass over g is gone. Same tile, split-K
// and dw partials as matmul_f32out (the slices' sum may take another fixed order only where M N + M, not M N,
// crosses record_sum's short-column threshold); undefined where that product would take another path.
ops::LinearWeightGrads VulkanBackend::linear_weight_grads(const Tensor& g, const Tensor& x) {
  if (g.dim() != 2 || x.dim() != 2 || !f16(g) || !f16(x) || g.size(0) != x.size(0)) return {};
  const int64_t M = g.size(1), K = g.size(0), N = x.size(1);  // (out, R) @ (R, in)
  if (M == 0 || N == 0 || K == 0 || M % 8 != 0 || N % 8 != 0 || K % 8 != 0) return {};
  if (matmul_kernel(DType::f16, M, N, K, 1) != "matmul_cm_f16") return {};
  // A PTX tile for dw: ops' unfused pair runs it (matmul_f32 -> matmul_out) and db as a column sum of its own.
  if (ptx_tile(M, N, K, true, false, true)) return {};
  const CmTile& ct = cm_tile(M, N, K, 1, true);
  if (!has_rowsum_variant(ct.name) || cdiv(M, ct.bm) > 65535 || cdiv(N, ct.bn) > 65535) return {};
  int64_t splits = matmul_splits("matmul_cm_f16", M, N, K, 1, ct.bm, ct.bn, true);
  const int64_t k_chunk = splits > 1 ? cdiv(cdiv(K, splits), ct.bk) * ct.bk : K;  // as matmul_out slices K
  if (splits > 1) splits = cdiv(K, k_chunk);
  const auto bufg = rt_->input(g), bufx = rt_->input(x);
  ops::LinearWeightGrads r{rt_->output({M, N}, DType::f32), rt_->output({M}, DType::f32)};
  const pc::MatmulPC pc{uint32_t(M), uint32_t(N), uint32_t(K), uint32_t(M), uint32_t(N), 0, 0, uint32_t(splits),
                        uint32_t(k_chunk)};
  const std::array<uint32_t, 3> groups{uint32_t(cdiv(N, ct.bn)), uint32_t(cdiv(M, ct.bm)), uint32_t(splits)};
  const std::string k = std::string("matmul_cm_f16_vec8_") + ct.name + "_f32out_rowsum";
  const double flops = 2.0 * double(M) * double(N) * double(K);
  if (splits == 1) {
    const auto bdw = Runtime::buffer_of(r.dw), bdb = Runtime::buffer_of(r.db);
    rt_->run(k, {1u, 0u}, {{bufg, false}, {bufx, false}, {bdw, true}, {bdb, true}}, pc, groups, flops,
             shape_label(k, M, K, N, true, false, 1));
    return r;
  }
  // (splits, M N + M) f32 partials: each slice's dw values, then its row sums; one sum over the splits, in order,
  // writes both (the row sums from element M N on go to db).
  const auto part = rt_->scratch(uint64_t(splits * (M * N + M)) * 4);
  rt_->run(k, {1u, 0u}, {{bufg, false}, {bufx, false}, {part, true}, {part, true}}, pc, groups, flops,
           shape_label(k, M, K, N, true, false, splits));
  record_sum(part, Runtime::buffer_of(r.dw), 1, uint32_t(splits), uint32_t(M * N + M), 1.0f, false,
             Runtime::buffer_of(r.db), uint32_t(M * N));
  return r;
}

}  // namespace alpha::vk
