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

namespace {

// A leaf (a weight) keeps its f16 copy between steps (ops::cast_cached; GpuAdamW rewrites it).
Tensor half(const Tensor& t) { return t.is_leaf() ? ops::cast_cached(t, DType::f16) : ops::cast(t, DType::f16); }
// An f32 (master) bias runs as its f16 copy and gets an f32 gradient straight from the column sum.
Tensor half_bias(const Tensor& b) { return b.defined() && b.dtype() == DType::f32 ? half(b) : b; }
Tensor rows(const Tensor& t) { return ops::reshape(t, {-1, t.size(-1)}); }  // (..., n) -> (R, n)

void check_master(const char* op, const Tensor& x, const Tensor& w) {
  ALPHA_CHECK(w.dim() == 2, ShapeError, "[{}] weight must be (out, in), got {}", op, w.str());
  ALPHA_CHECK(x.dtype() == DType::f16 && w.dtype() == DType::f32, DTypeError,
              "[{}] a master-weight linear takes f16 x and an f32 weight, got {} and {}", op, x.str(), w.str());
}

// A master-weight linear's gradients from g (..., out): dx (f16), dw (out, in) in f32, and db, in f32 for an f32
// bias; dw and db in one GEMM where the backend sums the bias gradient into it.
// The weight (and bias) gradients: {dw, db}, either may be undefined.
std::vector<Tensor> weight_grads(const Tensor& g, const Tensor& x, const Tensor& b, bool gw, bool gb) {
  Tensor dw, db;
  const bool b32 = b.defined() && b.dtype() == DType::f32;
  if (gw && gb && b32) {
    ops::LinearWeightGrads d = ops::linear_weight_grads(rows(g), rows(x));
    return {d.dw, d.db};
  }
  if (gw) dw = ops::matmul_f32(rows(g), rows(x), true, false);  // (out, in), f32
  if (gb) db = b32 ? ops::sum_f32(rows(g), 0) : ops::sum_to(g, b.shape());  // (out)
  return {dw, db};
}

std::vector<Tensor> master_grads(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& w16, const Tensor& b,
                                 bool gx, bool gw, bool gb) {
  Tensor dx;
  if (gx) dx = ops::matmul(g, w16, false, false);  // (..., out) @ (out, in) -> (..., in), f16
  // Weight gradients are off the walk's critical path: deferred, they run side by side after it (tape.h).
  if (gw && w.is_leaf() && (!gb || b.is_leaf()) && deferring_leaf_grads()) {
    defer_leaf_grads({w, gb ? b : Tensor()}, [g, x, b, gw, gb] { return weight_grads(g, x, b, gw, gb); });
    return {dx, Tensor(), Tensor()};
  }
  std::vector<Tensor> d = weight_grads(g, x, b, gw, gb);
  return {dx, d[0], d[1]};
}

}  // namespace

Tensor linear_master(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_master("linear", x, w);
  const Tensor w16 = half(w);  // (out, in)
  const bool gx = x.requires_grad(), gw = w.requires_grad(), gb = b.defined() && b.requires_grad();
  // The bias in the GEMM's epilogue where the GPU has one (ops::linear), else a separate add.
  return record("linear_master", ops::linear(x, w16, half_bias(b)), {x, w, b},
                [x, w, w16, b, gx, gw, gb](const Tensor& g) { return master_grads(g, x, w, w16, b, gx, gw, gb); });
}

Tensor linear_master_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  check_master("linear", x, w);
  const Tensor w16 = half(w);  // (out, in)
  const bool gx = x.requires_grad(), gw = w.requires_grad(), gb = b.defined() && b.requires_grad();
  return record("linear_master_residual", ops::linear_residual(x, w16, half_bias(b), r), {x, w, b, r},
                [x, w, w16, b, gx, gw, gb](const Tensor& g) {
                  std::vector<Tensor> d = master_grads(g, x, w, w16, b, gx, gw, gb);
                  d.push_back(g);  // the residual's gradient passes through, as add's does
                  return d;
                });
}

}  // namespace alpha::ag
