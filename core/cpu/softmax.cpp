// Row softmax over the last dim. Legend: R rows, Tk row length; with the causal mask x is (..., Tq, Tk) and row
// i (index in dim -2) sees columns j <= i + (Tk - Tq). Max-subtracted, row sums accumulate in double.
#include "core/cpu/softmax.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

template <class T>
Tensor softmax_typed(const Tensor& xin, bool causal) {
  const Tensor x = xin.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const int64_t Tk = x.size(-1);
  if (out.numel() == 0 || Tk == 0) return out;
  const int64_t R = x.numel() / Tk;
  const int64_t Tq = causal ? x.size(-2) : 1;
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  parallel_for(R, std::max<int64_t>(1, 8192 / Tk), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = px + r * Tk;
      T* yr = po + r * Tk;
      const int64_t n = causal ? (r % Tq) + (Tk - Tq) + 1 : Tk;  // visible columns (>= 1)
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled() && simd::softmax_row(xr, yr, n, Tk)) continue;
      T m = xr[0];
      for (int64_t j = 1; j < n; ++j) m = std::max(m, xr[j]);
      double s = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const T e = std::exp(xr[j] - m);
        yr[j] = e;
        s += static_cast<double>(e);
      }
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
      for (int64_t j = n; j < Tk; ++j) yr[j] = T(0);  // masked: exactly zero probability
    }
  });
  return out;
}

// dx = y * (dy - sum(dy * y)); masked entries have y == 0 and so get dx == 0.
template <class T>
Tensor softmax_backward_typed(const Tensor& dyin, const Tensor& yin) {
  const Tensor dy = dyin.contiguous(), y = yin.contiguous();
  Tensor out = Tensor::empty(y.shape(), y.dtype());
  const int64_t Tk = y.size(-1);
  if (out.numel() == 0 || Tk == 0) return out;
  const int64_t R = y.numel() / Tk;
  const T* pd = dy.data<T>();
  const T* py = y.data<T>();
  T* po = out.mutable_data<T>();
  parallel_for(R, std::max<int64_t>(1, 8192 / Tk), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* dr = pd + r * Tk;
      const T* yr = py + r * Tk;
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled()) {
          simd::softmax_backward_row(dr, yr, po + r * Tk, Tk);
          continue;
        }
      double s = 0.0;
      for (int64_t j = 0; j < Tk; ++j) s += static_cast<double>(dr[j]) * static_cast<double>(yr[j]);
      const T st = static_cast<T>(s);
      T* xo = po + r * Tk;
      for (int64_t j = 0; j < Tk; ++j) xo[j] = yr[j] * (dr[j] - st);
    }
  });
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, bool causal) {
  return x.dtype() == DType::f64 ? softmax_typed<double>(x, causal) : softmax_typed<float>(x, causal);
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  return y.dtype() == DType::f64 ? softmax_backward_typed<double>(dy, y) : softmax_backward_typed<float>(dy, y);
}

}  // namespace alpha::cpu
