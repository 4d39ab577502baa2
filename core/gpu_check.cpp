// ALPHA_VK_CHECK: the comparison of GPU results with the CPU kernels' (core/gpu_check.h).
#include "core/gpu_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/dtype.h"

namespace alpha::ops::gpu_check {

namespace {

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
  // f16 results: GPU and CPU round slightly different f32 values to f16, up to one f16 ulp (2^-10 relative).
  const double rel = g.dtype() == DType::f16 ? std::max(check_tolerance(cls), 2e-3) : check_tolerance(cls);
  const double tol = rel * std::max(scale, 1e-30);
  for (size_t i = 0; i < gv.size(); ++i) {
    const bool same_nan = std::isnan(gv[i]) && std::isnan(cv[i]);
    const bool ok = same_nan || gv[i] == cv[i] || std::fabs(gv[i] - cv[i]) <= tol;
    ALPHA_CHECK(ok, GpuCheckError,
                "[{}] ALPHA_VK_CHECK: GPU and CPU differ in {} {} at element {}: GPU {} CPU {} (tolerance {:.3g} = {:.0e} "
                "of max |CPU| {:.6g}; inputs {})",
                op, what, c.str(), i, gv[i], cv[i], tol, rel, scale, shapes_of(inputs));
  }
}

}  // namespace

CheckState& check_state() {
  static CheckState s = [] {
    CheckState st;
    const char* e = std::getenv("ALPHA_VK_CHECK");
    st.on = e && *e && std::string(e) != "0";
    return st;
  }();
  return s;
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
  check_tensor(op, cls, "dlogits", g.dlogits, c.dlogits, in);
}
void check_result(const char* op, OpClass cls, const AttentionOut& g, const AttentionOut& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "out", g.out, c.out, in);
  check_tensor(op, cls, "lse", g.lse, c.lse, in);
}
void check_result(const char* op, OpClass cls, const AttentionGrads& g, const AttentionGrads& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "dq", g.dq, c.dq, in);
  check_tensor(op, cls, "dk", g.dk, c.dk, in);
  check_tensor(op, cls, "dv", g.dv, c.dv, in);
}
void check_result(const char* op, OpClass cls, const RMSNormOut& g, const RMSNormOut& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "y", g.y, c.y, in);
  check_tensor(op, cls, "rstd", g.rstd, c.rstd, in);
}
void check_result(const char* op, OpClass cls, const RMSNormGrads& g, const RMSNormGrads& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "dx", g.dx, c.dx, in);
  check_tensor(op, cls, "dw", g.dw, c.dw, in);
}
void check_result(const char* op, OpClass cls, const SwiGLUGrads& g, const SwiGLUGrads& c, std::initializer_list<Tensor> in) {
  check_tensor(op, cls, "dgate", g.dgate, c.dgate, in);
  check_tensor(op, cls, "dup", g.dup, c.dup, in);
}

void corrupt(Tensor t) {
  if (!t.defined() || t.numel() == 0) return;
  if (t.dtype() == DType::f32) t.mutable_data<float>()[0] += 1.0f;
  else if (t.dtype() == DType::f64) t.mutable_data<double>()[0] += 1.0;
  else if (t.dtype() == DType::f16) {
    uint16_t* p = t.mutable_data<uint16_t>();
    p[0] = f32_to_f16(f16_to_f32(p[0]) + 1.0f);
  }
}

}  // namespace alpha::ops::gpu_check
