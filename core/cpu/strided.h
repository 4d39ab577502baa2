// Strided iteration shared by the CPU kernels: walks N tensors of one shape (strides may differ, 0 for
// broadcast dims) row by row, so the inner loop of a kernel is a plain pointer loop.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace alpha::cpu {

// Calls row(offsets, n, inner_strides) once per innermost row; offsets are element offsets (including
// each tensor's own offset) of the row's first element.
template <size_t N, class F>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides,
                  const std::array<int64_t, N>& base, F&& row) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  for (int64_t d : shape)
    if (d == 0) return;
  if (nd == 0) {
    std::array<int64_t, N> inner{};
    row(base, int64_t{1}, inner);
    return;
  }
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = (*strides[k])[nd - 1];
  const int64_t n = shape[nd - 1];
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  std::array<int64_t, N> off = base;
  while (true) {
    row(off, n, inner);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {  // odometer increment over the outer dims
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += (*strides[k])[d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace alpha::cpu
