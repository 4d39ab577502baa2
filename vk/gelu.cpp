// GELU (tanh approximation) forward and backward on the GPU: one invocation per element; f16 tensors run
// the f16-storage variants (f32 math).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::gelu(const Tensor& x) {
  if (!flt(x)) return {};
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const pc::GeluPC pc{uint32_t(x.numel())};
  rt_->run("gelu" + sfx(x), {256}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc, Runtime::grid_for(pc.n, 256),
           10.0 * double(x.numel()));
  return y;
}

Tensor VulkanBackend::gelu_backward(const Tensor& dy, const Tensor& x) {
  if (!flt(dy, x)) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x);
  Tensor dx = rt_->output(x.shape(), x.dtype());
  const pc::GeluPC pc{uint32_t(x.numel())};
  rt_->run("gelu_bwd" + sfx(x), {256}, {{bdy, false}, {bx, false}, {Runtime::buffer_of(dx), true}}, pc,
           Runtime::grid_for(pc.n, 256), 15.0 * double(x.numel()));
  return dx;
}

}  // namespace alpha::vk
