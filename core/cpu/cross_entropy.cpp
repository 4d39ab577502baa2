// Fused log-softmax + NLL. Legend: N rows, V classes. Row log-sum-exps are max-subtracted and accumulated in
// double, so logits of 1e4 give finite results. Per-row losses are summed in row order (deterministic).
// When every row is ignored (count == 0) the loss is 0, not 0/0, and the backward gives all-zero gradients.
#include "core/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

// Range-checks every target (before any parallel region) and returns how many rows are not ignored.
int64_t check_targets(const int32_t* pt, int64_t N, int64_t V, int64_t ignore_index, const char* op) {
  int64_t count = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (pt[n] == ignore_index) continue;
    ALPHA_CHECK(pt[n] >= 0 && pt[n] < V, IndexError, "[{}] target {} at row {} out of range for {} classes", op,
                pt[n], n, V);
    ++count;
  }
  return count;
}

template <class T>
ops::CrossEntropyOut cross_entropy_typed(const Tensor& lin, const Tensor& tin, int64_t ignore_index) {
  const Tensor logits = lin.contiguous(), targets = tin.contiguous();
  const int64_t N = logits.size(0), V = logits.size(1);
  const int32_t* pt = targets.data<int32_t>();
  const int64_t count = check_targets(pt, N, V, ignore_index, "cross_entropy");
  const T* pl = logits.data<T>();
  // (N) f64 whatever the logits' dtype: near |logit| ~ 1e4 an f32 lse would put ~5e-4 error into every prob.
  Tensor lse = Tensor::empty({N}, DType::f64);
  double* ps = lse.mutable_data<double>();
  std::vector<double> row_loss(static_cast<size_t>(N), 0.0);
  parallel_for(N, std::max<int64_t>(1, 8192 / V), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      const T* r = pl + n * V;
      if constexpr (std::is_same_v<T, float>) {
        double l = 0.0;
        if (simd_enabled() && simd::log_sum_exp(r, V, &l)) {
          ps[n] = l;
          if (pt[n] != ignore_index) row_loss[n] = l - static_cast<double>(r[pt[n]]);
          continue;
        }
      }
      double m = static_cast<double>(r[0]);
      for (int64_t v = 1; v < V; ++v) m = std::max(m, static_cast<double>(r[v]));
      double s = 0.0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(static_cast<double>(r[v]) - m);
      const double l = m + std::log(s);
      ps[n] = l;
      if (pt[n] != ignore_index) row_loss[n] = l - static_cast<double>(r[pt[n]]);
    }
  });
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += row_loss[n];
  const double loss = count > 0 ? total / static_cast<double>(count) : 0.0;
  return {Tensor::scalar(loss, logits.dtype()), lse, count, {}};
}

template <class T>
Tensor cross_entropy_backward_typed(const Tensor& lin, const Tensor& tin, const Tensor& lse_in, double dloss,
                                    int64_t count, int64_t ignore_index) {
  const Tensor logits = lin.contiguous(), targets = tin.contiguous();
  ALPHA_CHECK(lse_in.defined() && lse_in.dtype() == DType::f64 && lse_in.shape() == Shape{logits.size(0)},
              ShapeError, "[cross_entropy_backward] lse {} does not match logits {}", lse_in.str(), logits.str());
  const Tensor lse = lse_in.contiguous();
  const int64_t N = logits.size(0), V = logits.size(1);
  const int32_t* pt = targets.data<int32_t>();
  check_targets(pt, N, V, ignore_index, "cross_entropy_backward");
  Tensor dl = Tensor::empty(logits.shape(), logits.dtype());  // (N, V)
  const T* pl = logits.data<T>();
  const double* ps = lse.data<double>();
  T* pd = dl.mutable_data<T>();
  const double sc = count > 0 ? dloss / static_cast<double>(count) : 0.0;
  parallel_for(N, std::max<int64_t>(1, 8192 / V), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      T* d = pd + n * V;
      if (pt[n] == ignore_index) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const T* r = pl + n * V;
      const double l = ps[n];
      bool done = false;
      if constexpr (std::is_same_v<T, float>)
        if (simd_enabled() && std::isfinite(l)) {
          simd::scaled_exp_shift(r, d, V, l, static_cast<float>(sc));
          done = true;
        }
      if (!done)
        for (int64_t v = 0; v < V; ++v) d[v] = static_cast<T>(sc * std::exp(static_cast<double>(r[v]) - l));
      d[pt[n]] = static_cast<T>(sc * (std::exp(static_cast<double>(r[pt[n]]) - l) - 1.0));
    }
  });
  return dl;
}

}  // namespace

ops::CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  return logits.dtype() == DType::f64 ? cross_entropy_typed<double>(logits, targets, ignore_index)
                                      : cross_entropy_typed<float>(logits, targets, ignore_index);
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index) {
  ALPHA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "[cross_entropy_backward] expected logits (N, V) and targets (N), got {} and {}", logits.str(),
              targets.str());
  return logits.dtype() == DType::f64
             ? cross_entropy_backward_typed<double>(logits, targets, lse, dloss, count, ignore_index)
             : cross_entropy_backward_typed<float>(logits, targets, lse, dloss, count, ignore_index);
}

}  // namespace alpha::cpu
