// Reductions over one dim: the tensor is seen as (outer, n, inner); each output element is one sequential
// loop over n, so sums are bit-identical run to run. Accumulates in double for f32 inputs.
#include "core/cpu/reduce.h"

#include <array>
#include <type_traits>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

Shape reduced_shape(const Shape& s, int64_t dim, bool keepdim) {
  Shape r = s;
  if (keepdim) r[dim] = 1;
  else r.erase(r.begin() + dim);
  return r;
}

// Views a contiguous shape as (outer, n, inner) around the reduced dim.
std::array<int64_t, 3> split_at(const Shape& s, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= s[i];
  for (size_t i = static_cast<size_t>(dim) + 1; i < s.size(); ++i) inner *= s[i];
  return {outer, s[dim], inner};
}

template <class T>
Tensor sum_typed(const Tensor& xin, int64_t dim, bool keepdim) {
  const Tensor x = xin.contiguous();
  const Shape& s = x.shape();
  // Plain variables, not a structured binding: clang 14 (the fuzz build) cannot capture bindings in a lambda.
  const std::array<int64_t, 3> split = split_at(s, dim);
  const int64_t outer = split[0], n = split[1], inner = split[2];
  Tensor out = Tensor::empty(reduced_shape(s, dim, keepdim), x.dtype());
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  // Tasks are (outer index, column block): a bias gradient (outer 1, n = B*T rows, inner C) splits its columns
  // over the pool. Each output is still one sequential loop over n, whatever the split.
  const int64_t cols = inner == 1 ? 1 : std::max<int64_t>(64, 4096 / std::max<int64_t>(1, n));
  const int64_t blocks = (inner + cols - 1) / cols;
  parallel_for(outer * blocks, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * std::min(inner, cols))),
               [&](int64_t t0, int64_t t1) {
    std::vector<double> acc(static_cast<size_t>(std::min(inner, cols)));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / blocks, c0 = (t % blocks) * cols, w = std::min(inner, c0 + cols) - c0;
      std::fill(acc.begin(), acc.end(), 0.0);
      const T* base = px + o * n * inner + c0;
      T* dst = po + o * inner + c0;
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled()) {  // double lanes: columns (inner > 1) keep the oracle's exact adds
          if (inner == 1) {
            *dst = static_cast<T>(simd::sum(base, n));
            continue;
          }
          for (int64_t k = 0; k < n; ++k) simd::sum_into(acc.data(), base + k * inner, w);
          for (int64_t i = 0; i < w; ++i) dst[i] = static_cast<T>(acc[i]);
          continue;
        }
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<double>(base[k * inner + i]);
      for (int64_t i = 0; i < w; ++i) dst[i] = static_cast<T>(acc[i]);
    }
  });
  return out;
}

template <class T>
std::pair<Tensor, Tensor> max_typed(const Tensor& xin, int64_t dim, bool keepdim) {
  const Tensor x = xin.contiguous();
  const Shape& s = x.shape();
  const auto [outer, n, inner] = split_at(s, dim);
  const Shape rs = reduced_shape(s, dim, keepdim);
  Tensor vals = Tensor::empty(rs, x.dtype()), idx = Tensor::empty(rs, DType::i32);
  const T* px = x.data<T>();
  T* pv = vals.mutable_data<T>();
  int32_t* pi = idx.mutable_data<int32_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const T* base = px + o * n * inner + i;
      T best = base[0];
      int32_t bi = 0;
      for (int64_t k = 1; k < n; ++k) {
        const T v = base[k * inner];
        if (v > best || (v != v && best == best)) {  // NaN wins, so it propagates like torch.max
          best = v;
          bi = static_cast<int32_t>(k);
        }
      }
      pv[o * inner + i] = best;
      pi[o * inner + i] = bi;
    }
  return {vals, idx};
}

}  // namespace

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  return x.dtype() == DType::f64 ? sum_typed<double>(x, dim, keepdim) : sum_typed<float>(x, dim, keepdim);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return x.dtype() == DType::f64 ? max_typed<double>(x, dim, keepdim) : max_typed<float>(x, dim, keepdim);
}

Tensor sum_all(const Tensor& x) {
  const Tensor flat = x.contiguous().view({x.numel()});
  return sum(flat, 0, false);
}

}  // namespace alpha::cpu
