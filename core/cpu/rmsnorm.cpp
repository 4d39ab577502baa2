// RMSNorm over the last dim (Llama). Legend: N rows (product of the leading dims), C channels.
// y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps). Row sums and the dw reduction accumulate in double in a
// fixed order, so results are bit-identical run to run. Plain loops: the readable oracle.
#include "core/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"

namespace alpha::cpu {

namespace {

template <class T>
ops::RMSNormOut rmsnorm_typed(const Tensor& xin, const Tensor& win, double eps) {
  const Tensor x = xin.contiguous();
  const Tensor w = win.defined() ? win.contiguous() : Tensor();
  const int64_t C = x.size(-1), N = x.numel() / C;
  ops::RMSNormOut r{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(Shape(x.shape().begin(), x.shape().end() - 1), x.dtype())};
  if (N == 0) return r;
  const T* px = x.data<T>();
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  T* py = r.y.mutable_data<T>();
  T* pr = r.rstd.mutable_data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* xr = px + n * C;
      double ss = 0.0;
      for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * static_cast<double>(xr[c]);
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
      T* yr = py + n * C;
      for (int64_t c = 0; c < C; ++c)
        yr[c] = static_cast<T>(static_cast<double>(xr[c]) * rs * (pw ? static_cast<double>(pw[c]) : 1.0));
      pr[n] = static_cast<T>(rs);
    }
  });
  return r;
}

template <class T>
ops::RMSNormGrads rmsnorm_backward_typed(const Tensor& dyin, const Tensor& xin, const Tensor& win, const Tensor& rin) {
  const Tensor dy = dyin.contiguous(), x = xin.contiguous(), rstd = rin.contiguous();
  const Tensor w = win.defined() ? win.contiguous() : Tensor();
  const int64_t C = x.size(-1), N = x.numel() / C;
  ALPHA_CHECK(rstd.numel() == N && rstd.dtype() == x.dtype(), ShapeError,
              "[rmsnorm_backward] rstd {} does not match x {}", rstd.str(), x.str());
  ops::RMSNormGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  if (w.defined()) g.dw = Tensor::zeros({C}, x.dtype());
  if (N == 0) return g;
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  const T* pr = rstd.data<T>();
  // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd.
  T* pdx = g.dx.mutable_data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* xr = px + n * C;
      const T* dr = pdy + n * C;
      const double rs = static_cast<double>(pr[n]);
      double s = 0.0;
      for (int64_t c = 0; c < C; ++c)
        s += static_cast<double>(dr[c]) * (pw ? static_cast<double>(pw[c]) : 1.0) * static_cast<double>(xr[c]) * rs;
      s /= static_cast<double>(C);
      for (int64_t c = 0; c < C; ++c) {
        const double gc = static_cast<double>(dr[c]) * (pw ? static_cast<double>(pw[c]) : 1.0);
        pdx[n * C + c] = static_cast<T>(rs * (gc - static_cast<double>(xr[c]) * rs * s));
      }
    }
  });
  // dw[c] = sum_n dy * xhat: each channel one sequential loop over the rows.
  if (!pw) return g;
  T* pdw = g.dw.mutable_data<T>();
  parallel_for(C, std::max<int64_t>(1, 65536 / N), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double a = 0.0;
      for (int64_t n = 0; n < N; ++n)
        a += static_cast<double>(pdy[n * C + c]) * static_cast<double>(px[n * C + c]) * static_cast<double>(pr[n]);
      pdw[c] = static_cast<T>(a);
    }
  });
  return g;
}

}  // namespace

ops::RMSNormOut rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  return x.dtype() == DType::f64 ? rmsnorm_typed<double>(x, w, eps) : rmsnorm_typed<float>(x, w, eps);
}

ops::RMSNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  return x.dtype() == DType::f64 ? rmsnorm_backward_typed<double>(dy, x, w, rstd)
                                 : rmsnorm_backward_typed<float>(dy, x, w, rstd);
}

}  // namespace alpha::cpu
