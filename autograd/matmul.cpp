// C = op(A) @ op(B). With op(A) = A^T when trans_a (likewise B):
//   dA = dC @ op(B)^T        (or op(B) @ dC^T when trans_a)
//   dB = op(A)^T @ dC        (or dC^T @ op(A) when trans_b)
// Batch broadcasting is undone by the tape's sum_to (a 2-D weight gets its grads summed over the batch).
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  return record("matmul", ops::matmul(a, b, ta, tb), {a, b}, [a, b, ta, tb, ga, gb](const Tensor& g) {
    Tensor da, db;
    if (ga) {
      da = ta ? ops::matmul(b, g, tb, true) : ops::matmul(g, b, false, !tb);
      if (da.dim() > a.dim()) da = ops::sum_to(da, a.shape());
    }
    if (gb && b.dim() == 2 && a.dim() > 2) {
      // A 2-D weight against a batch: dB = sum over the batch = one GEMM on the flattened rows.
      const Tensor af = ops::reshape(ta ? a.transpose(-1, -2) : a, {-1, a.size(ta ? -2 : -1)});  // (R, K)
      const Tensor gf = ops::reshape(g, {-1, g.size(-1)});                                          // (R, N)
      db = tb ? ops::matmul(gf, af, true, false) : ops::matmul(af, gf, true, false);
    } else if (gb) {
      db = tb ? ops::matmul(g, a, true, ta) : ops::matmul(a, g, !ta, false);
      if (db.dim() > b.dim()) db = ops::sum_to(db, b.shape());
    }
    return std::vector<Tensor>{da, db};
  });
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  ALPHA_CHECK(w.dim() == 2, ShapeError, "[linear] weight must be (out, in), got {}", w.str());
  Tensor y = matmul(x, w, false, true);  // (..., in) @ (out, in)^T -> (..., out)
  return b.defined() ? add(y, b) : y;
}

Tensor linear_master(const Tensor& x, const Tensor& w, const Tensor& b) {
  ALPHA_CHECK(w.dim() == 2, ShapeError, "[linear] weight must be (out, in), got {}", w.str());
  ALPHA_CHECK(x.dtype() == DType::f16 && w.dtype() == DType::f32, DTypeError,
              "[linear] a master-weight linear takes f16 x and an f32 weight, got {} and {}", x.str(), w.str());
  // A leaf (a weight) keeps its f16 copy between steps (ops::cast_cached; GpuAdamW rewrites it).
  auto half = [](const Tensor& t) { return t.is_leaf() ? ops::cast_cached(t, DType::f16) : ops::cast(t, DType::f16); };
  const Tensor w16 = half(w);  // (out, in)
  // An f32 (master) bias runs as its f16 copy and gets an f32 gradient straight from the column sum.
  const bool b32 = b.defined() && b.dtype() == DType::f32;
  const Tensor b16 = b32 ? half(b) : b;
  const bool gx = x.requires_grad(), gw = w.requires_grad(), gb = b.defined() && b.requires_grad();
  // The bias in the GEMM's epilogue where the GPU has one (ops::linear), else a separate add.
  return record("linear_master", ops::linear(x, w16, b16), {x, w, b}, [x, w16, b, b32, gx, gw, gb](const Tensor& g) {
    Tensor dx, dw, db;
    if (gx) dx = ops::matmul(g, w16, false, false);  // (..., out) @ (out, in) -> (..., in), f16
    const Tensor g2 = ops::reshape(g, {-1, g.size(-1)});  // (R, out) over the flattened rows
    if (gw && gb && b32) {  // one GEMM for both where the backend sums the bias gradient into it
      ops::LinearWeightGrads d = ops::linear_weight_grads(g2, ops::reshape(x, {-1, x.size(-1)}));
      return std::vector<Tensor>{dx, d.dw, d.db};
    }
    if (gw) dw = ops::matmul_f32(g2, ops::reshape(x, {-1, x.size(-1)}), true, false);  // (out, in), f32
    if (gb) db = b32 ? ops::sum_f32(g2, 0) : ops::sum_to(g, b.shape());  // (out)
    return std::vector<Tensor>{dx, dw, db};
  });
}

}  // namespace alpha::ag
