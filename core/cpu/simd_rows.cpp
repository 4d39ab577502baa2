// Highway versions of the row kernels: LayerNorm (layernorm.cpp), softmax (softmax.cpp), cross-entropy
// (cross_entropy.cpp) and the f32 attention's per-row softmax (attention.cpp). Row sums run in f32 lanes (the
// oracles sum in double); rows holding NaN or +-inf are reported back so callers take the oracle loop.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/cpu/simd_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>

#include "core/cpu/simd.h"
#include "core/cpu/simd_inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace alpha::cpu::simd {
namespace HWY_NAMESPACE {

void LayerNormRowImpl(const float* x, const float* w, const float* b, float* y, int64_t C, double eps, float* mean,
                      float* rstd) {
  const DF d;
  const size_t N = hn::Lanes(d), n = static_cast<size_t>(C);
  VF acc = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) acc = hn::Add(acc, hn::LoadU(d, x + i));
  if (i < n) acc = hn::Add(acc, load_part(d, x + i, n - i, 0.0f));
  const float m = static_cast<float>(static_cast<double>(sum_lanes(d, acc)) / static_cast<double>(C));
  const VF vm = hn::Set(d, m);
  acc = hn::Zero(d);
  for (i = 0; i + N <= n; i += N) {
    const VF c = hn::Sub(hn::LoadU(d, x + i), vm);
    acc = hn::MulAdd(c, c, acc);
  }
  if (i < n) {
    const VF c = hn::Sub(load_part(d, x + i, n - i, m), vm);
    acc = hn::MulAdd(c, c, acc);
  }
  const double var = static_cast<double>(sum_lanes(d, acc)) / static_cast<double>(C);  // biased, as PyTorch
  const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
  const VF vrs = hn::Set(d, rs);
  auto norm = [&](size_t j, VF xv, size_t rem) {
    VF o = hn::Mul(hn::Sub(xv, vm), vrs);
    if (w) o = hn::Mul(o, rem ? load_part(d, w + j, rem, 1.0f) : hn::LoadU(d, w + j));
    if (b) o = hn::Add(o, rem ? load_part(d, b + j, rem, 0.0f) : hn::LoadU(d, b + j));
    return o;
  };
  for (i = 0; i + N <= n; i += N) hn::StoreU(norm(i, hn::LoadU(d, x + i), 0), d, y + i);
  if (i < n) store_part(d, norm(i, load_part(d, x + i, n - i, m), n - i), y + i, n - i);
  *mean = m;
  *rstd = rs;
}

// dx = rstd * (w dy - mean(w dy) - norm * mean(w dy norm)), norm = (x - mean) * rstd.
void LayerNormBackwardRowImpl(const float* dy, const float* x, const float* w, float mean, float rstd, float* dx,
                              int64_t C) {
  const DF d;
  const size_t N = hn::Lanes(d), n = static_cast<size_t>(C);
  const VF vm = hn::Set(d, mean), vrs = hn::Set(d, rstd);
  auto load = [&](const float* p, size_t j, float fill) {
    return j + N <= n ? hn::LoadU(d, p + j) : load_part(d, p + j, n - j, fill);
  };
  auto wdy = [&](size_t j) { return w ? hn::Mul(load(dy, j, 0.0f), load(w, j, 0.0f)) : load(dy, j, 0.0f); };
  VF s1 = hn::Zero(d), s2 = hn::Zero(d);
  for (size_t j = 0; j < n; j += N) {
    const VF wd = wdy(j), nm = hn::Mul(hn::Sub(load(x, j, mean), vm), vrs);
    s1 = hn::Add(s1, wd);
    s2 = hn::MulAdd(wd, nm, s2);
  }
  const VF m1 = hn::Set(d, sum_lanes(d, s1) / static_cast<float>(C));
  const VF m2 = hn::Set(d, sum_lanes(d, s2) / static_cast<float>(C));
  for (size_t j = 0; j < n; j += N) {
    const VF nm = hn::Mul(hn::Sub(load(x, j, mean), vm), vrs);
    const VF r = hn::Mul(hn::Sub(hn::Sub(wdy(j), m1), hn::Mul(nm, m2)), vrs);
    if (j + N <= n) hn::StoreU(r, d, dx + j);
    else store_part(d, r, dx + j, n - j);
  }
}

void LayerNormParamGradsImpl(const float* dy, const float* x, const float* mean, const float* rstd, int64_t N,
                             int64_t C, int64_t c0, int64_t c1, float* dw, float* db) {
  const DF d;
  const size_t L = hn::Lanes(d);
  constexpr size_t kStrip = 64;  // channels accumulated at once: two small L1-resident arrays
  HWY_ALIGN float aw[kStrip + kMaxLanes], ab[kStrip + kMaxLanes];
  for (int64_t s0 = c0; s0 < c1; s0 += static_cast<int64_t>(kStrip)) {
    const size_t len = static_cast<size_t>(std::min<int64_t>(c1 - s0, kStrip));
    std::fill(aw, aw + kStrip + kMaxLanes, 0.0f);
    std::fill(ab, ab + kStrip + kMaxLanes, 0.0f);
    for (int64_t r = 0; r < N; ++r) {
      const VF vm = hn::Set(d, mean[r]), vrs = hn::Set(d, rstd[r]);
      const float* xr = x + r * C + s0;
      const float* dr = dy + r * C + s0;
      for (size_t j = 0; j < len; j += L) {
        const bool full = j + L <= len;
        const VF dv = full ? hn::LoadU(d, dr + j) : load_part(d, dr + j, len - j, 0.0f);
        const VF xv = full ? hn::LoadU(d, xr + j) : load_part(d, xr + j, len - j, 0.0f);
        hn::Store(hn::Add(hn::Load(d, aw + j), hn::Mul(hn::Mul(dv, hn::Sub(xv, vm)), vrs)), d, aw + j);
        hn::Store(hn::Add(hn::Load(d, ab + j), dv), d, ab + j);
      }
    }
    for (size_t j = 0; j < len; ++j) {
      if (dw) dw[s0 + static_cast<int64_t>(j)] = aw[j];
      if (db) db[s0 + static_cast<int64_t>(j)] = ab[j];
    }
  }
}

bool SoftmaxRowImpl(const float* x, float* y, int64_t n, int64_t Tk) {
  const DF d;
  bool finite = true;
  const float m = row_max(d, x, static_cast<size_t>(n), &finite);
  if (!finite) return false;
  const float s = sum_exp(d, x, static_cast<size_t>(n), m, y);
  const float inv = static_cast<float>(1.0 / static_cast<double>(s));
  const size_t N = hn::Lanes(d), cnt = static_cast<size_t>(n);
  size_t i = 0;
  for (; i + N <= cnt; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, y + i), hn::Set(d, inv)), d, y + i);
  for (; i < cnt; ++i) y[i] *= inv;  // the same single multiply as a lane
  std::fill(y + n, y + Tk, 0.0f);
  return true;
}

void SoftmaxBackwardRowImpl(const float* dy, const float* y, float* dx, int64_t n) {
  const DF d;
  const size_t N = hn::Lanes(d), cnt = static_cast<size_t>(n);
  const VF s = hn::Set(d, dot_row(d, dy, y, cnt));
  size_t i = 0;
  for (; i + N <= cnt; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, y + i), hn::Sub(hn::LoadU(d, dy + i), s)), d, dx + i);
  if (i < cnt) {
    const VF r = hn::Mul(load_part(d, y + i, cnt - i, 0.0f), hn::Sub(load_part(d, dy + i, cnt - i, 0.0f), s));
    store_part(d, r, dx + i, cnt - i);
  }
}

bool LogSumExpImpl(const float* x, int64_t n, double* lse) {
  const DF d;
  bool finite = true;
  const float m = row_max(d, x, static_cast<size_t>(n), &finite);
  if (!finite) return false;
  const float s = sum_exp(d, x, static_cast<size_t>(n), m, nullptr);
  *lse = static_cast<double>(m) + std::log(static_cast<double>(s));
  return true;
}

// shift = hi + lo (two floats): x - hi is exact near the row max, so logits of 1e4 keep full precision.
void ScaledExpShiftImpl(const float* x, float* out, int64_t n, float hi, float lo, float scale) {
  const DF d;
  const size_t N = hn::Lanes(d), cnt = static_cast<size_t>(n);
  const VF h = hn::Set(d, hi), l = hn::Set(d, lo), sc = hn::Set(d, scale);
  auto f = [&](VF v) { return hn::Mul(sc, exp_v(d, hn::Sub(hn::Sub(v, h), l))); };
  size_t i = 0;
  for (; i + N <= cnt; i += N) hn::StoreU(f(hn::LoadU(d, x + i)), d, out + i);
  if (i < cnt) store_part(d, f(load_part(d, x + i, cnt - i, 0.0f)), out + i, cnt - i);
}

float AttentionProbsRowImpl(float* s, int64_t n, int64_t Tk) {
  const DF d;
  bool finite = true;
  const float m = row_max(d, s, static_cast<size_t>(n), &finite);
  if (!finite) return std::numeric_limits<float>::quiet_NaN();
  const float l = sum_exp(d, s, static_cast<size_t>(n), m, nullptr);
  const float L = static_cast<float>(static_cast<double>(m) + std::log(static_cast<double>(l)));
  sum_exp(d, s, static_cast<size_t>(n), L, s);
  std::fill(s + n, s + Tk, 0.0f);
  return L;
}

void AttentionGradRowImpl(float* s, float* dp, int64_t n, int64_t Tk, float L, float drow, float scale) {
  const DF d;
  const size_t N = hn::Lanes(d), cnt = static_cast<size_t>(n);
  const VF vl = hn::Set(d, L), vd = hn::Set(d, drow), vs = hn::Set(d, scale);
  for (size_t i = 0; i < cnt; i += N) {
    const bool full = i + N <= cnt;
    const VF p = exp_v(d, hn::Sub(full ? hn::LoadU(d, s + i) : load_part(d, s + i, cnt - i, 0.0f), vl));
    const VF g = full ? hn::LoadU(d, dp + i) : load_part(d, dp + i, cnt - i, 0.0f);
    const VF ds = hn::Mul(hn::Mul(p, hn::Sub(g, vd)), vs);
    if (full) {
      hn::StoreU(p, d, s + i);
      hn::StoreU(ds, d, dp + i);
    } else {
      store_part(d, p, s + i, cnt - i);
      store_part(d, ds, dp + i, cnt - i);
    }
  }
  std::fill(s + n, s + Tk, 0.0f);
  std::fill(dp + n, dp + Tk, 0.0f);
}

}  // namespace HWY_NAMESPACE
}  // namespace alpha::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace alpha::cpu::simd {

HWY_EXPORT(LayerNormRowImpl);
HWY_EXPORT(LayerNormBackwardRowImpl);
HWY_EXPORT(LayerNormParamGradsImpl);
HWY_EXPORT(SoftmaxRowImpl);
HWY_EXPORT(SoftmaxBackwardRowImpl);
HWY_EXPORT(LogSumExpImpl);
HWY_EXPORT(ScaledExpShiftImpl);
HWY_EXPORT(AttentionProbsRowImpl);
HWY_EXPORT(AttentionGradRowImpl);

void layernorm_row(const float* x, const float* w, const float* b, float* y, int64_t C, double eps, float* mean,
                   float* rstd) {
  HWY_DYNAMIC_DISPATCH(LayerNormRowImpl)(x, w, b, y, C, eps, mean, rstd);
}
void layernorm_backward_row(const float* dy, const float* x, const float* w, float mean, float rstd, float* dx,
                            int64_t C) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackwardRowImpl)(dy, x, w, mean, rstd, dx, C);
}
void layernorm_param_grads(const float* dy, const float* x, const float* mean, const float* rstd, int64_t N,
                           int64_t C, int64_t c0, int64_t c1, float* dw, float* db) {
  HWY_DYNAMIC_DISPATCH(LayerNormParamGradsImpl)(dy, x, mean, rstd, N, C, c0, c1, dw, db);
}
bool softmax_row(const float* x, float* y, int64_t n, int64_t Tk) {
  return HWY_DYNAMIC_DISPATCH(SoftmaxRowImpl)(x, y, n, Tk);
}
void softmax_backward_row(const float* dy, const float* y, float* dx, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SoftmaxBackwardRowImpl)(dy, y, dx, n);
}
bool log_sum_exp(const float* x, int64_t n, double* lse) { return HWY_DYNAMIC_DISPATCH(LogSumExpImpl)(x, n, lse); }
void scaled_exp_shift(const float* x, float* out, int64_t n, double shift, float scale) {
  const float hi = static_cast<float>(shift), lo = static_cast<float>(shift - static_cast<double>(hi));
  HWY_DYNAMIC_DISPATCH(ScaledExpShiftImpl)(x, out, n, hi, lo, scale);
}
float attention_probs_row(float* s, int64_t n, int64_t Tk) { return HWY_DYNAMIC_DISPATCH(AttentionProbsRowImpl)(s, n, Tk); }
void attention_grad_row(float* s, float* dp, int64_t n, int64_t Tk, float L, float drow, float scale) {
  HWY_DYNAMIC_DISPATCH(AttentionGradRowImpl)(s, dp, n, Tk, L, drow, scale);
}

}  // namespace alpha::cpu::simd
#endif  // HWY_ONCE
