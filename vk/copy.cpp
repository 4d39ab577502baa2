// Strided copies on the GPU (spirv/copy.comp): contiguous() of a view (transposes, narrows, expands of a
// buffer that lives on the GPU) and narrow's backward (the gradient placed into zeros). Views read the whole
// storage's buffer at their offset/strides; 32-bit dtypes (f32, i32) and f16 (16-bit words) up to 6 dims.
#include <limits>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr size_t kMaxDims = 6;
}

Tensor VulkanBackend::strided_copy(const Tensor& src, const Shape& out_shape, int64_t wdim, int64_t wstart) {
  if (!src.defined() || (src.dtype() != DType::f32 && src.dtype() != DType::i32 && src.dtype() != DType::f16)) return {};
  if (out_shape.size() > kMaxDims || src.dim() != static_cast<int64_t>(out_shape.size())) return {};
  const int64_t n = shape_numel(out_shape);
  if (n == 0 || src.numel() == 0 || !rt_->accepts_storage(src)) return {};
  // Every index the shader forms must fit 32 bits: the largest source element and the output count.
  int64_t last = src.offset();
  for (int64_t k = 0; k < src.dim(); ++k) last += (src.size(k) - 1) * src.strides()[k];
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max() / 2;
  if (last > kMax || n > kMax) return {};
  pc::CopyPC pc{};
  pc.n = uint32_t(n);
  pc.offset = uint32_t(src.offset());
  const size_t lead = kMaxDims - out_shape.size();
  for (size_t k = 0; k < kMaxDims; ++k) {
    pc.size[k] = k < lead ? 1u : uint32_t(out_shape[k - lead]);
    pc.stride[k] = k < lead ? 0u : uint32_t(src.strides()[k - lead]);
  }
  // No window: a window on dim 0 covering everything. Else the window is the source's extent along wdim.
  pc.wdim = wdim < 0 ? 0u : uint32_t(size_t(wdim) + lead);
  pc.wstart = wdim < 0 ? 0u : uint32_t(wstart);
  pc.wlen = wdim < 0 ? pc.size[0] : uint32_t(src.size(wdim));
  const auto bs = rt_->input_storage(src);
  Tensor out = rt_->output(out_shape, src.dtype());
  rt_->run(src.dtype() == DType::f16 ? "copy_u16" : "copy_u32", {256}, {{bs, false}, {Runtime::buffer_of(out), true}}, pc, Runtime::grid_for(pc.n, 256),
           double(n));
  return out;
}

Tensor VulkanBackend::copy(const Tensor& src) { return strided_copy(src, src.shape(), -1, 0); }

Tensor VulkanBackend::narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) {
  return strided_copy(g, shape, dim, start);
}

}  // namespace alpha::vk
