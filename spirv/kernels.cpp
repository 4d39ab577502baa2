#include "spirv/kernels.h"

namespace alpha::spirv {

const Blob* find_blob(std::string_view name) {
  for (const Blob& b : all_blobs())
    if (name == b.name) return &b;
  return nullptr;
}

bool declares_capability(const Blob& b, uint32_t cap) {
  // Capabilities lead the module (after the 5-word header): stop at the first other instruction.
  for (size_t i = 5; i + 1 < b.count && (b.words[i] >> 16) != 0; i += b.words[i] >> 16) {
    if ((b.words[i] & 0xffffu) != 17) return false;  // OpCapability
    if (b.words[i + 1] == cap) return true;
  }
  return false;
}

}  // namespace alpha::spirv
