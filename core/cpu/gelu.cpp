// GELU, tanh approximation (GPT-2): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// u is clamped where tanh already rounds to exactly +-1 in T (10 for f32, 20 for f64), so the clamp never
// changes a value, yet a huge |x| (x^3 -> inf) can never make inf * 0 = NaN in the derivative.
#include "core/cpu/gelu.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
template <class T> constexpr T kClamp = std::is_same_v<T, float> ? T(10) : T(20);

// tanh(u) for f32 through one expf: sign(u) (1 - e) / (1 + e), e = exp(-2|u|). glibc's tanhf goes through
// expm1f at several times the cost (a quarter of a CPU-recipe step); this is within ~1e-7 absolute of it, below
// what 1 + tanh(u) resolves. f64 (the gradcheck oracle) keeps std::tanh. NaN stays NaN.
template <class T>
T tanh_of(T u) {
  if constexpr (std::is_same_v<T, float>) {
    const float e = std::exp(-2.0f * std::fabs(u));
    return std::copysign((1.0f - e) / (1.0f + e), u);
  } else {
    return std::tanh(u);
  }
}

template <class T>
Tensor gelu_typed(const Tensor& xin) {
  const Tensor x = xin.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  const T k = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic), lim = kClamp<T>;
  parallel_for(x.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    if constexpr (std::is_same_v<T, float>)
      if (simd_enabled()) return simd::gelu(px + i0, po + i0, i1 - i0);
    for (int64_t i = i0; i < i1; ++i) {
      const T v = px[i];
      const T u = std::clamp(k * (v + a * v * v * v), -lim, lim);
      po[i] = T(0.5) * v * (T(1) + tanh_of(u));
    }
  });
  return out;
}

template <class T>
Tensor gelu_backward_typed(const Tensor& dyin, const Tensor& xin) {
  const Tensor dy = dyin.contiguous(), x = xin.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* pd = dy.data<T>();
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  const T k = static_cast<T>(kSqrt2OverPi), a = static_cast<T>(kCubic), lim = kClamp<T>;
  parallel_for(x.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    if constexpr (std::is_same_v<T, float>)
      if (simd_enabled()) return simd::gelu_backward(pd + i0, px + i0, po + i0, i1 - i0);
    for (int64_t i = i0; i < i1; ++i) {
      const T v = px[i];
      const T u = k * (v + a * v * v * v);
      const bool clamped = !(std::abs(u) < lim);  // also catches u = +-inf from an overflowing x^3
      const T th = tanh_of(std::clamp(u, -lim, lim));
      // d/dx = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx; the second term is 0 where u is clamped.
      T d = T(0.5) * (T(1) + th);
      if (!clamped) d += T(0.5) * v * (T(1) - th * th) * k * (T(1) + T(3) * a * v * v);
      po[i] = pd[i] * d;
    }
  });
  return out;
}

}  // namespace

Tensor gelu(const Tensor& x) { return x.dtype() == DType::f64 ? gelu_typed<double>(x) : gelu_typed<float>(x); }

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  return x.dtype() == DType::f64 ? gelu_backward_typed<double>(dy, x) : gelu_backward_typed<float>(dy, x);
}

}  // namespace alpha::cpu
