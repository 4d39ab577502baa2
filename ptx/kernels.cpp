#include "ptx/kernels.h"

#include "ptx/matmul_variants.h"

#include <cstdint>

extern "C" const char alpha_ptx_matmul[];
extern "C" const uint64_t alpha_ptx_matmul_size;

namespace alpha::ptx {

std::string_view matmul_module() {
  return {alpha_ptx_matmul, static_cast<size_t>(alpha_ptx_matmul_size)};
}

std::span<const MatmulVariant> matmul_variants() {
#define ALPHA_PTX_ROW(name, BM, BN, BK, WM, WN, S, G, TA, TB, F32) \
  {#name, BM, BN, BK, S, TA != 0, TB != 0, F32 != 0, (BM / WM) * (BN / WN) * 32, S * (BM + BN) * BK * 2},
  static const MatmulVariant rows[] = {ALPHA_PTX_MATMUL_VARIANTS(ALPHA_PTX_ROW)};
#undef ALPHA_PTX_ROW
  return rows;
}

const MatmulVariant* find_matmul_variant(std::string_view name) {
  for (const MatmulVariant& v : matmul_variants())
    if (name == v.name) return &v;
  return nullptr;
}

}  // namespace alpha::ptx
