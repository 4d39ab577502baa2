// The linear layer with its bias added in the GEMM's epilogue where the backend has one (vk: the f16 coopmat tiles),
// which saves a pass over the (rows, out) output; elsewhere (CPU, devices without the tiles, shapes they do not take)
// matmul then add, so results agree within one f16 rounding. ALPHA_VK_CHECK compares a fused GPU result with the
// CPU kernels' composition, as the dispatcher does for one op.
#include "core/cpu/elementwise.h"
#include "core/cpu/matmul.h"
#include "core/cpu/reduce.h"
#include "core/dispatch.h"

namespace alpha::ops {

using namespace detail;

namespace {

Tensor rows(const Tensor& x) { return reshape(x, {-1, x.size(-1)}); }  // (..., n) -> (R, n)

Shape with_last(const Tensor& x, int64_t n) {  // x's shape with its last dim n
  Shape s = x.shape();
  s.back() = n;
  return s;
}

// The active backend when it wants this much work, else nullptr.
Backend* fused_backend(int64_t work) {
  Backend* be = active_backend();
  return be && be->wants(OpClass::matmul, work) ? be : nullptr;
}

// ALPHA_VK_CHECK: one output of a fused GPU op against the CPU composition (f32, rounded as the output is stored).
template <class C>
void check_fused(const char* op, const Tensor& gpu, C&& cpu, std::initializer_list<Tensor> inputs) {
  CheckState& st = check_state();
  if (!st.on) return;
  if (st.corrupt_next) {
    st.corrupt_next = false;
    corrupt(gpu);
  }
  ++dispatch_stats().cpu_ops;
  Tensor c = cpu();
  if (gpu.dtype() == DType::f16) c = down(c);
  check_result(op, OpClass::matmul, gpu, c, inputs);
}

void check_linear(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  check_float16(x, op, "x");
  check_float16(w, op, "w");
  check_mixable(x, w, op);
  ALPHA_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), ShapeError,
              "[{}] x {} and weight {} (out, in) do not chain", op, x.str(), w.str());
  if (!b.defined()) return;
  check_float16(b, op, "b");
  ALPHA_CHECK(b.dim() == 1 && b.size(0) == w.size(0), ShapeError, "[{}] bias {} is not ({})", op, b.str(), w.size(0));
}

// CPU oracle of x @ w^T + b in f32: (R, out).
Tensor cpu_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor y = cpu::matmul(up(rows(x)), up(w), false, true);
  return b.defined() ? cpu::binary(cpu::BinaryOp::add, y, up(b)) : y;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_linear("linear", x, w, b);
  const int64_t R = x.numel() / x.size(-1), work = 2 * R * w.size(0) * w.size(1);
  if (Backend* be = fused_backend(work); be && b.defined()) {
    if (Tensor y = be->linear(rows(x), w, b); y.defined()) {
      ++dispatch_stats().gpu_ops;
      check_fused("linear", y, [&] { return cpu_linear(x, w, b); }, {x, w, b});
      return y.view(with_last(x, w.size(0)));
    }
  }
  const Tensor y = matmul(x, w, false, true);  // (..., in) @ (out, in)^T -> (..., out)
  return b.defined() ? add(y, b) : y;
}

LinearWeightGrads linear_weight_grads(const Tensor& g, const Tensor& x) {
  check_float16(g, "linear_weight_grads", "g");
  check_float16(x, "linear_weight_grads", "x");
  check_mixable(g, x, "linear_weight_grads");
  ALPHA_CHECK(g.dim() == 2 && x.dim() == 2 && g.size(0) == x.size(0), ShapeError,
              "[linear_weight_grads] g {} and x {} are not (R, out) and (R, in)", g.str(), x.str());
  const int64_t work = 2 * g.size(0) * g.size(1) * x.size(1);
  if (Backend* be = fused_backend(work)) {
    if (LinearWeightGrads r = be->linear_weight_grads(g, x); r.dw.defined()) {
      ++dispatch_stats().gpu_ops;
      check_fused("linear_weight_grads", r.dw, [&] { return cpu::matmul(up(g), up(x), true, false); }, {g, x});
      check_fused("linear_weight_grads", r.db, [&] { return cpu::sum(up(g), 0, false); }, {g, x});
      return r;
    }
  }
  return {matmul_f32(g, x, true, false), sum_f32(g, 0)};  // (out, in), (out)
}

Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r) {
  check_linear("linear_residual", x, w, b);
  check_float16(r, "linear_residual", "r");
  check_mixable(x, r, "linear_residual");
  ALPHA_CHECK(r.shape() == with_last(x, w.size(0)), ShapeError,
              "[linear_residual] residual {} is not the shape of x {} @ weight {}^T", r.str(), x.str(), w.str());
  const int64_t R = x.numel() / x.size(-1), work = 2 * R * w.size(0) * w.size(1);
  if (Backend* be = fused_backend(work)) {
    if (Tensor y = be->linear_residual(rows(x), w, b, rows(r)); y.defined()) {
      ++dispatch_stats().gpu_ops;
      // The oracle rounds the product (+ bias) as the kernel does, then adds and rounds.
      check_fused("linear_residual", y, [&] {
        const Tensor a = cpu_linear(x, w, b);
        return cpu::binary(cpu::BinaryOp::add, up(rows(r)), r.dtype() == DType::f16 ? up(down(a)) : a);
      }, {x, w, b, r});
      return y.view(r.shape());
    }
  }
  return add(r, linear(x, w, b));
}

}  // namespace alpha::ops
