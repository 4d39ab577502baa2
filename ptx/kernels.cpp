#include "ptx/kernels.h"

#include <cstdint>

#include "ptx/matmul_variants.h"

extern "C" const char alpha_ptx_matmul[], alpha_ptx_matmul_sm90[];
extern "C" const uint64_t alpha_ptx_matmul_size, alpha_ptx_matmul_sm90_size;

namespace alpha::ptx {

std::string_view matmul_module(int sm) {
  if (sm == 90) return {alpha_ptx_matmul_sm90, static_cast<size_t>(alpha_ptx_matmul_sm90_size)};
  return {alpha_ptx_matmul, static_cast<size_t>(alpha_ptx_matmul_size)};
}

std::span<const MatmulVariant> matmul_variants() {
#define ALPHA_PTX_ROW90(name, BM, BN, BK, WM, WN, S, G, TA, TB, F32) \
  {#name, 90, BM, BN, BK, S, TA != 0, TB != 0, F32 != 0, BM / 64 * 128, S * (BM + BN) * BK * 2},
#define ALPHA_PTX_ROW80(name, BM, BN, BK, WM, WN, S, G, TA, TB, F32) \
  {#name, 80, BM, BN, BK, S, TA != 0, TB != 0, F32 != 0, (BM / WM) * (BN / WN) * 32, S * (BM + BN) * BK * 2},
  static const MatmulVariant rows[] = {ALPHA_PTX_MATMUL_SM90_VARIANTS(ALPHA_PTX_ROW90)
                                           ALPHA_PTX_MATMUL_VARIANTS(ALPHA_PTX_ROW80)};
#undef ALPHA_PTX_ROW80
#undef ALPHA_PTX_ROW90
  return rows;
}

const MatmulVariant* find_matmul_variant(std::string_view name) {
  for (const MatmulVariant& v : matmul_variants())
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace alpha::ptx
