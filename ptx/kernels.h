// The embedded PTX modules (ptx/CMakeLists.txt) and their matmul variants (ptx/matmul_variants.h), for vk/'s
// VK_NVX_binary_import path.
#pragma once
#include <span>
#include <string_view>

namespace alpha::ptx {

// The PTX text of the module for `sm` (80: ptx/matmul.cu, any GPU from Ampere on; 90: ptx/matmul_sm90.cu, sm_90a,
// Hopper only), NUL-terminated (the NUL is not in the view).
std::string_view matmul_module(int sm);

struct MatmulVariant {
  const char* name;
  int sm;             // its module's
  int bm, bn, bk, stages;
  bool ta, tb, f32_out;
  int threads;        // sm 80: (BM / WM) * (BN / WN) warps of 32; sm 90: BM / 64 warpgroups of 128
  int shared_bytes;   // stages * (BM + BN) * BK f16 values
};
// Hopper's variants first: by shape the first that fits a product runs it (vk/nvx.cpp).
std::span<const MatmulVariant> matmul_variants();
const MatmulVariant* find_matmul_variant(std::string_view name);  // nullptr when unknown

}  // namespace alpha::ptx
