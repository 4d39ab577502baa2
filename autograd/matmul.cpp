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
  const Tensor w16 = ops::cast(w, DType::f16);  // (out, in)
  const bool gx = x.requires_grad(), gw = w.requires_grad(), gb = b.defined() && b.requires_grad();
  // The bias in the GEMM's epilogue where the GPU has one (ops::linear), else a separate add.
  return record("linear_master", ops::linear(x, w16, b), {x, w, b}, [x, w16, b, gx, gw, gb](const Tensor& g) {
    Tensor dx, dw, db;
    if (gx) dx = ops::matmul(g, w16, false, false);  // (..., out) @ (out, in) -> (..., in), f16
    if (gw) {  // (R, out)^T @ (R, in) -> (out, in) over the flattened rows, f32
      dw = ops::matmul_f32(ops::reshape(g, {-1, g.size(-1)}), ops::reshape(x, {-1, x.size(-1)}), true, false);
    }
    if (gb) db = ops::sum_to(g, b.shape());  // (out)
    return std::vector<Tensor>{dx, dw, db};
  });
}

// f16 training's GPT-2 MLP, one tape node: y = gelu(x @ w1^T + b1) @ w2^T + b2 with f32 master weights. On the
// GPU the bias and GELU run in the first GEMM's epilogue and GELU's backward in the epilogue of the GEMM giving
// the gradient at GELU's output (ops::linear_gelu, ops::matmul_gelu_backward): no separate GELU or bias passes.
Tensor mlp_gelu_master(const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2,
                       Tensor* act) {
  ALPHA_CHECK(x.dtype() == DType::f16 && w1.dtype() == DType::f32 && w2.dtype() == DType::f32, DTypeError,
              "[mlp] takes f16 x and f32 weights, got {}, {} and {}", x.str(), w1.str(), w2.str());
  const Tensor w1h = ops::cast(w1, DType::f16), w2h = ops::cast(w2, DType::f16);  // (F, C), (C, F)
  const ops::LinearGeluOut hg = ops::linear_gelu(x, w1h, b1);                     // (..., F) twice
  if (act) *act = hg.g;
  const bool gx = x.requires_grad(), gw1 = w1.requires_grad(), gw2 = w2.requires_grad();
  const bool gb1 = b1.defined() && b1.requires_grad(), gb2 = b2.defined() && b2.requires_grad();
  auto rows = [](const Tensor& t) { return ops::reshape(t, {-1, t.size(-1)}); };
  return record("mlp_gelu_master", ops::linear(hg.g, w2h, b2), {x, w1, b1, w2, b2},
                [=, h = hg.h, g = hg.g](const Tensor& dy) {  // dy (..., C)
    const Tensor dh = ops::matmul_gelu_backward(dy, w2h, h);  // (..., F): (dy @ w2) * gelu'(h)
    Tensor dx, dw1, db1, dw2, db2;
    if (gw2) dw2 = ops::matmul_f32(rows(dy), rows(g), true, false);  // (C, F), f32
    if (gb2) db2 = ops::sum_to(dy, b2.shape());
    if (gw1) dw1 = ops::matmul_f32(rows(dh), rows(x), true, false);  // (F, C), f32
    if (gb1) db1 = ops::sum_to(dh, b1.shape());
    if (gx) dx = ops::matmul(dh, w1h, false, false);                 // (..., C)
    return std::vector<Tensor>{dx, dw1, db1, dw2, db2};
  });
}

}  // namespace alpha::ag
