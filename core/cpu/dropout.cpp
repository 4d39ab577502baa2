// Dropout with a counter-based mask: element i (row-major flat index) is kept iff
// u32_to_unit(philox_at(seed, offset + i)) >= p; kept values are scaled by 1/(1-p). The mask depends only on
// (seed, offset + i), so threads, the GPU and the backward (the same call on dy) all see the same mask.
#include "core/cpu/dropout.h"

#include "core/parallel.h"
#include "core/rng.h"

namespace alpha::cpu {

namespace {

template <class T>
Tensor dropout_typed(const Tensor& xin, double p, uint64_t seed, uint64_t offset) {
  const Tensor x = xin.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  const T* px = x.data<T>();
  T* po = out.mutable_data<T>();
  const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
  // Whole Philox blocks (4 words) per step would be faster, but per-element philox_at keeps the oracle obvious.
  parallel_for(x.numel(), 1 << 13, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float u = u32_to_unit(philox_at(seed, offset + static_cast<uint64_t>(i)));
      po[i] = static_cast<double>(u) >= p ? px[i] * keep_scale : T(0);  // compared in double, as specified
    }
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  if (p == 0.0) return x;  // identity: no mask, no copy
  return x.dtype() == DType::f64 ? dropout_typed<double>(x, p, seed, offset)
                                 : dropout_typed<float>(x, p, seed, offset);
}

}  // namespace alpha::cpu
