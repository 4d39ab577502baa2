// SwiGLU and ReLU² forward and backward on the GPU: one invocation per element; f16 tensors run the f16-storage
// variants (f32 math).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::swiglu(const Tensor& gate, const Tensor& up) {
  if (!flt(gate) || !flt(up, gate)) return {};
  const auto bg = rt_->input(gate), bu = rt_->input(up);
  Tensor y = rt_->output(gate.shape(), gate.dtype());
  const pc::GeluPC pc{uint32_t(gate.numel())};
  rt_->run("swiglu" + sfx(gate), {256}, {{bg, false}, {bu, false}, {Runtime::buffer_of(y), true}}, pc,
           Runtime::grid_for(pc.n, 256), 8.0 * double(gate.numel()));
  return y;
}

ops::SwiGLUGrads VulkanBackend::swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up) {
  if (!flt(gate) || !flt(dy, gate) || !flt(up, gate)) return {};
  const auto bdy = rt_->input(dy), bg = rt_->input(gate), bu = rt_->input(up);
  ops::SwiGLUGrads g{rt_->output(gate.shape(), gate.dtype()), rt_->output(gate.shape(), gate.dtype())};
  const pc::GeluPC pc{uint32_t(gate.numel())};
  rt_->run("swiglu_bwd" + sfx(gate), {256},
           {{bdy, false}, {bg, false}, {bu, false}, {Runtime::buffer_of(g.dgate), true}, {Runtime::buffer_of(g.dup), true}},
           pc, Runtime::grid_for(pc.n, 256), 12.0 * double(gate.numel()));
  return g;
}

Tensor VulkanBackend::relu2(const Tensor& x) {
  if (!flt(x)) return {};
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const pc::GeluPC pc{uint32_t(x.numel())};
  rt_->run("relu2" + sfx(x), {256}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc, Runtime::grid_for(pc.n, 256),
           2.0 * double(x.numel()));
  return y;
}

Tensor VulkanBackend::relu2_backward(const Tensor& dy, const Tensor& x) {
  if (!flt(x) || !flt(dy, x)) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x);
  Tensor dx = rt_->output(x.shape(), x.dtype());
  const pc::GeluPC pc{uint32_t(x.numel())};
  rt_->run("relu2_bwd" + sfx(x), {256}, {{bdy, false}, {bx, false}, {Runtime::buffer_of(dx), true}}, pc,
           Runtime::grid_for(pc.n, 256), 3.0 * double(x.numel()));
  return dx;
}

}  // namespace alpha::vk
