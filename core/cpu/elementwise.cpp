// Element-wise CPU kernels over strided rows; contiguous rows get the plain pointer loop (the oracle) or, for
// f32, its Highway version (simd.h). Broadcast operands arrive as expanded views (stride 0), so there is one
// loop per op.
#include "core/cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "core/cpu/simd.h"
#include "core/cpu/strided.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

// vop: the simd.h op code of f for f32 (-1: none).
template <class T, class F>
Tensor map2(const Tensor& a, const Tensor& b, F f, int vop = -1) {
  const bool vec = std::is_same_v<T, float> && vop >= 0 && simd_enabled();
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "binary");
  Tensor out = Tensor::empty(shape, a.dtype());
  const Tensor ae = a.expand(shape), be = b.expand(shape);
  const T* pa = ae.data<T>();
  const T* pb = be.data<T>();
  T* po = out.mutable_data<T>();
  const Shape& so = out.strides();
  if (ae.is_contiguous() && be.is_contiguous()) {  // the common, fast case
    parallel_for(out.numel(), 1 << 15, [&](int64_t b0, int64_t b1) {
      if constexpr (std::is_same_v<T, float>)
        if (vec) return simd::binary(vop, pa + b0, pb + b0, po + b0, b1 - b0);
      for (int64_t i = b0; i < b1; ++i) po[i] = f(pa[i], pb[i]);
    });
    return out;
  }
  parallel_rows<3>(shape, {&so, &ae.strides(), &be.strides()}, {0, 0, 0},
                  [&](const std::array<int64_t, 3>& o, int64_t n, const std::array<int64_t, 3>& s) {
                    T* d = po + o[0];
                    const T* x = pa + o[1];
                    const T* y = pb + o[2];
                    if constexpr (std::is_same_v<T, float>)
                      if (vec && s[0] == 1 && s[1] == 1 && s[2] == 1) return simd::binary(vop, x, y, d, n);
                    for (int64_t i = 0; i < n; ++i) d[i * s[0]] = f(x[i * s[1]], y[i * s[2]]);
                  });
  return out;
}

template <class T, class F, class V>
Tensor map1(const Tensor& x, F f, V vf) {  // vf(x, out, n): the f32 Highway kernel, or nullptr
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  if (x.is_contiguous()) {
    parallel_for(out.numel(), 1 << 15, [&](int64_t b0, int64_t b1) {
      if constexpr (std::is_same_v<T, float> && !std::is_null_pointer_v<V>)
        if (simd_enabled()) return vf(px + b0, po + b0, b1 - b0);
      for (int64_t i = b0; i < b1; ++i) po[i] = f(px[i]);
    });
    return out;
  }
  parallel_rows<2>(x.shape(), {&out.strides(), &x.strides()}, {0, 0},
                  [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
                    for (int64_t i = 0; i < n; ++i) po[o[0] + i * s[0]] = f(px[o[1] + i * s[1]]);
                  });
  return out;
}

template <class T>
Tensor binary_typed(BinaryOp op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::add: return map2<T>(a, b, [](T x, T y) { return x + y; }, 0);
    case BinaryOp::sub: return map2<T>(a, b, [](T x, T y) { return x - y; }, 1);
    case BinaryOp::mul: return map2<T>(a, b, [](T x, T y) { return x * y; }, 2);
    case BinaryOp::div: return map2<T>(a, b, [](T x, T y) { return x / y; }, 3);
  }
  return {};
}

template <int Op>
void unary_kernel(const float* x, float* out, int64_t n) { simd::unary(Op, x, out, n); }

template <class T>
Tensor unary_typed(UnaryOp op, const Tensor& x) {
  switch (op) {
    case UnaryOp::neg: return map1<T>(x, [](T v) { return -v; }, unary_kernel<0>);
    case UnaryOp::exp: return map1<T>(x, [](T v) { return std::exp(v); }, unary_kernel<1>);
    case UnaryOp::log: return map1<T>(x, [](T v) { return std::log(v); }, unary_kernel<2>);
    case UnaryOp::sqrt: return map1<T>(x, [](T v) { return std::sqrt(v); }, unary_kernel<3>);
  }
  return {};
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  return a.dtype() == DType::f64 ? binary_typed<double>(op, a, b) : binary_typed<float>(op, a, b);
}

Tensor unary(UnaryOp op, const Tensor& x) {
  return x.dtype() == DType::f64 ? unary_typed<double>(op, x) : unary_typed<float>(op, x);
}

Tensor affine(const Tensor& x, double mul, double add) {
  if (x.dtype() == DType::f64) return map1<double>(x, [=](double v) { return v * mul + add; }, nullptr);
  const float m = static_cast<float>(mul), a = static_cast<float>(add);
  return map1<float>(x, [=](float v) { return v * m + a; },
                     [=](const float* px, float* po, int64_t n) { simd::affine(px, po, n, m, a); });
}

void add_inplace(Tensor& dst, const Tensor& src, double alpha) {
  const Tensor se = src.expand(dst.shape());
  auto run = [&](auto* pd, const auto* ps) {
    using T = std::remove_pointer_t<decltype(pd)>;
    const T al = static_cast<T>(alpha);
    auto row = [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
      if constexpr (std::is_same_v<T, float>)
        if (s[0] == 1 && s[1] == 1 && simd_enabled()) return simd::axpy(pd + o[0], ps + o[1], n, al);
      for (int64_t i = 0; i < n; ++i) pd[o[0] + i * s[0]] += al * ps[o[1] + i * s[1]];
    };
    if (rows_disjoint(dst)) parallel_rows<2>(dst.shape(), {&dst.strides(), &se.strides()}, {0, 0}, row);
    else for_each_row<2>(dst.shape(), {&dst.strides(), &se.strides()}, {0, 0}, row);
  };
  if (dst.dtype() == DType::f64) run(dst.mutable_data<double>(), se.data<double>());
  else run(dst.mutable_data<float>(), se.data<float>());
}

}  // namespace alpha::cpu
