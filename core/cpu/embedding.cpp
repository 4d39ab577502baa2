// Embedding gather and its scatter-add backward. Legend: V vocabulary, C channels, N = numel(idx) lookups.
// Indices are range-checked up front so no exception can escape a worker thread.
#include "core/cpu/embedding.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu/simd.h"
#include "core/parallel.h"

namespace alpha::cpu {

namespace {

// Throws IndexError naming the first index outside [0, vocab).
void check_indices(const int32_t* idx, int64_t n, int64_t vocab, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    ALPHA_CHECK(idx[i] >= 0 && idx[i] < vocab, IndexError, "[{}] index {} out of range for vocab {}", op, idx[i],
                vocab);
}

template <class T>
Tensor embedding_typed(const Tensor& win, const Tensor& idx_in) {
  const Tensor w = win.contiguous(), idx = idx_in.contiguous();
  const int64_t V = w.size(0), C = w.size(1), N = idx.numel();
  const int32_t* pi = idx.data<int32_t>();
  check_indices(pi, N, V, "embedding");
  Shape os = idx.shape();
  os.push_back(C);
  Tensor out = Tensor::empty(os, w.dtype());  // (..., C)
  if (out.numel() == 0) return out;
  const T* pw = w.data<T>();
  T* po = out.mutable_data<T>();
  parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      std::memcpy(po + n * C, pw + static_cast<int64_t>(pi[n]) * C, static_cast<size_t>(C) * sizeof(T));
  });
  return out;
}

// dW[v] = sum of dout rows whose index is v, added in index order. Rows are bucketed by vocab id first
// (a stable counting sort), then each vocab row is owned by exactly one thread: no races, same bits always.
template <class T>
Tensor embedding_backward_typed(const Tensor& din, const Tensor& idx_in, int64_t V) {
  const Tensor dout = din.contiguous(), idx = idx_in.contiguous();
  const int64_t C = dout.size(-1), N = idx.numel();
  const int32_t* pi = idx.data<int32_t>();
  check_indices(pi, N, V, "embedding_backward");
  Tensor dw = Tensor::zeros({V, C}, dout.dtype());  // (V, C)
  if (N == 0 || C == 0) return dw;
  std::vector<int64_t> start(static_cast<size_t>(V) + 1, 0), order(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) ++start[pi[n] + 1];
  for (int64_t v = 0; v < V; ++v) start[v + 1] += start[v];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t n = 0; n < N; ++n) order[fill[pi[n]]++] = n;  // stable: each bucket keeps index order
  const T* pd = dout.data<T>();
  T* pw = dw.mutable_data<T>();
  parallel_for(V, std::max<int64_t>(1, 16384 / std::max<int64_t>(C * std::max<int64_t>(N / V, 1), 1)),
               [&](int64_t v0, int64_t v1) {
                 for (int64_t v = v0; v < v1; ++v) {
                   T* row = pw + v * C;
                   for (int64_t k = start[v]; k < start[v + 1]; ++k) {
                     const T* src = pd + order[k] * C;
                     if constexpr (std::is_same_v<T, float>)
                       if (simd_enabled()) {  // row += 1 * src: the same adds, bit for bit
                         simd::axpy(row, src, C, 1.0f);
                         continue;
                       }
                     for (int64_t c = 0; c < C; ++c) row[c] += src[c];
                   }
                 }
               });
  return dw;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  return weight.dtype() == DType::f64 ? embedding_typed<double>(weight, idx) : embedding_typed<float>(weight, idx);
}

Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab) {
  return dout.dtype() == DType::f64 ? embedding_backward_typed<double>(dout, idx, vocab)
                                    : embedding_backward_typed<float>(dout, idx, vocab);
}

}  // namespace alpha::cpu
