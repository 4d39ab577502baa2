// LayerNorm over the last dim. Legend: N rows (product of the leading dims), C channels.
// Row statistics and the dw/db reductions accumulate in double (also for f32) in a fixed order, so results
// are bit-identical run to run. The backward follows llm.c's layernorm_backward.
#include "core/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

Shape row_shape(const Shape& s) { return Shape(s.begin(), s.end() - 1); }

template <class T>
ops::LayerNormOut layernorm_typed(const Tensor& xin, const Tensor& win, const Tensor& bin, double eps) {
  const Tensor x = xin.contiguous();
  const Tensor w = win.defined() ? win.contiguous() : Tensor(), b = bin.defined() ? bin.contiguous() : Tensor();
  const int64_t C = x.size(-1), N = x.numel() / C;
  ops::LayerNormOut r{Tensor::empty(x.shape(), x.dtype()), Tensor::empty(row_shape(x.shape()), x.dtype()),
                      Tensor::empty(row_shape(x.shape()), x.dtype())};
  if (N == 0) return r;
  const T* px = x.data<T>();
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  const T* pb = b.defined() ? b.data<T>() : nullptr;
  T* py = r.y.mutable_data<T>();
  T* pm = r.mean.mutable_data<T>();
  T* pr = r.rstd.mutable_data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled()) {
          simd::layernorm_row(px + n * C, pw, pb, py + n * C, C, eps, pm + n, pr + n);
          continue;
        }
      const T* xr = px + n * C;
      double m = 0.0;
      for (int64_t c = 0; c < C; ++c) m += static_cast<double>(xr[c]);
      m /= static_cast<double>(C);
      double v = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double d = static_cast<double>(xr[c]) - m;
        v += d * d;
      }
      v /= static_cast<double>(C);  // biased variance, as PyTorch/GPT-2
      const double rs = 1.0 / std::sqrt(v + eps);
      T* yr = py + n * C;
      for (int64_t c = 0; c < C; ++c) {
        double o = (static_cast<double>(xr[c]) - m) * rs;
        if (pw) o *= static_cast<double>(pw[c]);
        if (pb) o += static_cast<double>(pb[c]);
        yr[c] = static_cast<T>(o);
      }
      pm[n] = static_cast<T>(m);
      pr[n] = static_cast<T>(rs);
    }
  });
  return r;
}

template <class T>
ops::LayerNormGrads layernorm_backward_typed(const Tensor& dyin, const Tensor& xin, const Tensor& win,
                                             const Tensor& mean_in, const Tensor& rstd_in, bool has_bias) {
  ALPHA_CHECK(mean_in.defined() && rstd_in.defined(), ValueError, "[layernorm_backward] mean/rstd are undefined");
  const Tensor dy = dyin.contiguous(), x = xin.contiguous();
  const Tensor w = win.defined() ? win.contiguous() : Tensor();
  const Tensor mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
  const int64_t C = x.size(-1), N = x.numel() / C;
  ALPHA_CHECK(mean.numel() == N && rstd.numel() == N && mean.dtype() == x.dtype() && rstd.dtype() == x.dtype(),
              ShapeError, "[layernorm_backward] mean {} / rstd {} do not match x {}", mean.str(), rstd.str(),
              x.str());
  ops::LayerNormGrads g;
  g.dx = Tensor::empty(x.shape(), x.dtype());
  if (w.defined()) g.dw = Tensor::zeros({C}, x.dtype());
  if (has_bias) g.db = Tensor::zeros({C}, x.dtype());
  if (N == 0) return g;
  const T* pdy = dy.data<T>();
  const T* px = x.data<T>();
  const T* pw = w.defined() ? w.data<T>() : nullptr;
  const T* pm = mean.data<T>();
  const T* pr = rstd.data<T>();

  // dx per row: dx = rstd * (w*dy - mean(w*dy) - norm * mean(w*dy*norm)).
  T* pdx = g.dx.mutable_data<T>();
  parallel_for(N, std::max<int64_t>(1, 8192 / C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled()) {
          simd::layernorm_backward_row(pdy + n * C, px + n * C, pw, pm[n], pr[n], pdx + n * C, C);
          continue;
        }
      const T* xr = px + n * C;
      const T* dr = pdy + n * C;
      const double m = static_cast<double>(pm[n]), rs = static_cast<double>(pr[n]);
      double s1 = 0.0, s2 = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const double norm = (static_cast<double>(xr[c]) - m) * rs;
        const double wd = static_cast<double>(dr[c]) * (pw ? static_cast<double>(pw[c]) : 1.0);
        s1 += wd;
        s2 += wd * norm;
      }
      s1 /= static_cast<double>(C);
      s2 /= static_cast<double>(C);
      T* xo = pdx + n * C;
      for (int64_t c = 0; c < C; ++c) {
        const double norm = (static_cast<double>(xr[c]) - m) * rs;
        const double wd = static_cast<double>(dr[c]) * (pw ? static_cast<double>(pw[c]) : 1.0);
        xo[c] = static_cast<T>((wd - s1 - norm * s2) * rs);
      }
    }
  });

  // dw[c] = sum_n dy*norm, db[c] = sum_n dy: each channel is one sequential loop over the rows.
  if (!pw && !has_bias) return g;
  T* pdw = pw ? g.dw.mutable_data<T>() : nullptr;
  T* pdb = has_bias ? g.db.mutable_data<T>() : nullptr;
  constexpr int64_t kBlock = 64;  // channels per task: rows are read in cache-friendly strips
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  parallel_for(blocks, std::max<int64_t>(1, 65536 / (N * kBlock)), [&](int64_t b0, int64_t b1) {
    std::vector<double> aw(kBlock), ab(kBlock);
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled()) {
          simd::layernorm_param_grads(pdy, px, pm, pr, N, C, c0, c1, pdw, pdb);
          continue;
        }
      std::fill(aw.begin(), aw.end(), 0.0);
      std::fill(ab.begin(), ab.end(), 0.0);
      for (int64_t n = 0; n < N; ++n) {
        const double m = static_cast<double>(pm[n]), rs = static_cast<double>(pr[n]);
        const T* xr = px + n * C;
        const T* dr = pdy + n * C;
        for (int64_t c = c0; c < c1; ++c) {
          const double d = static_cast<double>(dr[c]);
          aw[c - c0] += d * (static_cast<double>(xr[c]) - m) * rs;
          ab[c - c0] += d;
        }
      }
      for (int64_t c = c0; c < c1; ++c) {
        if (pdw) pdw[c] = static_cast<T>(aw[c - c0]);
        if (pdb) pdb[c] = static_cast<T>(ab[c - c0]);
      }
    }
  });
  return g;
}

}  // namespace

ops::LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return x.dtype() == DType::f64 ? layernorm_typed<double>(x, w, b, eps) : layernorm_typed<float>(x, w, b, eps);
}

ops::LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                       const Tensor& rstd, bool has_bias) {
  return x.dtype() == DType::f64 ? layernorm_backward_typed<double>(dy, x, w, mean, rstd, has_bias)
                                 : layernorm_backward_typed<float>(dy, x, w, mean, rstd, has_bias);
}

}  // namespace alpha::cpu
