// Fused causal attention on the CPU, one (b, h) pair per task (results do not depend on threading). f64 runs plain
// loops with sums in double: the readable oracle (gradcheck). f32 runs the same math as products of whole (b, h)
// matrices through single-threaded sgemm (S = QK^T, O = PV; dP = dO V^T, dQ = dS K, dK = dS^T Q, dV = P~^T dO),
// the scores and probabilities in a per-task (Tq, Tk) buffer: the loops cost ~5x more at GPT sizes. f32 reads
// its (B, H, T, D) operands in place when rows are unit-stride (GPT's packed qkv views: row stride 3C), as sgemm's
// leading dimension, instead of copying them contiguous. Dropout uses
// the Philox positions of the unfused (B, H, Tq, Tk) probability tensor, so the mask equals ops::dropout's.
//
// Dimension legend: B batch, H heads, Tq query rows, Tk keys, D head size.
#include "core/cpu/attention.h"


#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/matmul.h"
#include "core/cpu/simd.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace alpha::cpu {

namespace {

// Geometry shared by forward and backward. Inputs are made contiguous (B, H, T, D) first.
struct Geo {
  int64_t B, H, Tq, Tk, D;
  int64_t visible(int64_t i, bool causal) const { return causal ? std::min(Tk, i + (Tk - Tq) + 1) : Tk; }
};

Geo geo_of(const Tensor& q, const Tensor& k) { return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3)}; }

// Multiplier dropout applies to probability (bh, i, j): 0 (dropped) or 1/(1-p) (kept); 1 without dropout.
double keep_factor(const ops::AttentionParams& ap, const Geo& g, int64_t bh, int64_t i, int64_t j) {
  if (ap.p == 0.0) return 1.0;
  const uint64_t pos = ap.offset + static_cast<uint64_t>((bh * g.Tq + i) * g.Tk + j);
  return static_cast<double>(u32_to_unit(philox_at(ap.seed, pos))) >= ap.p ? 1.0 / (1.0 - ap.p) : 0.0;
}

// A (B, H, T, D) view of a fresh contiguous (B, T, H, D) tensor (core/ops.h's output layout).
Tensor bthd_view(const Geo& g, int64_t T, DType dt) { return Tensor::empty({g.B, T, g.H, g.D}, dt).transpose(1, 2); }

// What both implementations start from: contiguous (B, H, T, D) inputs, the geometry, fresh outputs.
struct Forward {
  Tensor q, k, v;
  Geo g;
  Tensor out, lse;  // out: (B, H, Tq, D) view of (B, Tq, H, D) storage; lse: (B, H, Tq)
};
Forward prepare_forward(const Tensor& qin, const Tensor& kin, const Tensor& vin) {
  Forward f{qin.contiguous(), kin.contiguous(), vin.contiguous(), {}, {}, {}};
  f.g = geo_of(f.q, f.k);
  f.out = bthd_view(f.g, f.g.Tq, f.q.dtype());
  f.lse = Tensor::empty({f.g.B, f.g.H, f.g.Tq}, f.q.dtype());
  return f;
}

struct Backward {
  Tensor q, k, v, dout, out, lse;
  Geo g;
  ops::AttentionGrads r;
  int64_t row;  // elements between consecutive time rows of a gradient
};
template <class T>
ops::AttentionOut forward_typed(Forward& f, const ops::AttentionParams& ap) {
  const Tensor &q = f.q, &k = f.k, &v = f.v;
  const Geo& g = f.g;
  Tensor &out = f.out, &lse = f.lse;
  const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>();
  T* po = out.mutable_data<T>();  // (B, Tq, H, D) storage
  T* pl = lse.mutable_data<T>();
  parallel_for(g.B * g.H, 1, [&](int64_t bh0, int64_t bh1) {
    std::vector<double> s(static_cast<size_t>(g.Tk)), acc(static_cast<size_t>(g.D));
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      const T* qb = pq + bh * g.Tq * g.D;
      const T* kb = pk + bh * g.Tk * g.D;
      const T* vb = pv + bh * g.Tk * g.D;
      for (int64_t i = 0; i < g.Tq; ++i) {
        const int64_t vis = g.visible(i, ap.causal);
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < vis; ++j) {
          double d = 0;
          for (int64_t c = 0; c < g.D; ++c) d += double(qb[i * g.D + c]) * double(kb[j * g.D + c]);
          s[j] = d * ap.scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (int64_t j = 0; j < vis; ++j) l += std::exp(s[j] - m);
        const double L = m + std::log(l);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < vis; ++j) {
          const double p = std::exp(s[j] - L) * keep_factor(ap, g, bh, i, j);
          if (p == 0.0) continue;
          for (int64_t c = 0; c < g.D; ++c) acc[c] += p * double(vb[j * g.D + c]);
        }
        T* orow = po + ((b * g.Tq + i) * g.H + h) * g.D;
        for (int64_t c = 0; c < g.D; ++c) orow[c] = static_cast<T>(acc[c]);
        pl[bh * g.Tq + i] = static_cast<T>(L);
      }
    }
  });
  return {out, lse};
}

// dq, dk, dv as (B, H, T, D) views of fresh (B, T, H, D) tensors, or of one packed (B, T, 3, H, D) buffer (dqkv:
// q, k, v heads at channel offsets 0, C, 2C).
ops::AttentionGrads gradient_tensors(const Geo& g, DType dt, bool packed) {
  ops::AttentionGrads r;
  if (packed) {
    r.dqkv = Tensor::empty({g.B, g.Tq, 3 * g.H * g.D}, dt);
    const Tensor split = r.dqkv.view({g.B, g.Tq, 3, g.H, g.D});
    r.dq = split.narrow(2, 0, 1).squeeze(2).transpose(1, 2);
    r.dk = split.narrow(2, 1, 1).squeeze(2).transpose(1, 2);
    r.dv = split.narrow(2, 2, 1).squeeze(2).transpose(1, 2);
  } else {
    r.dq = bthd_view(g, g.Tq, dt), r.dk = bthd_view(g, g.Tk, dt), r.dv = bthd_view(g, g.Tk, dt);
  }
  return r;
}

Backward prepare_backward(const Tensor& doin, const Tensor& qin, const Tensor& kin, const Tensor& vin,
                          const Tensor& oin, const Tensor& lin, bool packed) {
  Backward b{qin.contiguous(), kin.contiguous(), vin.contiguous(), doin.contiguous(), oin.contiguous(),
             lin.contiguous(), {}, {}, 0};
  b.g = geo_of(b.q, b.k);
  b.r = gradient_tensors(b.g, b.q.dtype(), packed);
  b.row = packed ? 3 * b.g.H * b.g.D : b.g.H * b.g.D;
  return b;
}

template <class T>
ops::AttentionGrads backward_typed(Backward& bw, const ops::AttentionParams& ap) {
  const Tensor &q = bw.q, &k = bw.k, &v = bw.v, &dout = bw.dout, &out = bw.out, &lse = bw.lse;
  const Geo& g = bw.g;
  ops::AttentionGrads& r = bw.r;
  const int64_t row = bw.row;
  const T *pq = q.data<T>(), *pk = k.data<T>(), *pv = v.data<T>(), *pdo = dout.data<T>(), *po = out.data<T>(),
          *pl = lse.data<T>();
  T *pdq = r.dq.mutable_data<T>(), *pdk = r.dk.mutable_data<T>(), *pdv = r.dv.mutable_data<T>();
  parallel_for(g.B * g.H, 1, [&](int64_t bh0, int64_t bh1) {
    const size_t nq = static_cast<size_t>(g.Tq * g.D), nk = static_cast<size_t>(g.Tk * g.D);
    std::vector<double> gq(nq), gk(nk), gv(nk), drow(static_cast<size_t>(g.Tq));
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      const T* qb = pq + bh * g.Tq * g.D;
      const T* kb = pk + bh * g.Tk * g.D;
      const T* vb = pv + bh * g.Tk * g.D;
      const T* dob = pdo + bh * g.Tq * g.D;
      const T* ob = po + bh * g.Tq * g.D;
      std::fill(gq.begin(), gq.end(), 0.0);
      std::fill(gk.begin(), gk.end(), 0.0);
      std::fill(gv.begin(), gv.end(), 0.0);
      // Drow_i = rowsum(dO * O) = sum_j P_ij dA_ij (the softmax backward's row dot, dropout included).
      for (int64_t i = 0; i < g.Tq; ++i) {
        double d = 0;
        for (int64_t c = 0; c < g.D; ++c) d += double(dob[i * g.D + c]) * double(ob[i * g.D + c]);
        drow[i] = d;
      }
      for (int64_t i = 0; i < g.Tq; ++i) {
        const int64_t vis = g.visible(i, ap.causal);
        const double L = double(pl[bh * g.Tq + i]);
        for (int64_t j = 0; j < vis; ++j) {
          double s = 0, dp = 0;
          for (int64_t c = 0; c < g.D; ++c) {
            s += double(qb[i * g.D + c]) * double(kb[j * g.D + c]);
            dp += double(dob[i * g.D + c]) * double(vb[j * g.D + c]);
          }
          const double p = std::exp(s * ap.scale - L), mk = keep_factor(ap, g, bh, i, j);
          const double ds = p * (dp * mk - drow[i]) * ap.scale;  // d loss / d (q_i . k_j)
          for (int64_t c = 0; c < g.D; ++c) {
            gv[j * g.D + c] += p * mk * double(dob[i * g.D + c]);
            gq[i * g.D + c] += ds * double(kb[j * g.D + c]);
            gk[j * g.D + c] += ds * double(qb[i * g.D + c]);
          }
        }
      }
      for (int64_t i = 0; i < g.Tq; ++i)
        for (int64_t c = 0; c < g.D; ++c) pdq[(b * g.Tq + i) * row + h * g.D + c] = static_cast<T>(gq[i * g.D + c]);
      for (int64_t j = 0; j < g.Tk; ++j)
        for (int64_t c = 0; c < g.D; ++c) {
          pdk[(b * g.Tk + j) * row + h * g.D + c] = static_cast<T>(gk[j * g.D + c]);
          pdv[(b * g.Tk + j) * row + h * g.D + c] = static_cast<T>(gv[j * g.D + c]);
        }
    }
  });
  return r;
}

// One (B, H, T, D) f32 operand read in place: head (b, h) is a T x D matrix with row stride ld. A view whose
// rows are not unit-stride is copied contiguous first (keep holds what the pointer points into).
struct Heads {
  Tensor keep;
  const float* p;
  int64_t sb, sh, ld, H;
  const float* at(int64_t bh) const { return p + (bh / H) * sb + (bh % H) * sh; }
};
Heads heads(const Tensor& t) {
  const Shape& st = t.strides();
  const Tensor u = st[3] == 1 && st[2] >= t.size(3) ? t : t.contiguous();
  return {u, u.data<float>(), u.strides()[0], u.strides()[1], u.strides()[2], u.size(1)};
}

ops::AttentionOut forward_f32(const Tensor& qin, const Tensor& kin, const Tensor& vin, const ops::AttentionParams& ap) {
  const Heads q = heads(qin), k = heads(kin), v = heads(vin);
  const Geo g = geo_of(qin, kin);
  Tensor out = bthd_view(g, g.Tq, DType::f32), lse = Tensor::empty({g.B, g.H, g.Tq}, DType::f32);
  float* po = out.mutable_data<float>();  // (B, Tq, H, D) storage
  float* pl = lse.mutable_data<float>();
  const bool vec = simd_enabled() && ap.p == 0.0;  // dropout keeps the loop
  parallel_for(g.B * g.H, 1, [&](int64_t bh0, int64_t bh1) {
    std::vector<float> s(static_cast<size_t>(g.Tq * g.Tk));  // scores, then dropped probabilities (Tq, Tk)
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      sgemm(false, true, g.Tq, g.Tk, g.D, float(ap.scale), q.at(bh), q.ld, k.at(bh), k.ld, s.data(), g.Tk);
      for (int64_t i = 0; i < g.Tq; ++i) {
        float* row = s.data() + i * g.Tk;
        const int64_t vis = g.visible(i, ap.causal);
        if (vec) {  // Highway row softmax; NaN back means the row holds NaN or inf: the loop below decides
          const float L = simd::attention_probs_row(row, vis, g.Tk);
          if (!std::isnan(L)) {
            pl[bh * g.Tq + i] = L;
            continue;
          }
        }
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        for (int64_t j = 0; j < vis; ++j) m = std::max(m, double(row[j]));
        for (int64_t j = 0; j < vis; ++j) l += std::exp(double(row[j]) - m);
        const double L = m + std::log(l);
        for (int64_t j = 0; j < vis; ++j) row[j] = float(std::exp(double(row[j]) - L) * keep_factor(ap, g, bh, i, j));
        std::fill(row + vis, row + g.Tk, 0.0f);
        pl[bh * g.Tq + i] = float(L);
      }
      // O rows go straight into the (B, Tq, H, D) output: row stride H * D.
      sgemm(false, false, g.Tq, g.D, g.Tk, 1.0f, s.data(), g.Tk, v.at(bh), v.ld, po + (b * g.Tq * g.H + h) * g.D,
           g.H * g.D);
    }
  });
  return {out, lse};
}

ops::AttentionGrads backward_f32(const Tensor& doin, const Tensor& qin, const Tensor& kin, const Tensor& vin,
                                 const Tensor& oin, const Tensor& lin, const ops::AttentionParams& ap, bool packed) {
  const Heads q = heads(qin), k = heads(kin), v = heads(vin), dout = heads(doin), out = heads(oin);
  const Tensor lse = lin.contiguous();
  const Geo g = geo_of(qin, kin);
  ops::AttentionGrads r = gradient_tensors(g, DType::f32, packed);
  const int64_t row = packed ? 3 * g.H * g.D : g.H * g.D;  // elements between consecutive time rows of a gradient
  const float* pl = lse.data<float>();
  float *pdq = r.dq.mutable_data<float>(), *pdk = r.dk.mutable_data<float>(), *pdv = r.dv.mutable_data<float>();
  const bool vec = simd_enabled() && ap.p == 0.0;  // dropout keeps the loop
  parallel_for(g.B * g.H, 1, [&](int64_t bh0, int64_t bh1) {
    const size_t n = static_cast<size_t>(g.Tq * g.Tk);
    std::vector<float> s(n), dp(n);  // S then P~ (dropped probabilities); dP then dS (Tq, Tk)
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t b = bh / g.H, h = bh % g.H;
      const float *qb = q.at(bh), *kb = k.at(bh), *dob = dout.at(bh), *ob = out.at(bh);
      sgemm(false, true, g.Tq, g.Tk, g.D, float(ap.scale), qb, q.ld, kb, k.ld, s.data(), g.Tk);
      sgemm(false, true, g.Tq, g.Tk, g.D, 1.0f, dob, dout.ld, v.at(bh), v.ld, dp.data(), g.Tk);
      for (int64_t i = 0; i < g.Tq; ++i) {
        const int64_t vis = g.visible(i, ap.causal);
        float *srow = s.data() + i * g.Tk, *drow_i = dp.data() + i * g.Tk;
        if (vec) {
          const float dr = simd::dot(dob + i * dout.ld, ob + i * out.ld, g.D);
          simd::attention_grad_row(srow, drow_i, vis, g.Tk, pl[bh * g.Tq + i], dr, float(ap.scale));
          continue;
        }
        double drow = 0;  // rowsum(dO * O) = sum_j P_ij dA_ij (the softmax backward's row dot, dropout included)
        for (int64_t c = 0; c < g.D; ++c) drow += double(dob[i * dout.ld + c]) * double(ob[i * out.ld + c]);
        const double L = double(pl[bh * g.Tq + i]);
        for (int64_t j = 0; j < vis; ++j) {
          const double p = std::exp(double(srow[j]) - L), mk = keep_factor(ap, g, bh, i, j);
          srow[j] = float(p * mk);
          drow_i[j] = float(p * (double(drow_i[j]) * mk - drow) * ap.scale);  // d loss / d (q_i . k_j)
        }
        std::fill(srow + vis, srow + g.Tk, 0.0f);
        std::fill(drow_i + vis, drow_i + g.Tk, 0.0f);
      }
      sgemm(true, false, g.Tk, g.D, g.Tq, 1.0f, s.data(), g.Tk, dob, dout.ld, pdv + b * g.Tk * row + h * g.D, row);
      sgemm(false, false, g.Tq, g.D, g.Tk, 1.0f, dp.data(), g.Tk, kb, k.ld, pdq + b * g.Tq * row + h * g.D, row);
      sgemm(true, false, g.Tk, g.D, g.Tq, 1.0f, dp.data(), g.Tk, qb, q.ld, pdk + b * g.Tk * row + h * g.D, row);
    }
  });
  return r;
}

}  // namespace

ops::AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionParams& ap) {
  blas_setup();
  if (q.dtype() != DType::f64) return forward_f32(q, k, v, ap);
  Forward f = prepare_forward(q, k, v);
  return forward_typed<double>(f, ap);
}

ops::AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, const ops::AttentionParams& ap,
                                       bool packed) {
  blas_setup();
  if (q.dtype() != DType::f64) return backward_f32(dout, q, k, v, out, lse, ap, packed);
  Backward bw = prepare_backward(dout, q, k, v, out, lse, packed);
  return backward_typed<double>(bw, ap);
}

}  // namespace alpha::cpu
