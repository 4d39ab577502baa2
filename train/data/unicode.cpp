#include "data/unicode.h"

#include <algorithm>
#include <array>

namespace alpha::unicode_detail {

namespace {
// A flat table makes the common (BMP) lookup one load; the ranges are constant-initialized, so safe to read here.
const std::array<uint8_t, 0x10000>& bmp_table() {
  static const std::array<uint8_t, 0x10000> table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (size_t r = 0; r < kNumClassRanges; ++r)
      for (uint32_t cp = kClassRanges[r].lo; cp <= kClassRanges[r].hi && cp < 0x10000; ++cp) t[cp] = kClassRanges[r].cls;
    return t;
  }();
  return table;
}
}  // namespace

const uint8_t* const kBmpClass = bmp_table().data();

CpClass astral_class(uint32_t cp) {
  const ClassRange* end = kClassRanges + kNumClassRanges;
  const ClassRange* it = std::upper_bound(kClassRanges, end, cp, [](uint32_t v, const ClassRange& r) { return v < r.lo; });
  if (it == kClassRanges) return CpClass::other;
  --it;
  return cp <= it->hi ? static_cast<CpClass>(it->cls) : CpClass::other;
}

}  // namespace alpha::unicode_detail
