// SwiGLU and ReLU² forward and backward on the GPU: one invocation per element; f16 tensors run the f16-storage
// variants (f32 math). SwiGLU also runs on the two halves of one fused gate/up projection (swiglu_packed).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::swiglu(const Tensor& gate, const Tensor& up) {
  if (!flt(gate) || !flt(up, gate)) return {};
  const auto bg = rt_->input(gate), bu = rt_->input(up);
  Tensor y = rt_->output(gate.shape(), gate.dtype());
  const pc::SwiGLUPC pc{uint32_t(gate.numel()), uint32_t(gate.numel()), 0u, 0u};
  rt_->run("swiglu" + sfx(gate), {256}, {{bg, false}, {bu, false}, {Runtime::buffer_of(y), true}}, pc,
           Runtime::grid_for(pc.n, 256), 8.0 * double(gate.numel()));
  return y;
}

ops::SwiGLUGrads VulkanBackend::swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) {
  if (!flt(gate) || !flt(dy, gate) || !flt(up, gate)) return {};
  const auto bdy = rt_->input(dy), bg = rt_->input(gate), bu = rt_->input(up);
  ops::SwiGLUGrads g{rt_->output(gate.shape(), gate.dtype()), rt_->output(gate.shape(), gate.dtype())};
  const pc::SwiGLUPC pc{uint32_t(gate.numel()), uint32_t(gate.numel()), 0u, 0u};
  rt_->run("swiglu_bwd" + sfx(gate), {256},
           {{bdy, false}, {bg, false}, {bu, false}, {Runtime::buffer_of(g.dgate), true}, {Runtime::buffer_of(g.dup), true}},
           pc, Runtime::grid_for(pc.n, 256), 12.0 * double(gate.numel()));
  return g;
}

// gu (..., 2F) = [gate | up]: the same kernels with the packed indexing, gu's buffer bound as both g and u.
Tensor VulkanBackend::swiglu_packed(const Tensor& gu) {
  if (!flt(gu)) return {};
  const int64_t F = gu.size(-1) / 2;
  Shape shape = gu.shape();
  shape.back() = F;
  const auto bgu = rt_->input(gu);
  Tensor y = rt_->output(shape, gu.dtype());
  const pc::SwiGLUPC pc{uint32_t(y.numel()), uint32_t(F), uint32_t(2 * F), uint32_t(F)};
  rt_->run("swiglu" + sfx(gu), {256}, {{bgu, false}, {bgu, false}, {Runtime::buffer_of(y), true}}, pc,
           Runtime::grid_for(pc.n, 256), 8.0 * double(y.numel()));
  return y;
}

Tensor VulkanBackend::swiglu_packed_backward(const Tensor& dy, const Tensor& gu) {
  if (!flt(gu) || !flt(dy, gu)) return {};
  const int64_t F = gu.size(-1) / 2;
  const auto bdy = rt_->input(dy), bgu = rt_->input(gu);
  Tensor dgu = rt_->output(gu.shape(), gu.dtype());
  const auto& bd = Runtime::buffer_of(dgu);
  const pc::SwiGLUPC pc{uint32_t(dy.numel()), uint32_t(F), uint32_t(2 * F), uint32_t(F)};
  rt_->run("swiglu_bwd" + sfx(gu), {256}, {{bdy, false}, {bgu, false}, {bgu, false}, {bd, true}, {bd, true}}, pc,
           Runtime::grid_for(pc.n, 256), 12.0 * double(dy.numel()));
  return dgu;
}

Tensor VulkanBackend::relu2(const Tensor& x) {
  if (!flt(x)) return {};
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const bool v4 = x.dtype() == DType::f16 && x.numel() % 4 == 0;  // 8-byte f16vec4 loads, same bits
  const pc::GeluPC pc{uint32_t(v4 ? x.numel() / 4 : x.numel())};
  rt_->run("relu2" + sfx(x) + (v4 ? "_vec4" : ""), {256}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc,
           Runtime::grid_for(pc.n, 256), 2.0 * double(x.numel()));
  return y;
}

Tensor VulkanBackend::relu2_backward(const Tensor& dy, const Tensor& x) {
  if (!flt(x) || !flt(dy, x)) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x);
  Tensor dx = rt_->output(x.shape(), x.dtype());
  const bool v4 = x.dtype() == DType::f16 && x.numel() % 4 == 0;
  const pc::GeluPC pc{uint32_t(v4 ? x.numel() / 4 : x.numel())};
  rt_->run("relu2_bwd" + sfx(x) + (v4 ? "_vec4" : ""), {256}, {{bdy, false}, {bx, false}, {Runtime::buffer_of(dx), true}},
           pc, Runtime::grid_for(pc.n, 256), 3.0 * double(x.numel()));
  return dx;
}

}  // namespace alpha::vk
