// Row softmax (optionally causal) and its backward on the GPU: one workgroup per row. f16 tensors run the
// f16-storage variants (f32 math).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kSoftmaxWG = 128;
}

Tensor VulkanBackend::softmax(const Tensor& x, bool causal) {
  if (!flt(x)) return {};
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const pc::SoftmaxPC pc{uint32_t(rows), uint32_t(cols), uint32_t(causal ? x.size(-2) : 1), causal ? 1u : 0u};
  rt_->run("softmax" + sfx(x), {kSoftmaxWG}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc, Runtime::grid(rows),
           3.0 * double(x.numel()));
  return y;
}

Tensor VulkanBackend::softmax_backward(const Tensor& dy, const Tensor& y) {
  if (!flt(dy, y)) return {};
  const int64_t cols = y.size(-1), rows = y.numel() / cols;
  const auto bdy = rt_->input(dy), by = rt_->input(y);
  Tensor dx = rt_->output(y.shape(), y.dtype());
  const pc::SoftmaxPC pc{uint32_t(rows), uint32_t(cols), 1, 0};
  rt_->run("softmax_bwd" + sfx(y), {kSoftmaxWG}, {{bdy, false}, {by, false}, {Runtime::buffer_of(dx), true}}, pc,
           Runtime::grid(rows), 3.0 * double(y.numel()));
  return dx;
}

}  // namespace alpha::vk
