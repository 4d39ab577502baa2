// Global-norm gradient clipping on the CPU: one sequential double accumulation over every grad element (fixed
// order, so the norm is deterministic), then an out-of-place rescale like torch.nn.utils.clip_grad_norm_.
#include "optim/clip.h"

#include <cmath>

#include "core/parallel.h"

namespace alpha {

namespace {

template <class T> double sum_squares(const Tensor& g) {
  const T* p = g.data<T>();
  double s = 0.0;
  for (int64_t i = 0, n = g.numel(); i < n; ++i) s += static_cast<double>(p[i]) * static_cast<double>(p[i]);
  return s;
}

// torch computes clip_coef = max_norm / (total_norm + 1e-6) as a tensor of the grads' dtype, so for f32 grads the
// coefficient is rounded like torch's (the norm itself is still accumulated in double).
template <class T> Tensor scaled(const Tensor& g, double max_norm, double norm) {
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  const T* src = g.data<T>();
  T* dst = out.mutable_data<T>();
  const T c = static_cast<T>(max_norm) / (static_cast<T>(norm) + static_cast<T>(1e-6));
  parallel_for(g.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) dst[i] = src[i] * c;
  });
  return out;
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  ALPHA_CHECK(!std::isnan(max_norm), ValueError, "[clip_grad_norm] max_norm is NaN");
  std::vector<Tensor> grads(params.size());
  double sumsq = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined()) continue;
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    ALPHA_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f64, DTypeError,
                "[clip_grad_norm] grad of param {} is {}, expected f32 or f64", i, g.str());
    grads[i] = g.contiguous();
    sumsq += g.dtype() == DType::f32 ? sum_squares<float>(grads[i]) : sum_squares<double>(grads[i]);
  }
  const double norm = std::sqrt(sumsq);
  if (max_norm > 0.0 && norm > max_norm) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (!grads[i].defined()) continue;
      Tensor p = params[i];  // handle copy: set_grad writes the shared TensorImpl
      p.set_grad(grads[i].dtype() == DType::f32 ? scaled<float>(grads[i], max_norm, norm)
                                                 : scaled<double>(grads[i], max_norm, norm));
    }
  }
  return norm;
}

}  // namespace alpha
