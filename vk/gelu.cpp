// GELU (tanh approximation) forward and backward on the GPU: one invocation per element; f16 tensors run
// the f16-storage variants (f32 math), 4 elements per invocation when the size allows (same bits).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::gelu(const Tensor& x) {
  if (!flt(x)) return {};
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const bool v4 = x.dtype() == DType::f16 && x.numel() % 4 == 0;
  const pc::GeluPC pc{uint32_t(v4 ? x.numel() / 4 : x.numel())};
  rt_->run("gelu" + sfx(x) + (v4 ? "_vec4" : ""), {256}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc,
           Runtime::grid_for(v4 ? (uint64_t{pc.n} + 1) / 2 : pc.n, 256), 10.0 * double(x.numel()));  // vec4: two each
  return y;
}

Tensor VulkanBackend::gelu_backward(const Tensor& dy, const Tensor& x) {
  if (!flt(dy, x)) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x);
  Tensor dx = rt_->output(x.shape(), x.dtype());
  const bool v4 = x.dtype() == DType::f16 && x.numel() % 4 == 0;
  const pc::GeluPC pc{uint32_t(v4 ? x.numel() / 4 : x.numel())};
  rt_->run("gelu_bwd" + sfx(x) + (v4 ? "_vec4" : ""), {256}, {{bdy, false}, {bx, false}, {Runtime::buffer_of(dx), true}},
           pc, Runtime::grid_for(v4 ? (uint64_t{pc.n} + 1) / 2 : pc.n, 256), 15.0 * double(x.numel()));
  return dx;
}

}  // namespace alpha::vk
