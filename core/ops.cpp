// The dispatcher: validate once, then run on the active GPU backend when it wants the op (size-threshold
// policy lives in the backend) and accepts it, else on the CPU kernels.
#include "core/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

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

DeviceCounters device_counters() {
  DeviceCounters c;
  c.cpu_ops = dispatch_stats().cpu_ops;
  c.gpu_ops = dispatch_stats().gpu_ops;
  if (const Backend* be = active_backend()) {
    c.backend = be->name();
    c.queue = be->queue_counters();
  }
  return c;
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

// ---- ALPHA_VK_CHECK: re-run each GPU op on the CPU and compare ----

// Allowed max_i |gpu_i - cpu_i| / max_i |cpu_i| per op class: f32 rounding of other summation orders
// (reductions, matmul, row ops) or an ulp or two (maps, gathers).
double check_tolerance(OpClass cls) {
  switch (cls) {
    case OpClass::elementwise: case OpClass::gelu: case OpClass::dropout: case OpClass::embedding: return 1e-5;
    default: return 1e-4;
  }
}

std::string shapes_of(std::initializer_list<Tensor> ts) {
  std::string s;
  for (const Tensor& t : ts) s += (s.empty() ? "" : ", ") + t.str();
  return s;
}

void check_tensor(const char* op, OpClass cls, const char* what, const Tensor& g, const Tensor& c,
                  std::initializer_list<Tensor> inputs) {
  if (!c.defined()) return;
  ALPHA_CHECK(g.defined() && g.shape() == c.shape(), GpuCheckError, "[{}] ALPHA_VK_CHECK: GPU {} is {}, CPU {} is {} (inputs {})",
              op, what, g.str(), what, c.str(), shapes_of(inputs));
  const auto gv = g.to_f64_vector(), cv = c.to_f64_vector();
  double scale = 0;
  for (double v : cv) scale = std::max(scale, std::isfinite(v) ? std::fabs(v) : 0.0);
  const double tol = check_tolerance(cls) * std::max(scale, 1e-30);
  for (size_t i = 0; i < gv.size(); ++i) {
    const bool same_nan = std::isnan(gv[i]) && std::isnan(cv[i]);
    const bool ok = same_nan || gv[i] == cv[i] || std::fabs(gv[i] - cv[i]) <= tol;
    ALPHA_CHECK(ok, GpuCheckError,
                "[{}] ALPHA_VK_CHECK: GPU and CPU differ in {} {} at element {}: GPU {} CPU {} (tolerance {:.3g} = {:.0e} "
                "of max |CPU| {:.6g}; inputs {})",
                op, what, c.str(), i, gv[i], cv[i], tol, check_tolerance(cls), scale, shapes_of(inputs));
  }
}

void check_result(const char* op, OpClass cls, const Tensor& g, const Tensor& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "output", g, c, in);
}
void check_result(const char* op, OpClass cls, const LayerNormOut& g, const LayerNormOut& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "y", g.y, c.y, in);
  check_tensor(op, cls, "mean", g.mean, c.mean, in);
  check_tensor(op, cls, "rstd", g.rstd, c.rstd, in);
}
void check_result(const char* op, OpClass cls, const LayerNormGrads& g, const LayerNormGrads& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "dx", g.dx, c.dx, in);
  check_tensor(op, cls, "dw", g.dw, c.dw, in);
  check_tensor(op, cls, "db", g.db, c.db, in);
}
void check_result(const char* op, OpClass cls, const CrossEntropyOut& g, const CrossEntropyOut& c, std::initializer_list<Tensor> in) {
  ALPHA_CHECK(g.count == c.count, GpuCheckError, "[{}] ALPHA_VK_CHECK: GPU counted {} rows, CPU {} (inputs {})", op,
              g.count, c.count, shapes_of(in));
  check_tensor(op, cls, "loss", g.loss, c.loss, in);
  check_tensor(op, cls, "lse", g.lse, c.lse, in);
}

// Test hook: adds 1 to the first element of a GPU result (its first tensor) before the check compares.
void corrupt(Tensor t) {
  if (!t.defined() || t.numel() == 0) return;
  if (t.dtype() == DType::f32) t.mutable_data<float>()[0] += 1.0f;
  else if (t.dtype() == DType::f64) t.mutable_data<double>()[0] += 1.0;
}
template <class R> Tensor first_tensor(const R& r) {
  if constexpr (std::is_same_v<R, Tensor>) return r;
  else if constexpr (std::is_same_v<R, LayerNormOut>) return r.y;
  else if constexpr (std::is_same_v<R, LayerNormGrads>) return r.dx;
  else return r.loss;
}

struct CheckState {
  bool on = [] {
    const char* e = std::getenv("ALPHA_VK_CHECK");
    return e && *e && std::string(e) != "0";
  }();
  bool corrupt_next = false;
};
CheckState& check_state() {
  static CheckState s;
  return s;
}

// Runs gpu(backend) when the backend wants the op and accepts it, else cpu(). R is Tensor or a struct whose
// first tensor tells whether the backend produced it. `op` and `inputs` name the op in ALPHA_VK_CHECK reports.
template <class R, class G, class C>
R dispatch(const char* op, std::initializer_list<Tensor> inputs, OpClass cls, int64_t work, G&& gpu, C&& cpu) {
  if (Backend* be = active_backend(); be && be->wants(cls, work)) {
    R r = gpu(*be);
    if (first_tensor(r).defined()) {
      ++dispatch_stats().gpu_ops;
      if (CheckState& st = check_state(); st.on) {
        if (st.corrupt_next) {
          st.corrupt_next = false;
          corrupt(first_tensor(r));
        }
        ++dispatch_stats().cpu_ops;
        check_result(op, cls, r, cpu(), inputs);
      }
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
  return dispatch<Tensor>(name, {a, b},
      OpClass::elementwise, shape_numel(out), [&](Backend& be) { return (be.*gpu)(a, b); },
      [&] { return cpu::binary(op, a, b); });
}

Tensor unary(cpu::UnaryOp op, const char* name, const Tensor& x) {
  check_float(x, name, "x");
  return dispatch<Tensor>(name, {x},
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.unary(name, x); },
      [&] { return cpu::unary(op, x); });
}

// True when t's storage has a GPU copy and no current host copy: a CPU op on it would download it.
bool lives_on_gpu(const Tensor& t) {
  const auto& st = t.storage();
  return st->device() != nullptr && !st->host_valid();
}

// A matmul operand in a layout the backend takes (contiguous, offset 0): a transposed-contiguous view flips
// the trans flag; any other view is copied on the GPU. Unchanged when the backend declines the copy.
std::pair<Tensor, bool> gpu_operand(Backend& be, const Tensor& x, bool trans) {
  if (x.is_contiguous() && x.offset() == 0) return {x, trans};
  const Tensor xt = x.transpose(-1, -2);
  if (xt.is_contiguous() && xt.offset() == 0) return {xt, !trans};
  if (Tensor c = be.copy(x); c.defined()) {
    ++dispatch_stats().gpu_ops;
    return {c, trans};
  }
  return {x, trans};
}

}  // namespace

Tensor contiguous(const Tensor& x) {
  ALPHA_CHECK(x.defined(), ValueError, "[contiguous] x is undefined");
  if (x.is_contiguous()) return x;
  if (Backend* be = active_backend(); be && (lives_on_gpu(x) || be->wants(OpClass::elementwise, x.numel()))) {
    if (Tensor r = be->copy(x); r.defined()) {
      ++dispatch_stats().gpu_ops;
      if (check_state().on) check_result("contiguous", OpClass::elementwise, r, x.clone(), {x});
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return x.clone();
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  ALPHA_CHECK(x.defined(), ValueError, "[reshape] x is undefined");
  return contiguous(x).view(shape);
}

Tensor narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) {
  ALPHA_CHECK(g.defined(), ValueError, "[narrow_backward] g is undefined");
  ALPHA_CHECK(g.dim() == static_cast<int64_t>(shape.size()), ShapeError,
              "[narrow_backward] g {} does not match the input shape {}", g.str(), shape_str(shape));
  const int64_t d = wrap(dim, g.dim(), "narrow_backward");
  for (int64_t k = 0; k < g.dim(); ++k) {
    const bool ok = k == d ? start >= 0 && start + g.size(k) <= shape[k] : g.size(k) == shape[k];
    ALPHA_CHECK(ok, ShapeError, "[narrow_backward] g {} does not fit {} at {} along dim {}", g.str(),
                shape_str(shape), start, d);
  }
  auto on_cpu = [&] {
    Tensor gx = Tensor::zeros(shape, g.dtype());  // zero everywhere but the window
    Tensor win = gx.narrow(d, start, g.size(d));
    win.copy_from(g);
    return gx;
  };
  Backend* be = active_backend();
  if (be && (lives_on_gpu(g) || be->wants(OpClass::elementwise, shape_numel(shape)))) {
    if (Tensor r = be->narrow_backward(g, shape, d, start); r.defined()) {
      ++dispatch_stats().gpu_ops;
      if (check_state().on) check_result("narrow_backward", OpClass::elementwise, r, on_cpu(), {g});
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return on_cpu();
}

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
  return dispatch<Tensor>(name, {x},
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
  return dispatch<Tensor>("sum", {x},
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
  return dispatch<Tensor>("matmul", {a, b},
      OpClass::matmul, work,
      [&](Backend& be) {
        const auto [ag, tag] = gpu_operand(be, a, ta);
        const auto [bg, tbg] = gpu_operand(be, b, tb);
        return be.matmul(ag, bg, tag, tbg);
      },
      [&] { return cpu::matmul(a, b, ta, tb); });
}

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  check_float(weight, "embedding", "weight");
  check_index(idx, "embedding", "indices");
  ALPHA_CHECK(weight.dim() == 2, ShapeError, "[embedding] weight must be (V, C), got {}", weight.str());
  return dispatch<Tensor>("embedding", {weight, idx},
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
  return dispatch<Tensor>("embedding_backward", {dout, idx},
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
  return dispatch<LayerNormOut>("layernorm", {x, w, b},
      OpClass::layernorm, x.numel(), [&](Backend& be) { return be.layernorm(x, w, b, eps); },
      [&] { return cpu::layernorm(x, w, b, eps); });
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias) {
  check_float(dy, "layernorm_backward", "dy");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[layernorm_backward] dy {} and x {} differ", dy.str(),
              x.str());
  check_ln_param(w, x, "weight");
  return dispatch<LayerNormGrads>("layernorm_backward", {dy, x, w, mean, rstd},
      OpClass::layernorm, x.numel(),
      [&](Backend& be) { return be.layernorm_backward(dy, x, w, mean, rstd, has_bias); },
      [&] { return cpu::layernorm_backward(dy, x, w, mean, rstd, has_bias); });
}

Tensor gelu(const Tensor& x) {
  check_float(x, "gelu", "x");
  return dispatch<Tensor>("gelu", {x},
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.gelu(x); }, [&] { return cpu::gelu(x); });
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  check_float(dy, "gelu_backward", "dy");
  check_float(x, "gelu_backward", "x");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[gelu_backward] dy {} and x {} differ", dy.str(), x.str());
  return dispatch<Tensor>("gelu_backward", {dy, x},
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
  return dispatch<Tensor>("softmax", {x},
      OpClass::softmax, x.numel(), [&](Backend& be) { return be.softmax(x, causal); },
      [&] { return cpu::softmax(x, causal); });
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  check_float(dy, "softmax_backward", "dy");
  check_float(y, "softmax_backward", "y");
  ALPHA_CHECK(dy.shape() == y.shape(), ShapeError, "[softmax_backward] dy {} and y {} differ", dy.str(), y.str());
  return dispatch<Tensor>("softmax_backward", {dy, y},
      OpClass::softmax, y.numel(), [&](Backend& be) { return be.softmax_backward(dy, y); },
      [&] { return cpu::softmax_backward(dy, y); });
}

CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  check_float(logits, "cross_entropy", "logits");
  check_index(targets, "cross_entropy", "targets");
  ALPHA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "[cross_entropy] expected logits (N, V) and targets (N), got {} and {}", logits.str(), targets.str());
  ALPHA_CHECK(logits.size(1) > 0, ShapeError, "[cross_entropy] logits {} have no classes", logits.str());
  return dispatch<CrossEntropyOut>("cross_entropy", {logits, targets},
      OpClass::cross_entropy, logits.numel(), [&](Backend& be) { return be.cross_entropy(logits, targets, ignore_index); },
      [&] { return cpu::cross_entropy(logits, targets, ignore_index); });  // kernel range-checks targets
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index) {
  check_float(logits, "cross_entropy_backward", "logits");
  check_index(targets, "cross_entropy_backward", "targets");
  return dispatch<Tensor>("cross_entropy_backward", {logits, targets, lse},
      OpClass::cross_entropy, logits.numel(),
      [&](Backend& be) { return be.cross_entropy_backward(logits, targets, lse, dloss, count, ignore_index); },
      [&] { return cpu::cross_entropy_backward(logits, targets, lse, dloss, count, ignore_index); });
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_float(x, "dropout", "x");
  ALPHA_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] p must be in [0, 1), got {}", p);
  return dispatch<Tensor>("dropout", {x},
      OpClass::dropout, x.numel(), [&](Backend& be) { return be.dropout(x, p, seed, offset); },
      [&] { return cpu::dropout(x, p, seed, offset); });
}

}  // namespace ops

bool gpu_check_enabled() { return ops::check_state().on; }
void set_gpu_check(bool on) { ops::check_state().on = on; }
void corrupt_next_gpu_result() { ops::check_state().corrupt_next = true; }

}  // namespace alpha
