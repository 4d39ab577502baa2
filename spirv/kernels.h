// Embedded SPIR-V blobs, one per shader variant (spirv/CMakeLists.txt lists them). vk/ looks kernels up by
// variant name, e.g. "binary_f32_vec4".
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace alpha::spirv {

struct Blob {
  const char* name;
  const uint32_t* words;
  size_t count;  // in 32-bit words
};

std::span<const Blob> all_blobs();          // generated registry
const Blob* find_blob(std::string_view name);  // nullptr when unknown
// True when the module declares OpCapability cap (e.g. kCapConversionsNV: spirv/nv2khr.h).
bool declares_capability(const Blob& blob, uint32_t cap);
// SPV_NV_cooperative_matrix2's CooperativeMatrixConversionsNV: a KHR twin converting an accumulator into an operand.
constexpr uint32_t kCapConversionsNV = 5431;

}  // namespace alpha::spirv
