// f32 <-> f16 storage casts on the GPU (spirv/cast.comp), one invocation per element; contiguous tensors only
// (the dispatcher casts other views on the CPU).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

void VulkanBackend::record_cast(const std::shared_ptr<GpuBuffer>& in, const std::shared_ptr<GpuBuffer>& out,
                                uint32_t n, bool to_f16) {
  const bool v4 = n % 4 == 0;  // 4 per invocation (16- and 8-byte accesses), the same conversions
  const pc::GeluPC pc{v4 ? n / 4 : n};  // the cast's only push constant is n (in vectors for _vec4)
  rt_->run(std::string(to_f16 ? "cast_f32_f16" : "cast_f16_f32") + (v4 ? "_vec4" : ""), {256}, {{in, false}, {out, true}},
           pc, Runtime::grid_for(pc.n, 256), double(n));
}

Tensor VulkanBackend::cast(const Tensor& x, DType dtype) {
  const bool to_f16 = f32(x) && dtype == DType::f16, to_f32 = f16(x) && dtype == DType::f32;
  if (!to_f16 && !to_f32) return {};
  const auto bx = rt_->input(x);
  Tensor out = rt_->output(x.shape(), dtype);
  record_cast(bx, Runtime::buffer_of(out), uint32_t(x.numel()), to_f16);
  return out;
}

}  // namespace alpha::vk
