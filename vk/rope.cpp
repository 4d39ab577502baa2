// Rotary position embedding on the GPU: one invocation per (row, head, channel pair), four pairs for f16 where
// D/2 % 4 == 0; the f32 cos/sin tables (the model's, uploaded once and kept on the device) are indexed at pos0 + t.
// f16 x: the f16-storage variant.
// Heads >= rot_heads are copied (core/ops.h).
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse,
                           int64_t rot_heads) {
  if (!flt(x) || !f32(cos) || !f32(sin)) return {};
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), D = x.size(3);
  const auto bx = rt_->input(x), bc = rt_->input(cos), bs = rt_->input(sin);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const pc::RopePC pc{uint32_t(B * T), uint32_t(T), uint32_t(H), uint32_t(D / 2), uint32_t(pos0), inverse ? -1.0f : 1.0f,
                        uint32_t(rot_heads)};
  const bool v4 = x.dtype() == DType::f16 && (D / 2) % 4 == 0;  // 4 pairs per invocation (8-byte loads)
  rt_->run("rope" + sfx(x) + (v4 ? "_vec4" : ""), {256}, {{bx, false}, {bc, false}, {bs, false}, {Runtime::buffer_of(y), true}},
           pc, Runtime::grid_for(uint64_t(B * T * H) * uint64_t(D / 2 / (v4 ? 4 : 1)), 256), 3.0 * double(x.numel()));
  return y;
}

}  // namespace alpha::vk
