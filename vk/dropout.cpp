// Dropout on the GPU with the CPU's exact Philox mask (spirv/dropout.comp mirrors core/rng.cpp).
#include <cmath>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

Tensor VulkanBackend::dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset) {
  if (!flt(x)) return {};  // f16: f16-storage variant, f32 math
  // u32_to_unit(w) = (w >> 8) / 2^24 exactly, so "u >= p" <=> (w >> 8) >= ceil(p * 2^24) (exact in double).
  const double t = std::ceil(p * 16777216.0);
  const auto bx = rt_->input(x);
  Tensor y = rt_->output(x.shape(), x.dtype());
  const pc::DropoutPC pc{uint32_t(x.numel()),     uint32_t(seed),  uint32_t(seed >> 32), uint32_t(offset),
                         uint32_t(offset >> 32),  uint32_t(t),     static_cast<float>(1.0 / (1.0 - p))};
  rt_->run("dropout" + sfx(x), {256}, {{bx, false}, {Runtime::buffer_of(y), true}}, pc, Runtime::grid_for(pc.n, 256),
           20.0 * double(x.numel()));
  return y;
}

}  // namespace alpha::vk
