// The dispatcher: validate once, then run on the active GPU backend when it wants the op (size-threshold
// policy lives in the backend) and accepts it, else on the CPU kernels.
#include "core/ops.h"

#include <cmath>

#include "core/backend.h"
#include "core/cpu/cross_entropy.h"
#include "core/cpu/dropout.h"
#include "core/cpu/elementwise.h"
#include "core/cpu/embedding.h"
#include "core/cpu/gelu.h"
#include "core/cpu/layernorm.h"
#include "core/cpu/matmul.h"
#include "core/cpu/reduce.h"
#include "core/cpu/softmax.h"

namespace alpha {

namespace {
Backend* g_backend = nullptr;
}

Backend* active_backend() { return g_backend; }
void set_active_backend(Backend* b) { g_backend = b; }
DispatchStats& dispatch_stats() {
  static DispatchStats s;
  return s;
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::elementwise: return "elementwise";
    case OpClass::reduce: return "reduce";
    case OpClass::matmul: return "matmul";
    case OpClass::embedding: return "embedding";
    case OpClass::layernorm: return "layernorm";
    case OpClass::gelu: return "gelu";
    case OpClass::softmax: return "softmax";
    case OpClass::cross_entropy: return "cross_entropy";
    case OpClass::dropout: return "dropout";
  }
  return "?";
}

namespace ops {

namespace {

// Runs gpu(backend) when the backend wants and accepts the op, else cpu(). R is Tensor or a struct whose
// first member tells whether the backend produced it.
template <class R, class G, class C>
R dispatch(OpClass cls, int64_t work, G&& gpu, C&& cpu) {
  if (Backend* be = active_backend(); be && be->wants(cls, work)) {
    R r = gpu(*be);
    bool ok;
    if constexpr (std::is_same_v<R, Tensor>) ok = r.defined();
    else if constexpr (std::is_same_v<R, LayerNormOut>) ok = r.y.defined();
    else if constexpr (std::is_same_v<R, LayerNormGrads>) ok = r.dx.defined();
    else ok = r.loss.defined();
    if (ok) {
      ++dispatch_stats().gpu_ops;
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return cpu();
}

void check_float(const Tensor& t, const char* op, const char* what) {
  ALPHA_CHECK(t.defined(), ValueError, "[{}] {} is undefined", op, what);
  ALPHA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError,
              "[{}] {} must be f32 or f64, got {}", op, what, t.str());
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  ALPHA_CHECK(a.dtype() == b.dtype(), DTypeError, "[{}] dtypes differ: {} and {}", op, a.str(), b.str());
}

void check_index(const Tensor& t, const char* op, const char* what) {
  ALPHA_CHECK(t.defined(), ValueError, "[{}] {} is undefined", op, what);
  ALPHA_CHECK(t.dtype() == DType::i32, DTypeError, "[{}] {} must be i32, got {}", op, what, t.str());
}

int64_t wrap(int64_t d, int64_t nd, const char* op) {
  const int64_t w = d < 0 ? d + nd : d;
  ALPHA_CHECK(w >= 0 && w < nd, IndexError, "[{}] dim {} out of range for a {}-d tensor", op, d, nd);
  return w;
}

Tensor binary(cpu::BinaryOp op, const char* name, const Tensor& a, const Tensor& b,
              Tensor (Backend::*gpu)(const Tensor&, const Tensor&)) {
  check_float(a, name, "a");
  check_float(b, name, "b");
  check_same_dtype(a, b, name);
  const Shape out = broadcast_shapes(a.shape(), b.shape(), name);
  return dispatch<Tensor>(
      OpClass::elementwise, shape_numel(out), [&](Backend& be) { return (be.*gpu)(a, b); },
      [&] { return cpu::binary(op, a, b); });
}

Tensor unary(cpu::UnaryOp op, const char* name, const Tensor& x) {
  check_float(x, name, "x");
  return dispatch<Tensor>(
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.unary(name, x); },
      [&] { return cpu::unary(op, x); });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(cpu::BinaryOp::add, "add", a, b, &Backend::add); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(cpu::BinaryOp::sub, "sub", a, b, &Backend::sub); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(cpu::BinaryOp::mul, "mul", a, b, &Backend::mul); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(cpu::BinaryOp::div, "div", a, b, &Backend::div); }
Tensor neg(const Tensor& x) { return unary(cpu::UnaryOp::neg, "neg", x); }
Tensor exp(const Tensor& x) { return unary(cpu::UnaryOp::exp, "exp", x); }
Tensor log(const Tensor& x) { return unary(cpu::UnaryOp::log, "log", x); }
Tensor sqrt(const Tensor& x) { return unary(cpu::UnaryOp::sqrt, "sqrt", x); }

static Tensor affine(const Tensor& x, double m, double a, const char* name) {
  check_float(x, name, "x");
  ALPHA_CHECK(std::isfinite(m) && std::isfinite(a), ValueError, "[{}] scalar is not finite", name);
  return dispatch<Tensor>(
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.scale(x, m, a); },
      [&] { return cpu::affine(x, m, a); });
}
Tensor scale(const Tensor& x, double s) { return affine(x, s, 0.0, "scale"); }
Tensor add_scalar(const Tensor& x, double s) { return affine(x, 1.0, s, "add_scalar"); }

void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_float(dst, "add_", "dst");
  check_float(src, "add_", "src");
  check_same_dtype(dst, src, "add_");
  ALPHA_CHECK(broadcast_shapes(dst.shape(), src.shape(), "add_") == dst.shape(), ShapeError,
              "[add_] source {} does not broadcast to destination {}", src.str(), dst.str());
  ++dispatch_stats().cpu_ops;
  cpu::add_inplace(dst, src, alpha);
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  check_float(x, "sum", "x");
  const int64_t d = wrap(dim, x.dim(), "sum");
  return dispatch<Tensor>(
      OpClass::reduce, x.numel(), [&](Backend& be) { return be.sum(x, d, keepdim); },
      [&] { return cpu::sum(x, d, keepdim); });
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = wrap(dim, x.dim(), "mean");
  ALPHA_CHECK(x.size(d) > 0, ShapeError, "[mean] dim {} of {} is empty", d, x.str());
  return scale(sum(x, d, keepdim), 1.0 / static_cast<double>(x.size(d)));
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  check_float(x, "max", "x");
  const int64_t d = wrap(dim, x.dim(), "max");
  ALPHA_CHECK(x.size(d) > 0, ShapeError, "[max] dim {} of {} is empty", d, x.str());
  ++dispatch_stats().cpu_ops;
  return cpu::max(x, d, keepdim);
}

Tensor sum_all(const Tensor& x) {
  check_float(x, "sum_all", "x");
  ++dispatch_stats().cpu_ops;
  return cpu::sum_all(x);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  ALPHA_CHECK(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape(), ShapeError,
              "[sum_to] {} is not a broadcast of {}", x.str(), shape_str(shape));
  Tensor r = x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  for (int64_t i = 0; i < lead; ++i) r = sum(r, 0, false);
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (shape[i] == 1 && r.size(i) != 1) r = sum(r, i, true);
  return r;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  check_float(a, "matmul", "a");
  check_float(b, "matmul", "b");
  check_same_dtype(a, b, "matmul");
  ALPHA_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError, "[matmul] operands must be at least 2-d: {} x {}",
              shape_str(a.shape()), shape_str(b.shape()));
  const int64_t M = ta ? a.size(-1) : a.size(-2), Ka = ta ? a.size(-2) : a.size(-1);
  const int64_t Kb = tb ? b.size(-1) : b.size(-2), N = tb ? b.size(-2) : b.size(-1);
  ALPHA_CHECK(Ka == Kb, ShapeError, "[matmul] inner dimensions differ: {}{} x {}{}", shape_str(a.shape()),
              ta ? "^T" : "", shape_str(b.shape()), tb ? "^T" : "");
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t work = 2 * shape_numel(batch) * M * N * Ka;
  return dispatch<Tensor>(
      OpClass::matmul, work, [&](Backend& be) { return be.matmul(a, b, ta, tb); },
      [&] { return cpu::matmul(a, b, ta, tb); });
}

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  check_float(weight, "embedding", "weight");
  check_index(idx, "embedding", "indices");
  ALPHA_CHECK(weight.dim() == 2, ShapeError, "[embedding] weight must be (V, C), got {}", weight.str());
  return dispatch<Tensor>(
      OpClass::embedding, idx.numel() * weight.size(1), [&](Backend& be) { return be.embedding(weight, idx); },
      [&] { return cpu::embedding(weight, idx); });  // the kernel range-checks each index
}

Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab) {
  check_float(dout, "embedding_backward", "dout");
  check_index(idx, "embedding_backward", "indices");
  ALPHA_CHECK(vocab > 0, ValueError, "[embedding_backward] vocab must be positive, got {}", vocab);
  Shape want = idx.shape();
  want.push_back(dout.size(-1));
  ALPHA_CHECK(dout.shape() == want, ShapeError, "[embedding_backward] dout {} does not match indices {}",
              dout.str(), idx.str());
  return dispatch<Tensor>(
      OpClass::embedding, dout.numel(), [&](Backend& be) { return be.embedding_backward(dout, idx, vocab); },
      [&] { return cpu::embedding_backward(dout, idx, vocab); });
}

static void check_ln_param(const Tensor& p, const Tensor& x, const char* what) {
  if (!p.defined()) return;
  check_float(p, "layernorm", what);
  check_same_dtype(p, x, "layernorm");
  ALPHA_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), ShapeError, "[layernorm] {} is {}, expected [{}]", what,
              p.str(), x.size(-1));
}

LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  check_float(x, "layernorm", "x");
  ALPHA_CHECK(x.dim() >= 1 && x.size(-1) > 0, ShapeError, "[layernorm] x {} has no channels", x.str());
  ALPHA_CHECK(eps > 0 && std::isfinite(eps), ValueError, "[layernorm] eps must be positive, got {}", eps);
  check_ln_param(w, x, "weight");
  check_ln_param(b, x, "bias");
  return dispatch<LayerNormOut>(
      OpClass::layernorm, x.numel(), [&](Backend& be) { return be.layernorm(x, w, b, eps); },
      [&] { return cpu::layernorm(x, w, b, eps); });
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias) {
  check_float(dy, "layernorm_backward", "dy");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[layernorm_backward] dy {} and x {} differ", dy.str(),
              x.str());
  check_ln_param(w, x, "weight");
  return dispatch<LayerNormGrads>(
      OpClass::layernorm, x.numel(),
      [&](Backend& be) { return be.layernorm_backward(dy, x, w, mean, rstd, has_bias); },
      [&] { return cpu::layernorm_backward(dy, x, w, mean, rstd, has_bias); });
}

Tensor gelu(const Tensor& x) {
  check_float(x, "gelu", "x");
  return dispatch<Tensor>(
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.gelu(x); }, [&] { return cpu::gelu(x); });
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  check_float(dy, "gelu_backward", "dy");
  check_float(x, "gelu_backward", "x");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[gelu_backward] dy {} and x {} differ", dy.str(), x.str());
  return dispatch<Tensor>(
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.gelu_backward(dy, x); },
      [&] { return cpu::gelu_backward(dy, x); });
}

Tensor softmax(const Tensor& x, bool causal) {
  check_float(x, "softmax", "x");
  ALPHA_CHECK(x.dim() >= 1, ShapeError, "[softmax] x must have a dim, got {}", x.str());
  if (causal) {
    ALPHA_CHECK(x.dim() >= 2 && x.size(-1) >= x.size(-2), ShapeError,
                "[softmax] causal mask needs (..., Tq, Tk) with Tk >= Tq, got {}", x.str());
  }
  return dispatch<Tensor>(
      OpClass::softmax, x.numel(), [&](Backend& be) { return be.softmax(x, causal); },
      [&] { return cpu::softmax(x, causal); });
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  check_float(dy, "softmax_backward", "dy");
  check_float(y, "softmax_backward", "y");
  ALPHA_CHECK(dy.shape() == y.shape(), ShapeError, "[softmax_backward] dy {} and y {} differ", dy.str(), y.str());
  return dispatch<Tensor>(
      OpClass::softmax, y.numel(), [&](Backend& be) { return be.softmax_backward(dy, y); },
      [&] { return cpu::softmax_backward(dy, y); });
}

CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  check_float(logits, "cross_entropy", "logits");
  check_index(targets, "cross_entropy", "targets");
  ALPHA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "[cross_entropy] expected logits (N, V) and targets (N), got {} and {}", logits.str(), targets.str());
  ALPHA_CHECK(logits.size(1) > 0, ShapeError, "[cross_entropy] logits {} have no classes", logits.str());
  return dispatch<CrossEntropyOut>(
      OpClass::cross_entropy, logits.numel(), [&](Backend& be) { return be.cross_entropy(logits, targets, ignore_index); },
      [&] { return cpu::cross_entropy(logits, targets, ignore_index); });  // kernel range-checks targets
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index) {
  check_float(logits, "cross_entropy_backward", "logits");
  check_index(targets, "cross_entropy_backward", "targets");
  return dispatch<Tensor>(
      OpClass::cross_entropy, logits.numel(),
      [&](Backend& be) { return be.cross_entropy_backward(logits, targets, lse, dloss, count, ignore_index); },
      [&] { return cpu::cross_entropy_backward(logits, targets, lse, dloss, count, ignore_index); });
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_float(x, "dropout", "x");
  ALPHA_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] p must be in [0, 1), got {}", p);
  return dispatch<Tensor>(
      OpClass::dropout, x.numel(), [&](Backend& be) { return be.dropout(x, p, seed, offset); },
      [&] { return cpu::dropout(x, p, seed, offset); });
}

}  // namespace ops
}  // namespace alpha
