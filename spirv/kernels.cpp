#include "spirv/kernels.h"

namespace alpha::spirv {

const Blob* find_blob(std::string_view name) {
  for (const Blob& b : all_blobs())
    if (name == b.name) return &b;
  return nullptr;
}

}  // namespace alpha::spirv
