// The embedded PTX module (ptx/CMakeLists.txt) and its matmul variants (ptx/matmul_variants.h), for vk/'s
// VK_NVX_binary_import path.
#pragma once
#include <span>
#include <string_view>

namespace alpha::ptx {

std::string_view matmul_module();  // the PTX text, NUL-terminated (the NUL is not in the view)

struct MatmulVariant {
  const char* name;
  int bm, bn, bk, stages;
  bool ta, tb, f32_out;
  int threads;        // (BM / WM) * (BN / WN) warps of 32
  int shared_bytes;   // stages * (BM + BN) * BK f16 values
};
std::span<const MatmulVariant> matmul_variants();
const MatmulVariant* find_matmul_variant(std::string_view name);  // nullptr when unknown

}  // namespace alpha::ptx
