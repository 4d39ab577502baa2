// Per-target helpers shared by simd_map.cpp and simd_rows.cpp (compiled once per Highway target, hence the
// toggling include guard Highway's -inl headers use). Tails go through one padded vector, so a row's last
// elements take exactly the same arithmetic as the others.
#if defined(ALPHA_CORE_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ALPHA_CORE_CPU_SIMD_INL_H_
#undef ALPHA_CORE_CPU_SIMD_INL_H_
#else
#define ALPHA_CORE_CPU_SIMD_INL_H_
#endif

#include <cstddef>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace alpha::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// The first rem (< Lanes) floats of p; the other lanes hold fill.
template <class D>
HWY_INLINE hn::Vec<D> load_part(D d, const float* p, size_t rem, float fill) {
  HWY_ALIGN float buf[kMaxLanes];
  for (size_t i = 0; i < hn::Lanes(d); ++i) buf[i] = i < rem ? p[i] : fill;
  return hn::Load(d, buf);
}

template <class D>
HWY_INLINE void store_part(D d, hn::Vec<D> v, float* p, size_t rem) {
  HWY_ALIGN float buf[kMaxLanes];
  hn::Store(v, d, buf);
  for (size_t i = 0; i < rem; ++i) p[i] = buf[i];
}

// exp with std::exp's special values: NaN stays NaN, overflow gives +inf (Highway's Exp covers the rest).
HWY_INLINE VF exp_v(DF d, VF x) {
  const VF e = hn::Exp(d, x);
  const VF big = hn::IfThenElse(hn::Gt(x, hn::Set(d, 88.72283935546875f)),
                                hn::Set(d, std::numeric_limits<float>::infinity()), e);
  return hn::IfThenElse(hn::IsNaN(x), x, big);
}

// Sum over lanes / max over lanes as scalars.
HWY_INLINE float sum_lanes(DF d, VF v) { return hn::GetLane(hn::SumOfLanes(d, v)); }
HWY_INLINE float max_lanes(DF d, VF v) { return hn::GetLane(hn::MaxOfLanes(d, v)); }

// sum_i a_i b_i over [0, n) in f32 lanes (fused multiply-adds), the tail zero-padded.
HWY_INLINE float dot_row(DF d, const float* a, const float* b, size_t n) {
  const size_t N = hn::Lanes(d);
  VF acc = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) acc = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc);
  if (i < n) acc = hn::MulAdd(load_part(d, a + i, n - i, 0.0f), load_part(d, b + i, n - i, 0.0f), acc);
  return sum_lanes(d, acc);
}

// Max of x[0, n) (n >= 1); *finite is false if any entry is NaN or +-inf.
HWY_INLINE float row_max(DF d, const float* x, size_t n, bool* finite) {
  const size_t N = hn::Lanes(d);
  const VF ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF m = ninf, bad = hn::Zero(d);  // x - x is 0 for finite x, NaN otherwise
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF v = hn::LoadU(d, x + i);
    m = hn::Max(m, v);
    bad = hn::Add(bad, hn::Sub(v, v));
  }
  if (i < n) {
    const VF v = load_part(d, x + i, n - i, x[0]);
    m = hn::Max(m, v);
    bad = hn::Add(bad, hn::Sub(v, v));
  }
  *finite = sum_lanes(d, bad) == 0.0f;
  return max_lanes(d, m);
}

// sum_j exp(x_j - shift) over [0, n), optionally storing each exp to out (may be null).
HWY_INLINE float sum_exp(DF d, const float* x, size_t n, float shift, float* out) {
  const size_t N = hn::Lanes(d);
  const VF s = hn::Set(d, shift);
  VF acc = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VF e = exp_v(d, hn::Sub(hn::LoadU(d, x + i), s));
    if (out) hn::StoreU(e, d, out + i);
    acc = hn::Add(acc, e);
  }
  if (i < n) {
    const VF e = hn::IfThenElseZero(hn::FirstN(d, n - i), exp_v(d, hn::Sub(load_part(d, x + i, n - i, 0.0f), s)));
    if (out) store_part(d, e, out + i, n - i);
    acc = hn::Add(acc, e);
  }
  return sum_lanes(d, acc);
}

}  // namespace HWY_NAMESPACE
}  // namespace alpha::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // ALPHA_CORE_CPU_SIMD_INL_H_
