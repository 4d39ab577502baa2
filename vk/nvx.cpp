// The PTX matmul path: PtxModule (vk/nvx.h) and VulkanBackend's choice and launch of ptx/'s variants (matmul.cu,
// matmul_sm90.cu). Products of f16 operands whose M, N, K are multiples of a variant's block tile (matmul_out's one
// matrix, batches flattened into rows; linear's and linear_residual's epilogues) run there where the device has
// VK_NVX_binary_import and the path is on (Device::Features::nvx_ptx: Hopper GPUs, or ALPHA_VK_PTX=1); the rest, and
// every product when a coopmat tile is forced, run the GLSL coopmat tiles (vk/matmul.cpp).
#include "vk/nvx.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "ptx/kernels.h"
#include "vk/backend.h"

namespace alpha::vk {

PtxModule::PtxModule(const Device& dev, int sm) : dev_(dev.get()) {
  const std::string_view text = ptx::matmul_module(sm);
  VkCuModuleCreateInfoNVX mi{};
  mi.sType = VK_STRUCTURE_TYPE_CU_MODULE_CREATE_INFO_NVX;
  mi.dataSize = text.size() + 1;  // with its NUL: the driver reads PTX as a C string
  mi.pData = text.data();
  VkCuModuleNVX m = VK_NULL_HANDLE;
  const VkResult r = vkCreateCuModuleNVX(dev_, &mi, nullptr, &m);
  if (r != VK_SUCCESS)
    throw VkError(fmt::format("[vk] the driver refused the sm_{} PTX module (VkResult {})", sm, int(r)), r);
  module_ = CuModule(dev_, m);
}

VkCuFunctionNVX PtxModule::function(const std::string& name) {
  if (auto it = functions_.find(name); it != functions_.end()) return it->second.get();
  VkCuFunctionCreateInfoNVX fi{};
  fi.sType = VK_STRUCTURE_TYPE_CU_FUNCTION_CREATE_INFO_NVX;
  fi.module = module_.get();
  fi.pName = name.c_str();
  VkCuFunctionNVX f = VK_NULL_HANDLE;
  const VkResult r = vkCreateCuFunctionNVX(dev_, &fi, nullptr, &f);
  if (r != VK_SUCCESS) throw VkError(fmt::format("[vk] PTX function '{}' not created (VkResult {})", name, int(r)), r);
  return functions_.emplace(name, CuFunction(dev_, f)).first->second.get();
}

bool VulkanBackend::set_ptx_tile(const std::string& name) {
  if (name.rfind("ptx", 0) != 0) return false;  // ptx_... (sm 80), ptx90_... (Hopper)
  if (!ptx::find_matmul_variant(name)) {
    std::string known;
    for (const auto& v : ptx::matmul_variants()) known += std::string(known.empty() ? "" : ", ") + v.name;
    throw ValueError(fmt::format("[vk] PTX tile '{}' is not one of {}", name, known));
  }
  if (!rt_->device().features().nvx_ptx)
    throw ValueError(fmt::format("[vk] PTX tile '{}': the PTX path is off (ALPHA_VK_PTX=1 on a device with "
                                 "VK_NVX_binary_import turns it on)", name));
  ptx_tile_ = name;
  return true;
}

const ptx::MatmulVariant* VulkanBackend::ptx_tile(int64_t M, int64_t N, int64_t K, bool ta, bool tb,
                                                  bool f32_out) const {
  if (!rt_->device().features().nvx_ptx || !cm_tile_.empty() || cm_only_) return nullptr;
  if (matmul_kernel(DType::f16, M, N, K, 1) != "matmul_cm_f16") return nullptr;  // e.g. ALPHA_VK_MATMUL=simt
  const auto fits = [&](const ptx::MatmulVariant& v) {
    return v.ta == ta && v.tb == tb && v.f32_out == f32_out && M % v.bm == 0 && N % v.bn == 0 && K % v.bk == 0;
  };
  if (!ptx_tile_.empty()) {  // forced: the products it fits, whatever their grid; the rest by shape (coopmat)
    const ptx::MatmulVariant* v = ptx::find_matmul_variant(ptx_tile_);
    return fits(*v) ? v : nullptr;
  }
  if (K < ptx_min_k_) return nullptr;  // kPtxMinK, or ALPHA_VK_PTX_MIN_K
  // By shape, for grids of at least kPtxMinTiles block tiles (smaller ones keep the coopmat tiles and their split-K;
  // f32 outputs on Hopper's tiles may split K to reach them): Hopper's module first (wgmma: 1.3-1.6x mma.sync's
  // rate), and in it the fitting variant of the least estimated time, ties to the earlier (ptx/matmul_variants.h
  // orders by preference). A Hopper GPU takes the sm_80 tiles only if its own module failed: their NT tiles ran below
  // the coopmat tiles there (H100, session 57: fc fwd 231 against 304).
  const bool hopper = hopper_name(rt_->device().features().name);
  for (const int sm : {90, 80}) {
    if (sm == 80 && hopper && !ptx_failed_[1]) break;
    const ptx::MatmulVariant* best = nullptr;
    double best_ns = 0;
    for (const ptx::MatmulVariant& v : ptx::matmul_variants()) {
      if (v.sm != sm || ptx_failed_[sm == 90] || !fits(v) || (sm == 90 && v.ta && !ptx_tn_)) continue;
      const double ns = ptx_ns(v, M, N, K, ptx_splits(v, M, N, K));
      if (ns > 0 && (!best || ns < best_ns)) best = &v, best_ns = ns;
    }
    if (best) return best;
  }
  return nullptr;
}

double VulkanBackend::ptx_ns(const ptx::MatmulVariant& v, int64_t M, int64_t N, int64_t K, int64_t splits) const {
  // Split K: f32 partials of Hopper's tiles only, in slices of whole steps at least kPtxMinK deep.
  if (splits > 1 && (v.sm != 90 || !v.f32_out || K % (splits * v.bk) != 0 || K / splits < kPtxMinK)) return 0;
  const int64_t tiles = (M / v.bm) * (N / v.bn) * splits;
  if (tiles < kPtxMinTiles) return 0;
  // The 128 x 256 tile's rate (H100, 4096^3: ~550 TFLOP/s), and the partials written, read back and summed at
  // ~2.5 TB/s: only their ratio matters, which splits pay.
  constexpr double kFlopsPerNs = 550e3, kBytesPerNs = 2500;
  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double partial_bytes = splits > 1 ? 2.0 * double(splits) * double(M) * double(N) * 4 : 0;
  return flops / (kFlopsPerNs * ptx_rate(v, tiles)) + partial_bytes / kBytesPerNs;
}

int64_t VulkanBackend::ptx_splits(const ptx::MatmulVariant& v, int64_t M, int64_t N, int64_t K) const {
  int64_t best = 1;
  double best_ns = ptx_ns(v, M, N, K, 1);
  for (const int64_t s : {2, 4, 8})
    if (const double ns = ptx_ns(v, M, N, K, s); ns > 0 && (best_ns == 0 || ns < best_ns)) best = s, best_ns = ns;
  return best;
}

double VulkanBackend::ptx_rate(const ptx::MatmulVariant& v, int64_t tiles) const {
  // A tile's rate relative to 128 x 256 (H100, `--alternate` at 4096^3, session 57: 128 x 128 532 -> 507 TFLOP/s,
  // 64 x 128 393), times the share of the last wave's block slots kept busy: GPT-2's N = 768 products run 128 x 128
  // (384 tiles, 2.9 waves on 132 SMs: 482 TFLOP/s) rather than 128 x 256 (192 tiles, 1.45 waves: 410).
  const int64_t area = int64_t(v.bm) * v.bn;
  const double tile_rate = area >= 128 * 256 ? 1.0 : area >= 128 * 128 ? 0.95 : 0.75;
  const int64_t sms = rt_->device().features().sm_count;
  if (sms == 0) return tile_rate;  // SM count unknown: the list's order
  // Blocks per SM: Hopper's 228 KiB of shared memory (a block also reserves 1 KiB), and 64 K registers at up to
  // 256 a thread (ptxas gave the tiles 114-255).
  constexpr int64_t kSharedPerSm = 228 * 1024, kRegsPerSm = 65536;
  const int64_t per_sm = std::min(kSharedPerSm / (v.shared_bytes + 1024), kRegsPerSm / (int64_t(v.threads) * 256));
  const int64_t slots = sms * std::max<int64_t>(1, per_sm);
  const int64_t waves = (tiles + slots - 1) / slots;
  return tile_rate * double(tiles) / double(waves * slots);
}

std::string VulkanBackend::matmul_tile_name(int64_t M, int64_t N, int64_t K, bool ta, bool tb, bool f32_out) const {
  const ptx::MatmulVariant* v = ptx_tile(M, N, K, ta, tb, f32_out);
  return v ? v->name : cm_tile(M, N, K, 1, f32_out).name;
}

bool VulkanBackend::run_ptx_matmul(const ptx::MatmulVariant& v, const std::shared_ptr<GpuBuffer>& a,
                                   const std::shared_ptr<GpuBuffer>& b, const std::shared_ptr<GpuBuffer>& out,
                                   int64_t M, int64_t N, int64_t K, const std::string& label,
                                   const std::shared_ptr<GpuBuffer>& bias, const std::shared_ptr<GpuBuffer>& resid,
                                   int64_t splits) {
  VkCuFunctionNVX fn = VK_NULL_HANDLE;
  auto& module = ptx_[v.sm == 90];
  try {
    if (!module) module = std::make_unique<PtxModule>(rt_->device(), v.sm);
    fn = module->function(v.name);
  } catch (const VkError& e) {  // a driver without this PTX's support: its products go to the other tiles
    if (e.result() == VK_ERROR_DEVICE_LOST || !ptx_tile_.empty()) throw;  // a forced variant must run
    std::fprintf(stderr, "%s; its products run other tiles\n", e.what());
    ptx_failed_[v.sm == 90] = true;
    return false;
  }
  // The kernels' arguments (ptx/matmul.cu): A, B, C, bias or 0, resid or 0, M, N, K.
  // Split K (ptx_splits): layer z of the grid writes its (M, N) f32 partial at z M N of a scratch buffer; one sum
  // over the layers, in order, writes out (the same bits every run).
  const auto part = splits > 1 ? rt_->scratch(uint64_t(splits * M * N) * 4) : nullptr;
  const std::shared_ptr<GpuBuffer>& dst = part ? part : out;
  const uint64_t pa = a->address(), pb = b->address(), pc = dst->address();
  const uint64_t pbias = bias ? bias->address() : 0, presid = resid ? resid->address() : 0;
  const uint32_t m = uint32_t(M), n = uint32_t(N), k = uint32_t(K);
  const void* params[] = {&pa, &pb, &pc, &pbias, &presid, &m, &n, &k};
  std::vector<Binding> bs{{a, false}, {b, false}, {dst, true}};
  if (bias) bs.push_back({bias, false});
  if (resid) bs.push_back({resid, false});
  rt_->queue().launch_cu(fn, bs, params, {uint32_t(N / v.bn), uint32_t(M / v.bm), uint32_t(splits)}, uint32_t(v.threads),
                         uint32_t(v.shared_bytes), 2.0 * double(M) * double(N) * double(K),
                         label.empty() ? std::string_view(v.name) : std::string_view(label));
  ++ptx_launches_;
  if (part) record_sum(part, out, 1, uint32_t(splits), uint32_t(M * N), 1.0f);
  return true;
}

}  // namespace alpha::vk
