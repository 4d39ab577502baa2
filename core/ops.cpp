// The dispatcher: validate once, then run on the active GPU backend when it wants the op (size-threshold
// policy lives in the backend) and accepts it, else on the CPU kernels.
#include "core/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/gpu_check.h"
#include "core/op_timing.h"
#include "core/cpu/attention.h"
#include "core/cpu/copy.h"
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

using gpu_check::check_result;
using gpu_check::check_state;
using gpu_check::CheckState;
using gpu_check::corrupt;

using namespace detail;

namespace {

Tensor binary(cpu::BinaryOp op, const char* name, const Tensor& a, const Tensor& b,
              Tensor (Backend::*gpu)(const Tensor&, const Tensor&)) {
  check_float16(a, name, "a");
  check_float16(b, name, "b");
  check_mixable(a, b, name);
  // f16 with f32 (e.g. gradient accumulation of a tied weight): the f16 side is cast up (on the GPU when
  // there), so the kernels only ever see one dtype.
  if (a.dtype() != b.dtype()) return binary(op, name, cast(a, DType::f32), cast(b, DType::f32), gpu);
  const Shape out = broadcast_shapes(a.shape(), b.shape(), name);
  return dispatch<Tensor>(name, {a, b},
      OpClass::elementwise, shape_numel(out), [&](Backend& be) { return (be.*gpu)(a, b); },
      [&] { return cpu::binary(op, up(a), up(b)); });
}

Tensor unary(cpu::UnaryOp op, const char* name, const Tensor& x) {
  check_float16(x, name, "x");
  return dispatch<Tensor>(name, {x},
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.unary(name, x); },
      [&] { return cpu::unary(op, up(x)); });
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
  return timed_op("contiguous", {x}, [&] { return x.clone(); });
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

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  ALPHA_CHECK(!xs.empty(), ValueError, "[cat] no tensors to join");
  for (const Tensor& x : xs) ALPHA_CHECK(x.defined(), ValueError, "[cat] an input is undefined");
  const Tensor& x0 = xs[0];
  const int64_t d = wrap(dim, x0.dim(), "cat");
  Shape shape = x0.shape();
  shape[d] = 0;
  bool on_gpu = false;
  for (const Tensor& x : xs) {
    ALPHA_CHECK(x.dtype() == x0.dtype(), DTypeError, "[cat] dtypes differ: {} and {}", x0.str(), x.str());
    bool ok = x.dim() == x0.dim();
    for (int64_t k = 0; ok && k < x.dim(); ++k) ok = k == d || x.size(k) == x0.size(k);
    ALPHA_CHECK(ok, ShapeError, "[cat] {} does not join {} along dim {}", x.str(), x0.str(), d);
    shape[d] += x.size(d);
    on_gpu = on_gpu || lives_on_gpu(x);
  }
  auto on_cpu = [&] { return cpu::cat(xs, d); };
  Backend* be = active_backend();
  if (be && (on_gpu || be->wants(OpClass::elementwise, shape_numel(shape)))) {
    if (Tensor r = be->cat(xs, d); r.defined()) {
      ++dispatch_stats().gpu_ops;
      if (check_state().on) check_result("cat", OpClass::elementwise, r, on_cpu(), {x0});
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return timed_op("cat", {x0}, on_cpu);
}

Tensor cast(const Tensor& x, DType dtype) {
  ALPHA_CHECK(x.defined(), ValueError, "[cast] x is undefined");
  ALPHA_CHECK(is_float(x.dtype()) && is_float(dtype), DTypeError, "[cast] only float dtypes convert: {} to {}",
              x.str(), dtype_name(dtype));
  if (x.dtype() == dtype) return x;
  // On the GPU when it wants the size or x lives there (casting on the CPU would download it).
  if (Backend* be = active_backend(); be && (lives_on_gpu(x) || be->wants(OpClass::elementwise, x.numel()))) {
    if (Tensor r = be->cast(x, dtype); r.defined()) {
      ++dispatch_stats().gpu_ops;
      if (check_state().on) check_result("cast", OpClass::elementwise, r, x.to(dtype), {x});
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return x.to(dtype);
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
  check_float16(x, name, "x");
  ALPHA_CHECK(std::isfinite(m) && std::isfinite(a), ValueError, "[{}] scalar is not finite", name);
  return dispatch<Tensor>(name, {x},
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.scale(x, m, a); },
      [&] { return cpu::affine(up(x), m, a); });
}
Tensor scale(const Tensor& x, double s) { return affine(x, s, 0.0, "scale"); }
Tensor add_scalar(const Tensor& x, double s) { return affine(x, 1.0, s, "add_scalar"); }

Tensor cast_cached(const Tensor& x, DType dtype) {
  ALPHA_CHECK(x.defined(), ValueError, "[cast] x is undefined");
  const auto whole = [](const Tensor& t) {
    return t.is_contiguous() && t.offset() == 0 && t.storage()->nbytes() == size_t(t.numel()) * dtype_size(t.dtype());
  };
  if (x.dtype() != DType::f32 || dtype != DType::f16 || !whole(x)) return cast(x, dtype);
  Storage& st = *x.storage();
  Storage::Derived& d = st.derived();
  if (d.storage && d.version == st.version() && d.storage->nbytes() == st.nbytes() / 2)
    return Tensor::over(d.storage, x.shape(), DType::f16);
  Tensor r = cast(x, dtype);
  if (whole(r)) d = {r.storage(), st.version()};
  return r;
}

void add_(Tensor& dst, const Tensor& src, double alpha) {
  check_float(dst, "add_", "dst");
  check_float(src, "add_", "src");
  check_same_dtype(dst, src, "add_");
  ALPHA_CHECK(broadcast_shapes(dst.shape(), src.shape(), "add_") == dst.shape(), ShapeError,
              "[add_] source {} does not broadcast to destination {}", src.str(), dst.str());
  ++dispatch_stats().cpu_ops;
  timed_op("add_", {dst, src}, [&] { cpu::add_inplace(dst, src, alpha); });
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  check_float16(x, "sum", "x");
  const int64_t d = wrap(dim, x.dim(), "sum");
  return dispatch<Tensor>("sum", {x},
      OpClass::reduce, x.numel(), [&](Backend& be) { return be.sum(x, d, keepdim); },
      [&] { return cpu::sum(up(x), d, keepdim); });
}

Tensor sum_f32(const Tensor& x, int64_t dim) {
  check_float16(x, "sum", "x");
  const int64_t d = wrap(dim, x.dim(), "sum");
  return dispatch<Tensor>("sum", {x},
      OpClass::reduce, x.numel(), [&](Backend& be) { return be.sum_f32(x, d); },
      [&] { return cpu::sum(up(x), d, false); }, Half::no);
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = wrap(dim, x.dim(), "mean");
  ALPHA_CHECK(x.size(d) > 0, ShapeError, "[mean] dim {} of {} is empty", d, x.str());
  return scale(sum(x, d, keepdim), 1.0 / static_cast<double>(x.size(d)));
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  check_float16(x, "max", "x");
  const int64_t d = wrap(dim, x.dim(), "max");
  ALPHA_CHECK(x.size(d) > 0, ShapeError, "[max] dim {} of {} is empty", d, x.str());
  ++dispatch_stats().cpu_ops;
  auto r = cpu::max(up(x), d, keepdim);
  if (x.dtype() == DType::f16) r.first = down(r.first);  // exact: the max of f16 values is one of them
  return r;
}

Tensor sum_all(const Tensor& x) {
  check_float16(x, "sum_all", "x");
  ++dispatch_stats().cpu_ops;
  const Tensor r = cpu::sum_all(up(x));
  return x.dtype() == DType::f16 ? down(r) : r;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  ALPHA_CHECK(broadcast_shapes(shape, x.shape(), "sum_to") == x.shape(), ShapeError,
              "[sum_to] {} is not a broadcast of {}", x.str(), shape_str(shape));
  Tensor r = x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  if (lead > 1 && x.is_contiguous() && x.numel() > 0) {  // leading dims folded: one pass over all B*T rows of a bias gradient
    Shape v{-1};
    v.insert(v.end(), x.shape().begin() + lead, x.shape().end());
    r = sum(x.view(v), 0, false);
  } else {
    for (int64_t i = 0; i < lead; ++i) r = sum(r, 0, false);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (shape[i] == 1 && r.size(i) != 1) r = sum(r, i, true);
  return r;
}

namespace {
// f32_out: the product of f16 operands stays f32 (Half::no), through the backend's matmul_f32out.
Tensor matmul_impl(const Tensor& a, const Tensor& b, bool ta, bool tb, bool f32_out) {
  check_float16(a, "matmul", "a");
  check_float16(b, "matmul", "b");
  check_mixable(a, b, "matmul");
  ALPHA_CHECK(a.dim() >= 2 && b.dim() >= 2, ShapeError, "[matmul] operands must be at least 2-d: {} x {}",
              shape_str(a.shape()), shape_str(b.shape()));
  const int64_t M = ta ? a.size(-1) : a.size(-2), Ka = ta ? a.size(-2) : a.size(-1);
  const int64_t Kb = tb ? b.size(-1) : b.size(-2), N = tb ? b.size(-2) : b.size(-1);
  ALPHA_CHECK(Ka == Kb, ShapeError, "[matmul] inner dimensions differ: {}{} x {}{}", shape_str(a.shape()),
              ta ? "^T" : "", shape_str(b.shape()), tb ? "^T" : "");
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t work = 2 * shape_numel(batch) * M * N * Ka;
  const bool half_in = a.dtype() == DType::f16 && b.dtype() == DType::f16;
  return dispatch<Tensor>("matmul", {a, b},
      OpClass::matmul, work,
      [&](Backend& be) {
        const auto [ag, tag] = gpu_operand(be, a, ta);
        const auto [bg, tbg] = gpu_operand(be, b, tb);
        return f32_out && half_in ? be.matmul_f32out(ag, bg, tag, tbg) : be.matmul(ag, bg, tag, tbg);
      },
      [&] { return cpu::matmul(up(a), up(b), ta, tb); }, f32_out ? Half::no : Half::by_inputs);
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) { return matmul_impl(a, b, ta, tb, false); }
Tensor matmul_f32(const Tensor& a, const Tensor& b, bool ta, bool tb) { return matmul_impl(a, b, ta, tb, true); }

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  check_float16(weight, "embedding", "weight");
  check_index(idx, "embedding", "indices");
  ALPHA_CHECK(weight.dim() == 2, ShapeError, "[embedding] weight must be (V, C), got {}", weight.str());
  return dispatch<Tensor>("embedding", {weight, idx},
      OpClass::embedding, idx.numel() * weight.size(1), [&](Backend& be) { return be.embedding(weight, idx); },
      [&] { return cpu::embedding(up(weight), idx); });  // the kernel range-checks each index
}

Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab, const Tensor& acc) {
  check_float16(dout, "embedding_backward", "dout");
  check_index(idx, "embedding_backward", "indices");
  ALPHA_CHECK(vocab > 0, ValueError, "[embedding_backward] vocab must be positive, got {}", vocab);
  Shape want = idx.shape();
  want.push_back(dout.size(-1));
  ALPHA_CHECK(dout.shape() == want, ShapeError, "[embedding_backward] dout {} does not match indices {}",
              dout.str(), idx.str());
  const Shape acc_shape{vocab, dout.size(-1)};
  ALPHA_CHECK(!acc.defined() || acc.shape() == acc_shape, ShapeError, "[embedding_backward] acc {} must be {}",
              acc.defined() ? acc.str() : "", shape_str(acc_shape));
  // Updated in place only when f32 and no other tensor sees acc; ALPHA_VK_CHECK compares the kernel's own gradient.
  const bool fuse = acc.defined() && acc.dtype() == DType::f32 && acc.exclusive() && !check_state().on;
  const Tensor& fused_acc = fuse ? acc : Tensor();
  Tensor g = dispatch<Tensor>("embedding_backward", {dout, idx},
      OpClass::embedding, dout.numel(), [&](Backend& be) { return be.embedding_backward(dout, idx, vocab, fused_acc); },
      [&] { return cpu::embedding_backward(up(dout), idx, vocab); }, Half::no);  // f32 weight gradient
  if (!acc.defined() || (fused_acc.defined() && g.storage() == acc.storage())) return g;
  return add(acc, g);
}

static void check_ln_param(const Tensor& p, const Tensor& x, const char* what) {
  if (!p.defined()) return;
  check_float16(p, "layernorm", what);
  check_mixable(p, x, "layernorm");
  ALPHA_CHECK(p.dim() == 1 && p.size(0) == x.size(-1), ShapeError, "[layernorm] {} is {}, expected [{}]", what,
              p.str(), x.size(-1));
}

LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  check_float16(x, "layernorm", "x");
  ALPHA_CHECK(x.dim() >= 1 && x.size(-1) > 0, ShapeError, "[layernorm] x {} has no channels", x.str());
  ALPHA_CHECK(eps > 0 && std::isfinite(eps), ValueError, "[layernorm] eps must be positive, got {}", eps);
  check_ln_param(w, x, "weight");
  check_ln_param(b, x, "bias");
  return dispatch<LayerNormOut>("layernorm", {x, w, b},
      OpClass::layernorm, x.numel(), [&](Backend& be) { return be.layernorm(x, w, b, eps); },
      [&] { return cpu::layernorm(up(x), up(w), up(b), eps); });
}

LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias, LnGrads which, const Tensor& acc) {
  check_float16(dy, "layernorm_backward", "dy");
  check_mixable(dy, x, "layernorm_backward");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[layernorm_backward] dy {} and x {} differ", dy.str(),
              x.str());
  check_ln_param(w, x, "weight");
  ALPHA_CHECK(!acc.defined() || (which != LnGrads::params && acc.shape() == x.shape() && acc.dtype() == x.dtype()),
              ShapeError, "[layernorm_backward] acc {} must be x's shape and dtype ({}) and come with dx",
              acc.defined() ? acc.str() : std::string(), x.str());
  // ALPHA_VK_CHECK compares the kernel's own dx with the CPU's: the add stays apart there.
  const Tensor& fused_acc = check_state().on ? Tensor() : acc;
  LayerNormGrads out = dispatch<LayerNormGrads>("layernorm_backward", {dy, x, w, mean, rstd},
      OpClass::layernorm, x.numel(),
      [&](Backend& be) { return be.layernorm_backward(dy, x, w, mean, rstd, has_bias, which, fused_acc); },
      [&] {
        LayerNormGrads g = cpu::layernorm_backward(up(dy), up(x), up(w), mean, rstd, has_bias);
        if (which == LnGrads::dx) g.dw = g.db = Tensor();
        if (which == LnGrads::params) g.dx = Tensor();
        return g;
      },
      half_out({dy, x, w}) ? Half::yes : Half::no);  // mean/rstd are f32 in f16 mode too: they do not vote
  if (acc.defined() && !out.dx_has_acc) out.dx = add(acc, out.dx);
  out.dx_has_acc = false;
  return out;
}

Tensor gelu(const Tensor& x) {
  check_float16(x, "gelu", "x");
  return dispatch<Tensor>("gelu", {x},
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.gelu(x); }, [&] { return cpu::gelu(up(x)); });
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  check_float16(dy, "gelu_backward", "dy");
  check_float16(x, "gelu_backward", "x");
  check_mixable(dy, x, "gelu_backward");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[gelu_backward] dy {} and x {} differ", dy.str(), x.str());
  return dispatch<Tensor>("gelu_backward", {dy, x},
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.gelu_backward(dy, x); },
      [&] { return cpu::gelu_backward(up(dy), up(x)); });
}

Tensor softmax(const Tensor& x, bool causal) {
  check_float16(x, "softmax", "x");
  ALPHA_CHECK(x.dim() >= 1, ShapeError, "[softmax] x must have a dim, got {}", x.str());
  if (causal) {
    ALPHA_CHECK(x.dim() >= 2 && x.size(-1) >= x.size(-2), ShapeError,
                "[softmax] causal mask needs (..., Tq, Tk) with Tk >= Tq, got {}", x.str());
  }
  return dispatch<Tensor>("softmax", {x},
      OpClass::softmax, x.numel(), [&](Backend& be) { return be.softmax(x, causal); },
      [&] { return cpu::softmax(up(x), causal); });
}

Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  check_float16(dy, "softmax_backward", "dy");
  check_float16(y, "softmax_backward", "y");
  check_mixable(dy, y, "softmax_backward");
  ALPHA_CHECK(dy.shape() == y.shape(), ShapeError, "[softmax_backward] dy {} and y {} differ", dy.str(), y.str());
  return dispatch<Tensor>("softmax_backward", {dy, y},
      OpClass::softmax, y.numel(), [&](Backend& be) { return be.softmax_backward(dy, y); },
      [&] { return cpu::softmax_backward(up(dy), up(y)); });
}

CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  check_float16(logits, "cross_entropy", "logits");
  check_index(targets, "cross_entropy", "targets");
  ALPHA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "[cross_entropy] expected logits (N, V) and targets (N), got {} and {}", logits.str(), targets.str());
  ALPHA_CHECK(logits.size(1) > 0, ShapeError, "[cross_entropy] logits {} have no classes", logits.str());
  return dispatch<CrossEntropyOut>("cross_entropy", {logits, targets},
      OpClass::cross_entropy, logits.numel(), [&](Backend& be) { return be.cross_entropy(logits, targets, ignore_index); },
      [&] { return cpu::cross_entropy(up(logits), targets, ignore_index); });  // kernel range-checks targets
}

Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index) {
  check_float16(logits, "cross_entropy_backward", "logits");
  check_index(targets, "cross_entropy_backward", "targets");
  return dispatch<Tensor>("cross_entropy_backward", {logits, targets, lse},
      OpClass::cross_entropy, logits.numel(),
      [&](Backend& be) { return be.cross_entropy_backward(logits, targets, lse, dloss, count, ignore_index); },
      [&] { return cpu::cross_entropy_backward(up(logits), targets, lse, dloss, count, ignore_index); });
}

CrossEntropyOut cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double dloss) {
  check_float16(logits, "cross_entropy_fused", "logits");
  check_index(targets, "cross_entropy_fused", "targets");
  ALPHA_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0), ShapeError,
              "[cross_entropy_fused] expected logits (N, V) and targets (N), got {} and {}", logits.str(), targets.str());
  ALPHA_CHECK(logits.size(1) > 0, ShapeError, "[cross_entropy_fused] logits {} have no classes", logits.str());
  return dispatch<CrossEntropyOut>("cross_entropy_fused", {logits, targets},
      OpClass::cross_entropy, logits.numel(),
      [&](Backend& be) { return be.cross_entropy_fused(logits, targets, ignore_index, dloss); },
      [&] {
        CrossEntropyOut r = cpu::cross_entropy(up(logits), targets, ignore_index);
        r.dlogits = cpu::cross_entropy_backward(up(logits), targets, r.lse, dloss, r.count, ignore_index);
        return r;
      });
}

Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  check_float16(x, "dropout", "x");
  ALPHA_CHECK(p >= 0.0 && p < 1.0, ValueError, "[dropout] p must be in [0, 1), got {}", p);
  return dispatch<Tensor>("dropout", {x},
      OpClass::dropout, x.numel(), [&](Backend& be) { return be.dropout(x, p, seed, offset); },
      [&] { return cpu::dropout(up(x), p, seed, offset); });
}

namespace {
// q (B, H, Tq, D), k/v (B, H, Tk, D) (v may be undefined-checked by the caller), one float dtype (f16 too).
void check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& ap) {
  check_float16(q, op, "q");
  check_float16(k, op, "k");
  check_float16(v, op, "v");
  check_same_dtype(q, k, op);
  check_same_dtype(q, v, op);
  ALPHA_CHECK(q.dim() == 4 && k.dim() == 4 && v.shape() == k.shape() && q.size(0) == k.size(0) &&
                  q.size(1) == k.size(1) && q.size(3) == k.size(3),
              ShapeError, "[{}] expected q (B, H, Tq, D) and k, v (B, H, Tk, D), got {}, {}, {}", op, q.str(), k.str(),
              v.str());
  ALPHA_CHECK(q.numel() > 0 && k.numel() > 0, ShapeError, "[{}] empty q {} or k {}", op, q.str(), k.str());
  ALPHA_CHECK(!ap.causal || k.size(2) >= q.size(2), ShapeError, "[{}] causal attention needs Tk >= Tq, got q {} k {}",
              op, q.str(), k.str());
  ALPHA_CHECK(ap.p >= 0.0 && ap.p < 1.0, ValueError, "[{}] dropout p must be in [0, 1), got {}", op, ap.p);
  ALPHA_CHECK(std::isfinite(ap.scale), ValueError, "[{}] scale must be finite, got {}", op, ap.scale);
}
}  // namespace

// Dispatched as the softmax class (work = the unfused softmax's B*H*Tq*Tk elements): it replaces that softmax.
AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& ap) {
  check_attention("attention", q, k, v, ap);
  return dispatch<AttentionOut>("attention", {q, k, v},
      OpClass::softmax, q.size(0) * q.size(1) * q.size(2) * k.size(2),
      [&](Backend& be) { return be.attention(q, k, v, ap); }, [&] { return cpu::attention(up(q), up(k), up(v), ap); });
}

AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& ap, bool packed) {
  check_attention("attention_backward", q, k, v, ap);
  check_float16(dout, "attention_backward", "dout");
  check_float16(out, "attention_backward", "out");
  check_float(lse, "attention_backward", "lse");
  // lse is f32 for f16 q (core/ops.h's exceptions), else q's dtype.
  const DType lse_dt = q.dtype() == DType::f16 ? DType::f32 : q.dtype();
  ALPHA_CHECK(dout.dtype() == q.dtype() && out.dtype() == q.dtype() && lse.dtype() == lse_dt, DTypeError,
              "[attention_backward] dout {} and out {} must have q's dtype ({}), lse {} must be {}", dout.str(),
              out.str(), q.str(), lse.str(), dtype_name(lse_dt));
  ALPHA_CHECK(dout.shape() == q.shape() && out.shape() == q.shape() &&
                  lse.shape() == Shape({q.size(0), q.size(1), q.size(2)}),
              ShapeError, "[attention_backward] dout {} and out {} must match q {}, lse {} must be (B, H, Tq)",
              dout.str(), out.str(), q.str(), lse.str());
  ALPHA_CHECK(!packed || q.size(2) == k.size(2), ShapeError, "[attention_backward] packed grads need Tq == Tk, got {} {}",
              q.str(), k.str());
  return dispatch<AttentionGrads>("attention_backward", {dout, q, k, v, out, lse},
      OpClass::softmax, q.size(0) * q.size(1) * q.size(2) * k.size(2),
      [&](Backend& be) { return be.attention_backward(dout, q, k, v, out, lse, ap, packed); },
      [&] { return cpu::attention_backward(up(dout), up(q), up(k), up(v), up(out), lse, ap, packed); },
      q.dtype() == DType::f16 ? Half::yes : Half::no);  // f32 lse would veto the by-inputs rule
}

}  // namespace ops

bool gpu_check_enabled() { return ops::check_state().on; }
void set_gpu_check(bool on) { ops::check_state().on = on; }
void corrupt_next_gpu_result() { ops::check_state().corrupt_next = true; }

}  // namespace alpha
