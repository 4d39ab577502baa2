// LayerNorm over the last dim; the forward's saved row mean and rstd feed the fused backward.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {
namespace {

// The node: y from x and the parameters `wr`, `br` the kernels read (f16 copies under layernorm_master); the
// gradients go to the recorded inputs x, w, b (the leaves themselves there, f32 dw/db as the kernels give them).
Tensor record_layernorm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& wr, const Tensor& br,
                        double eps) {
  ops::LayerNormOut r = ops::layernorm(x, wr, br, eps);  // y (..., C), mean/rstd (...)
  const bool has_bias = b.defined();
  return record("layernorm", r.y, {x, w, b}, [x, w, b, wr, mean = r.mean, rstd = r.rstd, has_bias](const Tensor& g) {
    // The weight and bias gradients are off the walk's critical path: deferred beside the linears' (tape.h).
    // x's gradient so far (the residual stream's, in a GPT block) is added in the dx pass: no separate add.
    const Tensor acc = take_grad(x);
    if (w.defined() && w.is_leaf() && (!has_bias || b.is_leaf()) && deferring_leaf_grads()) {
      const Tensor dx = ops::layernorm_backward(g, x, wr, mean, rstd, has_bias, ops::LnGrads::dx, acc).dx;
      defer_leaf_grads({w, b}, [g, x, wr, mean, rstd, has_bias] {
        ops::LayerNormGrads d = ops::layernorm_backward(g, x, wr, mean, rstd, has_bias, ops::LnGrads::params);
        return std::vector<Tensor>{d.dw, d.db};
      });
      return std::vector<Tensor>{dx, Tensor(), Tensor()};
    }
    ops::LayerNormGrads d = ops::layernorm_backward(g, x, wr, mean, rstd, has_bias, ops::LnGrads::all, acc);
    return std::vector<Tensor>{d.dx, d.dw, d.db};
  });
}

}  // namespace

Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return record_layernorm(x, w, b, w, b, eps);
}

Tensor layernorm_master(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  ALPHA_CHECK(x.dtype() == DType::f16 && w.defined() && w.dtype() == DType::f32 &&
                  (!b.defined() || b.dtype() == DType::f32),
              DTypeError, "[layernorm] a master-parameter LayerNorm takes f16 x and f32 w, b, got {}, {} and {}",
              x.str(), w.str(), b.defined() ? b.str() : std::string("no bias"));
  // The f16 copies as ag::cast makes them (a leaf's cached between steps): the same bits as cast then layernorm.
  auto half = [](const Tensor& t) {
    return !t.defined() ? t : t.is_leaf() ? ops::cast_cached(t, DType::f16) : ops::cast(t, DType::f16);
  };
  return record_layernorm(x, w, b, half(w), half(b), eps);
}

}  // namespace alpha::ag
