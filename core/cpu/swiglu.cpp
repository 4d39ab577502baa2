// SwiGLU: y = silu(g) * u, silu(g) = g * sigmoid(g); dg = dy * u * sigmoid(g) * (1 + g * (1 - sigmoid(g))),
// du = dy * silu(g). ReLU²: y = max(x, 0)^2, dx = 2 * max(x, 0) * dy. Element-wise plain loops (the oracle).
// sigmoid(g) = 1 / (1 + exp(-g)) saturates cleanly to 0 or 1 for large |g| (exp gives inf or 0, never NaN).
#include "core/cpu/swiglu.h"

#include <cmath>

#include "core/parallel.h"

namespace alpha::cpu {

namespace {

template <class T, class F>
Tensor map2(const Tensor& ain, const Tensor& bin, F f) {
  const Tensor a = ain.contiguous(), b = bin.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.mutable_data<T>();
  parallel_for(a.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) po[i] = f(pa[i], pb[i]);
  });
  return out;
}

template <class T> T sigmoid(T g) { return T(1) / (T(1) + std::exp(-g)); }

template <class T>
ops::SwiGLUGrads swiglu_backward_typed(const Tensor& dyin, const Tensor& gin, const Tensor& uin) {
  const Tensor dy = dyin.contiguous(), g = gin.contiguous(), u = uin.contiguous();
  ops::SwiGLUGrads r{Tensor::empty(g.shape(), g.dtype()), Tensor::empty(g.shape(), g.dtype())};
  const T* pd = dy.data<T>();
  const T* pg = g.data<T>();
  const T* pu = u.data<T>();
  T* pdg = r.dgate.mutable_data<T>();
  T* pdu = r.dup.mutable_data<T>();
  parallel_for(g.numel(), 1 << 14, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const T s = sigmoid(pg[i]);
      pdg[i] = pd[i] * pu[i] * s * (T(1) + pg[i] * (T(1) - s));
      pdu[i] = pd[i] * pg[i] * s;
    }
  });
  return r;
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  if (gate.dtype() == DType::f64)
    return map2<double>(gate, up, [](double g, double u) { return g * sigmoid(g) * u; });
  return map2<float>(gate, up, [](float g, float u) { return g * sigmoid(g) * u; });
}

ops::SwiGLUGrads swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) {
  return gate.dtype() == DType::f64 ? swiglu_backward_typed<double>(dy, gate, up)
                                    : swiglu_backward_typed<float>(dy, gate, up);
}

Tensor relu2(const Tensor& x) {
  if (x.dtype() == DType::f64) return map2<double>(x, x, [](double v, double) { return v > 0 ? v * v : 0.0; });
  return map2<float>(x, x, [](float v, float) { return v > 0 ? v * v : 0.0f; });
}

Tensor relu2_backward(const Tensor& dy, const Tensor& x) {
  if (x.dtype() == DType::f64) return map2<double>(dy, x, [](double d, double v) { return v > 0 ? 2.0 * v * d : 0.0; });
  return map2<float>(dy, x, [](float d, float v) { return v > 0 ? 2.0f * v * d : 0.0f; });
}

}  // namespace alpha::cpu
