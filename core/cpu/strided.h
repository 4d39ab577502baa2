// Strided iteration shared by the CPU kernels: walks N tensors of one shape (strides may differ, 0 for
// broadcast dims) row by row, so the inner loop of a kernel is a plain pointer loop.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/parallel.h"
#include "core/tensor.h"

namespace alpha::cpu {

// Calls row(offsets, n, inner_strides) once per innermost row r in [r0, r1) (rows in row-major order of the outer
// dims); offsets are element offsets (including each tensor's own offset) of the row's first element.
template <size_t N, class F>
void for_each_row_range(const Shape& shape, const std::array<const Shape*, N>& strides,
                        const std::array<int64_t, N>& base, int64_t r0, int64_t r1, F&& row) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  for (int64_t d : shape)
    if (d == 0) return;
  if (nd == 0) {
    std::array<int64_t, N> inner{};
    if (r0 == 0 && r1 > 0) row(base, int64_t{1}, inner);
    return;
  }
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = (*strides[k])[nd - 1];
  const int64_t n = shape[nd - 1];
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  std::array<int64_t, N> off = base;
  for (int64_t d = nd - 2, r = r0; d >= 0; --d) {  // r0's index over the outer dims
    idx[d] = r % shape[d];
    r /= shape[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * (*strides[k])[d];
  }
  for (int64_t r = r0; r < r1; ++r) {
    row(off, n, inner);
    for (int64_t d = nd - 2; d >= 0; --d) {  // odometer increment over the outer dims
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += (*strides[k])[d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Number of innermost rows of shape (1 for a 0-d tensor, 0 when a dim is 0).
inline int64_t row_count(const Shape& shape) {
  int64_t r = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) r *= shape[d];
  for (int64_t d : shape)
    if (d == 0) return 0;
  return r;
}

// All rows, one thread.
template <size_t N, class F>
void for_each_row(const Shape& shape, const std::array<const Shape*, N>& strides,
                  const std::array<int64_t, N>& base, F&& row) {
  for_each_row_range<N>(shape, strides, base, 0, row_count(shape), row);
}

// True when no two elements of t share memory as far as views here can make them (no stride-0 dim of size > 1:
// expand is the only view that aliases), so its rows may be written in parallel.
inline bool rows_disjoint(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.strides()[d] == 0) return false;
  return true;
}

// All rows split over the pool (>= ~32K elements a task). Only for kernels whose rows write disjoint outputs.
template <size_t N, class F>
void parallel_rows(const Shape& shape, const std::array<const Shape*, N>& strides, const std::array<int64_t, N>& base,
                   F&& row) {
  const int64_t n = shape.empty() ? 1 : std::max<int64_t>(1, shape.back());
  parallel_for(row_count(shape), std::max<int64_t>(1, (int64_t{1} << 15) / n),
               [&](int64_t r0, int64_t r1) { for_each_row_range<N>(shape, strides, base, r0, r1, row); });
}

}  // namespace alpha::cpu
