// Fused attention: the forward saves q, k, v, out and the row log-sum-exp; the backward recomputes the
// probabilities from them (and replays the dropout mask from (seed, offset)), never storing (B, H, Tq, Tk).
#include <cmath>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"

namespace alpha::ag {

namespace {

ops::AttentionParams params(int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, bool causal, double p, Rng& rng,
                            bool training) {
  ALPHA_CHECK(p >= 0.0 && p < 1.0, ValueError, "[attention] dropout p must be in [0, 1), got {}", p);
  ops::AttentionParams ap;
  ap.scale = 1.0 / std::sqrt(static_cast<double>(D));
  ap.causal = causal;
  if (training && p > 0.0) {
    // The same RNG positions ag::dropout reserves for the unfused (B, H, Tq, Tk) probabilities.
    ap.p = p;
    ap.seed = rng.seed();
    ap.offset = rng.reserve(static_cast<uint64_t>(B * H * Tq * Tk));
  }
  return ap;
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double p, Rng& rng, bool training) {
  ALPHA_CHECK(q.dim() == 4 && k.dim() == 4, ShapeError, "[attention] expected q, k, v (B, H, T, D), got {} and {}",
              q.str(), k.str());
  const ops::AttentionParams ap = params(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), causal, p, rng, training);
  const ops::AttentionOut r = ops::attention(q, k, v, ap);
  const Tensor out = r.out, lse = r.lse;
  return record("attention", out, {q, k, v}, [q, k, v, out, lse, ap](const Tensor& g) {
    ops::AttentionGrads d = ops::attention_backward(g, q, k, v, out, lse, ap);
    return std::vector<Tensor>{d.dq, d.dk, d.dv};
  });
}

Tensor attention_qkv(const Tensor& qkv_in, int64_t n_head, bool causal, double p, Rng& rng, bool training) {
  ALPHA_CHECK(qkv_in.dim() == 3 && n_head > 0 && qkv_in.size(2) % (3 * n_head) == 0, ShapeError,
              "[attention_qkv] expected qkv (B, T, 3 * n_head * D), got {} with n_head {}", qkv_in.str(), n_head);
  const int64_t B = qkv_in.size(0), T = qkv_in.size(1), C = qkv_in.size(2) / 3, H = n_head, D = C / H;
  const ops::AttentionParams ap = params(B, H, T, T, D, causal, p, rng, training);
  // Head views (B, H, T, D) of the (B, T, 3, H, D) layout: strided, no copies.
  const Tensor split = ops::contiguous(qkv_in).view({B, T, 3, H, D});
  auto head = [&](int64_t i) { return split.narrow(2, i, 1).squeeze(2).transpose(1, 2); };
  const Tensor q = head(0), k = head(1), v = head(2);
  const ops::AttentionOut r = ops::attention(q, k, v, ap);
  const Tensor out = r.out, lse = r.lse;
  // out's storage is (B, T, H, D): the (B, T, C) result is a view of it.
  return record("attention_qkv", out.transpose(1, 2).view({B, T, C}), {qkv_in},
                [q, k, v, out, lse, ap, B, T, H, D](const Tensor& g) {
                  const Tensor gh = ops::contiguous(g).view({B, T, H, D}).transpose(1, 2);  // (B, H, T, D)
                  return std::vector<Tensor>{ops::attention_backward(gh, q, k, v, out, lse, ap, /*packed=*/true).dqkv};
                });
}

}  // namespace alpha::ag
