// The dispatcher's Llama-style ops (core/ops.h states their math): RMSNorm, rotary embeddings, SwiGLU and
// ReLU². Same pattern as core/ops.cpp: validate once, then the GPU backend when it wants and accepts the op,
// else the CPU kernels (core/cpu/{rmsnorm,rope,swiglu}.cpp).
#include <cmath>

#include "core/cpu/copy.h"
#include "core/cpu/rmsnorm.h"
#include "core/cpu/rope.h"
#include "core/cpu/swiglu.h"
#include "core/dispatch.h"

namespace alpha::ops {

using namespace detail;

RMSNormOut rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  check_float16(x, "rmsnorm", "x");
  ALPHA_CHECK(x.dim() >= 1 && x.size(-1) > 0, ShapeError, "[rmsnorm] x {} has no channels", x.str());
  ALPHA_CHECK(eps > 0 && std::isfinite(eps), ValueError, "[rmsnorm] eps must be positive, got {}", eps);
  if (w.defined()) {
    check_float16(w, "rmsnorm", "weight");
    check_mixable(w, x, "rmsnorm");
    ALPHA_CHECK(w.dim() == 1 && w.size(0) == x.size(-1), ShapeError, "[rmsnorm] weight is {}, expected [{}]", w.str(),
                x.size(-1));
  }
  return dispatch<RMSNormOut>("rmsnorm", {x, w},
      OpClass::layernorm, x.numel(), [&](Backend& be) { return be.rmsnorm(x, w, eps); },
      [&] { return cpu::rmsnorm(up(x), up(w), eps); });
}

RMSNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  check_float16(dy, "rmsnorm_backward", "dy");
  check_mixable(dy, x, "rmsnorm_backward");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[rmsnorm_backward] dy {} and x {} differ", dy.str(), x.str());
  ALPHA_CHECK(rstd.defined() && rstd.numel() * x.size(-1) == x.numel(), ShapeError,
              "[rmsnorm_backward] rstd does not hold one value per row of x {}", x.str());
  if (w.defined())
    ALPHA_CHECK(w.dim() == 1 && w.size(0) == x.size(-1), ShapeError, "[rmsnorm_backward] weight is {}, expected [{}]",
                w.str(), x.size(-1));
  return dispatch<RMSNormGrads>("rmsnorm_backward", {dy, x, w, rstd},
      OpClass::layernorm, x.numel(), [&](Backend& be) { return be.rmsnorm_backward(dy, x, w, rstd); },
      [&] { return cpu::rmsnorm_backward(up(dy), up(x), up(w), rstd); },
      half_out({dy, x, w}) ? Half::yes : Half::no);  // rstd is f32 in f16 mode: it does not vote
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse, int64_t rot_heads) {
  check_float16(x, "rope", "x");
  check_float(cos, "rope", "cos");
  check_float(sin, "rope", "sin");
  ALPHA_CHECK(x.dim() == 4, ShapeError, "[rope] x must be (B, T, H, D), got {}", x.str());
  const int64_t T = x.size(1), D = x.size(3);
  ALPHA_CHECK(D % 2 == 0, ShapeError, "[rope] head size D = {} must be even (channels rotate in pairs)", D);
  ALPHA_CHECK(cos.dim() == 2 && cos.shape() == sin.shape() && cos.size(1) == D / 2, ShapeError,
              "[rope] cos {} and sin {} must both be (P, D/2 = {})", cos.str(), sin.str(), D / 2);
  ALPHA_CHECK(pos0 >= 0 && pos0 + T <= cos.size(0), ShapeError,
              "[rope] positions [{}, {}) exceed the {} positions of the tables", pos0, pos0 + T, cos.size(0));
  ALPHA_CHECK(rot_heads >= -1 && rot_heads <= x.size(2), ShapeError, "[rope] rot_heads {} is not in [-1, {}]",
              rot_heads, x.size(2));
  const int64_t rh = rot_heads < 0 ? x.size(2) : rot_heads;
  return dispatch<Tensor>("rope", {x},
      OpClass::elementwise, x.numel(), [&](Backend& be) { return be.rope(x, cos, sin, pos0, inverse, rh); },
      [&] { return cpu::rope(up(x), cos, sin, pos0, inverse, rh); });
}

std::pair<Tensor, Tensor> rope_tables(int64_t P, int64_t D, double base, DType dtype) {
  ALPHA_CHECK(P >= 1 && D >= 2 && D % 2 == 0, ShapeError, "[rope] tables need P >= 1 and an even D >= 2, got {}, {}",
              P, D);
  ALPHA_CHECK(base > 1 && std::isfinite(base), ValueError, "[rope] base must be > 1, got {}", base);
  const int64_t half = D / 2;
  std::vector<double> c(static_cast<size_t>(P * half)), s(c.size());
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
    for (int64_t p = 0; p < P; ++p) {
      c[static_cast<size_t>(p * half + i)] = std::cos(static_cast<double>(p) * inv_freq);
      s[static_cast<size_t>(p * half + i)] = std::sin(static_cast<double>(p) * inv_freq);
    }
  }
  return {Tensor::from_vector(c, {P, half}).to(dtype), Tensor::from_vector(s, {P, half}).to(dtype)};
}

Tensor swiglu(const Tensor& gate, const Tensor& up_in) {
  check_float16(gate, "swiglu", "gate");
  check_float16(up_in, "swiglu", "up");
  check_same_dtype(gate, up_in, "swiglu");
  ALPHA_CHECK(gate.shape() == up_in.shape(), ShapeError, "[swiglu] gate {} and up {} differ", gate.str(), up_in.str());
  return dispatch<Tensor>("swiglu", {gate, up_in},
      OpClass::gelu, gate.numel(), [&](Backend& be) { return be.swiglu(gate, up_in); },
      [&] { return cpu::swiglu(up(gate), up(up_in)); });
}

SwiGLUGrads swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up_in) {
  check_float16(dy, "swiglu_backward", "dy");
  check_mixable(dy, gate, "swiglu_backward");
  check_same_dtype(gate, up_in, "swiglu_backward");
  ALPHA_CHECK(dy.shape() == gate.shape() && gate.shape() == up_in.shape(), ShapeError,
              "[swiglu_backward] dy {}, gate {} and up {} differ", dy.str(), gate.str(), up_in.str());
  return dispatch<SwiGLUGrads>("swiglu_backward", {dy, gate, up_in},
      OpClass::gelu, gate.numel(), [&](Backend& be) { return be.swiglu_backward(dy, gate, up_in); },
      [&] { return cpu::swiglu_backward(up(dy), up(gate), up(up_in)); });
}

Tensor swiglu_packed(const Tensor& gu) {
  check_float16(gu, "swiglu_packed", "gu");
  ALPHA_CHECK(gu.dim() >= 1 && gu.size(-1) % 2 == 0, ShapeError, "[swiglu_packed] gu {} must be (..., 2F)", gu.str());
  const int64_t F = gu.size(-1) / 2;
  return dispatch<Tensor>("swiglu_packed", {gu},
      OpClass::gelu, gu.numel() / 2, [&](Backend& be) { return be.swiglu_packed(gu); },
      [&] { return cpu::swiglu(up(gu.narrow(-1, 0, F)), up(gu.narrow(-1, F, F))); });
}

Tensor swiglu_packed_backward(const Tensor& dy, const Tensor& gu) {
  check_float16(dy, "swiglu_packed_backward", "dy");
  check_float16(gu, "swiglu_packed_backward", "gu");
  check_same_dtype(dy, gu, "swiglu_packed_backward");
  ALPHA_CHECK(gu.dim() >= 1 && gu.size(-1) % 2 == 0 && dy.shape() == gu.narrow(-1, 0, gu.size(-1) / 2).shape(),
              ShapeError, "[swiglu_packed_backward] dy {} is not half of gu {}", dy.str(), gu.str());
  const int64_t F = gu.size(-1) / 2;
  return dispatch<Tensor>("swiglu_packed_backward", {dy, gu},
      OpClass::gelu, dy.numel(), [&](Backend& be) { return be.swiglu_packed_backward(dy, gu); },
      [&] {  // the CPU kernels on the halves, joined back into one (..., 2F) gradient
        const SwiGLUGrads g = cpu::swiglu_backward(up(dy), up(gu.narrow(-1, 0, F)), up(gu.narrow(-1, F, F)));
        return cpu::cat({g.dgate, g.dup}, g.dgate.dim() - 1);
      });
}

Tensor relu2(const Tensor& x) {
  check_float16(x, "relu2", "x");
  return dispatch<Tensor>("relu2", {x},
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.relu2(x); }, [&] { return cpu::relu2(up(x)); });
}

Tensor relu2_backward(const Tensor& dy, const Tensor& x) {
  check_float16(dy, "relu2_backward", "dy");
  check_mixable(dy, x, "relu2_backward");
  ALPHA_CHECK(dy.shape() == x.shape(), ShapeError, "[relu2_backward] dy {} and x {} differ", dy.str(), x.str());
  return dispatch<Tensor>("relu2_backward", {dy, x},
      OpClass::gelu, x.numel(), [&](Backend& be) { return be.relu2_backward(dy, x); },
      [&] { return cpu::relu2_backward(up(dy), up(x)); });
}

}  // namespace alpha::ops
