// Highway versions of the element-wise kernels (elementwise.cpp, gelu.cpp, reduce.cpp, embedding.cpp's
// scatter-add, optim/adamw.cpp). Each mirrors its oracle's operation order, so only exp/log (approximated)
// and fused multiply-adds (AdamW on FMA targets, as torch's kernels and std::fma do) can change bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/cpu/simd_map.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstdlib>
#include <cstring>

#include "core/cpu/simd.h"
#include "core/cpu/simd_inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace alpha::cpu::simd {
namespace HWY_NAMESPACE {

// out = f(x) over n floats; padding lanes of the tail hold 1 (harmless for every op here).
template <class F>
HWY_INLINE void map1(const float* x, float* out, size_t n, F f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, x + i)), d, out + i);
  if (i < n) store_part(d, f(d, load_part(d, x + i, n - i, 1.0f)), out + i, n - i);
}

template <class F>
HWY_INLINE void map2(const float* a, const float* b, float* out, size_t n, F f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
  if (i < n) store_part(d, f(d, load_part(d, a + i, n - i, 1.0f), load_part(d, b + i, n - i, 1.0f)), out + i, n - i);
}

void BinaryImpl(int op, const float* a, const float* b, float* out, int64_t n) {
  const size_t m = static_cast<size_t>(n);
  switch (op) {
    case 0: return map2(a, b, out, m, [](DF, VF x, VF y) { return hn::Add(x, y); });
    case 1: return map2(a, b, out, m, [](DF, VF x, VF y) { return hn::Sub(x, y); });
    case 2: return map2(a, b, out, m, [](DF, VF x, VF y) { return hn::Mul(x, y); });
    default: return map2(a, b, out, m, [](DF, VF x, VF y) { return hn::Div(x, y); });
  }
}

// log with std::log's special values: x < 0 or NaN -> NaN, 0 -> -inf, +inf -> +inf; subnormals are scaled up.
HWY_INLINE VF log_v(DF d, VF x) {
  const auto tiny = hn::Lt(x, hn::Set(d, std::numeric_limits<float>::min()));
  const VF xs = hn::IfThenElse(tiny, hn::Mul(x, hn::Set(d, 16777216.0f)), x);  // 2^24
  VF l = hn::Log(d, xs);
  l = hn::IfThenElse(tiny, hn::Sub(l, hn::Set(d, 16.635532333438686f)), l);  // 24 ln 2
  const float inf = std::numeric_limits<float>::infinity();
  l = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, -inf), l);
  l = hn::IfThenElse(hn::Eq(x, hn::Set(d, inf)), x, l);
  return hn::IfThenElse(hn::Or(hn::Lt(x, hn::Zero(d)), hn::IsNaN(x)), hn::Set(d, std::numeric_limits<float>::quiet_NaN()), l);
}

void UnaryImpl(int op, const float* x, float* out, int64_t n) {
  const size_t m = static_cast<size_t>(n);
  switch (op) {
    case 0: return map1(x, out, m, [](DF, VF v) { return hn::Neg(v); });
    case 1: return map1(x, out, m, [](DF d, VF v) { return exp_v(d, v); });
    case 2: return map1(x, out, m, [](DF d, VF v) { return log_v(d, v); });
    default: return map1(x, out, m, [](DF, VF v) { return hn::Sqrt(v); });
  }
}

void AffineImpl(const float* x, float* out, int64_t n, float mul, float add) {
  map1(x, out, static_cast<size_t>(n), [=](DF d, VF v) { return hn::Add(hn::Mul(v, hn::Set(d, mul)), hn::Set(d, add)); });
}

void AxpyImpl(float* dst, const float* src, int64_t n, float alpha) {
  map2(dst, src, dst, static_cast<size_t>(n),
       [=](DF d, VF x, VF y) { return hn::Add(x, hn::Mul(hn::Set(d, alpha), y)); });
}

// GELU (tanh form) as gelu.cpp: u = k (x + a x^3) clamped to +-10, tanh(u) = sign(u) (1 - e) / (1 + e) with
// e = exp(-2|u|).
struct GeluParts {
  VF u, th;
};
HWY_INLINE GeluParts gelu_parts(DF d, VF v) {
  const VF k = hn::Set(d, 0.7978845608028654f), a = hn::Set(d, 0.044715f), lim = hn::Set(d, 10.0f);
  const VF one = hn::Set(d, 1.0f);
  const VF u = hn::Mul(k, hn::Add(v, hn::Mul(hn::Mul(hn::Mul(a, v), v), v)));
  const VF uc = hn::Min(hn::Max(u, hn::Neg(lim)), lim);
  const VF e = exp_v(d, hn::Mul(hn::Set(d, -2.0f), hn::Abs(uc)));
  return {u, hn::CopySign(hn::Div(hn::Sub(one, e), hn::Add(one, e)), uc)};
}

void GeluImpl(const float* x, float* y, int64_t n) {
  map1(x, y, static_cast<size_t>(n), [](DF d, VF v) {
    const GeluParts g = gelu_parts(d, v);
    return hn::Mul(hn::Mul(hn::Set(d, 0.5f), v), hn::Add(hn::Set(d, 1.0f), g.th));
  });
}

void GeluBackwardImpl(const float* dy, const float* x, float* dx, int64_t n) {
  map2(dy, x, dx, static_cast<size_t>(n), [](DF d, VF g_out, VF v) {
    const GeluParts g = gelu_parts(d, v);
    const VF half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
    const VF base = hn::Mul(half, hn::Add(one, g.th));
    // 0.5 x sech^2(u) du/dx, dropped where u is clamped (|u| >= 10, or not a number)
    const VF cubic3 = hn::Set(d, 3.0f * 0.044715f);
    const VF slope = hn::Mul(hn::Mul(hn::Mul(hn::Mul(half, v), hn::Sub(one, hn::Mul(g.th, g.th))),
                                     hn::Set(d, 0.7978845608028654f)),
                             hn::Add(one, hn::Mul(hn::Mul(cubic3, v), v)));
    const auto inside = hn::Lt(hn::Abs(g.u), hn::Set(d, 10.0f));
    const VF r = hn::Mul(g_out, hn::IfThenElse(inside, hn::Add(base, slope), base));
    return hn::IfThenElse(hn::IsNaN(v), v, r);  // the oracle's tanh(NaN) makes NaN
  });
}

double SumImpl(const float* x, int64_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd), m = static_cast<size_t>(n);
  auto acc = hn::Zero(dd);
  size_t i = 0;
  for (; i + N <= m; i += N) acc = hn::Add(acc, hn::PromoteTo(dd, hn::LoadU(df, x + i)));
  if (i < m) acc = hn::Add(acc, hn::PromoteTo(dd, load_part(df, x + i, m - i, 0.0f)));
  return hn::GetLane(hn::SumOfLanes(dd, acc));
}

void SumIntoImpl(double* acc, const float* x, int64_t n) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd), m = static_cast<size_t>(n);
  size_t i = 0;
  for (; i + N <= m; i += N) hn::StoreU(hn::Add(hn::LoadU(dd, acc + i), hn::PromoteTo(dd, hn::LoadU(df, x + i))), dd, acc + i);
  for (; i < m; ++i) acc[i] += static_cast<double>(x[i]);  // the same double add as a lane
}

float DotImpl(const float* a, const float* b, int64_t n) { return dot_row(DF(), a, b, static_cast<size_t>(n)); }

void AdamWImpl(float* p, float* m, float* v, const float* g, int64_t n, const float* c, bool decay) {
  const DF d;
  const VF dec = hn::Set(d, c[0]), b1 = hn::Set(d, c[1]), omb1 = hn::Set(d, c[2]), b2 = hn::Set(d, c[3]),
           omb2 = hn::Set(d, c[4]), bc2s = hn::Set(d, c[5]), eps = hn::Set(d, c[6]), step = hn::Set(d, c[7]);
  auto one = [&](VF pv, VF gi, VF mv, VF vv, VF* po, VF* mo, VF* vo) {
    if (decay) pv = hn::Mul(pv, dec);
    *mo = hn::MulAdd(omb1, gi, hn::Mul(mv, b1));
    *vo = hn::MulAdd(hn::Mul(omb2, gi), gi, hn::Mul(vv, b2));
    const VF denom = hn::Add(hn::Div(hn::Sqrt(*vo), bc2s), eps);
    *po = hn::Add(pv, hn::Div(hn::Mul(step, *mo), denom));
  };
  const size_t N = hn::Lanes(d), cnt = static_cast<size_t>(n);
  size_t i = 0;
  VF po, mo, vo;
  for (; i + N <= cnt; i += N) {
    one(hn::LoadU(d, p + i), hn::LoadU(d, g + i), hn::LoadU(d, m + i), hn::LoadU(d, v + i), &po, &mo, &vo);
    hn::StoreU(po, d, p + i);
    hn::StoreU(mo, d, m + i);
    hn::StoreU(vo, d, v + i);
  }
  if (i < cnt) {
    const size_t r = cnt - i;
    one(load_part(d, p + i, r, 0.0f), load_part(d, g + i, r, 0.0f), load_part(d, m + i, r, 0.0f),
        load_part(d, v + i, r, 0.0f), &po, &mo, &vo);
    store_part(d, po, p + i, r);
    store_part(d, mo, m + i, r);
    store_part(d, vo, v + i, r);
  }
}

// 8 independent FMA chains over whole vectors, for the compute peak; *flops gets the count (2 per lane FMA).
float FmaChainsImpl(int64_t iters, float seed, int64_t* flops) {
  const DF d;
  const VF a = hn::Set(d, 0.999999f), b = hn::Set(d, 1e-7f);
  VF c0 = hn::Set(d, seed), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (int64_t i = 0; i < iters; ++i) {
    c0 = hn::MulAdd(c0, a, b), c1 = hn::MulAdd(c1, a, b), c2 = hn::MulAdd(c2, a, b), c3 = hn::MulAdd(c3, a, b);
    c4 = hn::MulAdd(c4, a, b), c5 = hn::MulAdd(c5, a, b), c6 = hn::MulAdd(c6, a, b), c7 = hn::MulAdd(c7, a, b);
  }
  *flops = iters * 8 * static_cast<int64_t>(hn::Lanes(d)) * 2;
  const VF s = hn::Add(hn::Add(hn::Add(c0, c1), hn::Add(c2, c3)), hn::Add(hn::Add(c4, c5), hn::Add(c6, c7)));
  return sum_lanes(d, s);
}

int64_t TargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace alpha::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace alpha::cpu {

namespace {
bool& simd_flag() {
  static bool on = [] {
    const char* e = std::getenv("ALPHA_CPU_SIMD");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
}  // namespace

bool simd_enabled() { return simd_flag(); }
void set_simd_enabled(bool on) { simd_flag() = on; }

namespace simd {

HWY_EXPORT(BinaryImpl);
HWY_EXPORT(UnaryImpl);
HWY_EXPORT(AffineImpl);
HWY_EXPORT(AxpyImpl);
HWY_EXPORT(GeluImpl);
HWY_EXPORT(GeluBackwardImpl);
HWY_EXPORT(SumImpl);
HWY_EXPORT(SumIntoImpl);
HWY_EXPORT(DotImpl);
HWY_EXPORT(AdamWImpl);
HWY_EXPORT(TargetImpl);
HWY_EXPORT(FmaChainsImpl);

void binary(int op, const float* a, const float* b, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BinaryImpl)(op, a, b, out, n);
}
void unary(int op, const float* x, float* out, int64_t n) { HWY_DYNAMIC_DISPATCH(UnaryImpl)(op, x, out, n); }
void affine(const float* x, float* out, int64_t n, float mul, float add) {
  HWY_DYNAMIC_DISPATCH(AffineImpl)(x, out, n, mul, add);
}
void axpy(float* dst, const float* src, int64_t n, float alpha) { HWY_DYNAMIC_DISPATCH(AxpyImpl)(dst, src, n, alpha); }
void gelu(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluImpl)(x, y, n); }
void gelu_backward(const float* dy, const float* x, float* dx, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluBackwardImpl)(dy, x, dx, n);
}
double sum(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(SumImpl)(x, n); }
void sum_into(double* acc, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SumIntoImpl)(acc, x, n); }
float dot(const float* a, const float* b, int64_t n) { return HWY_DYNAMIC_DISPATCH(DotImpl)(a, b, n); }
void adamw(float* p, float* m, float* v, const float* g, int64_t n, const float* c, bool decay) {
  HWY_DYNAMIC_DISPATCH(AdamWImpl)(p, m, v, g, n, c, decay);
}

float fma_chains(int64_t iters, float seed, int64_t* flops) {
  return HWY_DYNAMIC_DISPATCH(FmaChainsImpl)(iters, seed, flops);
}
int64_t dispatched_target() { return HWY_DYNAMIC_DISPATCH(TargetImpl)(); }

}  // namespace simd

std::string simd_target() { return hwy::TargetName(simd::dispatched_target()); }

}  // namespace alpha::cpu
#endif  // HWY_ONCE
