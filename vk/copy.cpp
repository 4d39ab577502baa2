// Strided copies on the GPU (spirv/copy.comp): contiguous() of a view (transposes, narrows, expands of a
// buffer that lives on the GPU), narrow's backward (the gradient placed into zeros) and cat (each input into
// its window of the output). Views read the whole
// storage's buffer at their offset/strides; 32-bit dtypes (f32, i32) and f16 (16-bit words) up to 6 dims.
#include <limits>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr size_t kMaxDims = 6;
}

bool VulkanBackend::copyable(const Tensor& src, int64_t out_numel) const {
  if (!src.defined()) return false;
  if (src.dtype() != DType::f32 && src.dtype() != DType::i32 && src.dtype() != DType::f16) return false;
  if (src.dim() > int64_t(kMaxDims) || out_numel == 0 || src.numel() == 0 || !rt_->accepts_storage(src)) return false;
  // Every index the shader forms must fit 32 bits: the largest source element and the output count.
  int64_t last = src.offset();
  for (int64_t k = 0; k < src.dim(); ++k) last += (src.size(k) - 1) * src.strides()[k];
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max() / 2;
  return last <= kMax && out_numel <= kMax;
}

void VulkanBackend::record_copy(const Tensor& src, const Tensor& out, const Shape& shape, int64_t wdim, int64_t wstart,
                                int64_t ooffset, bool disjoint) {
  pc::CopyPC pc{};
  const int64_t n = shape_numel(shape);
  pc.n = uint32_t(n);
  pc.offset = uint32_t(src.offset());
  pc.ooffset = uint32_t(ooffset);
  const size_t lead = kMaxDims - shape.size();
  for (size_t k = 0; k < kMaxDims; ++k) {
    pc.size[k] = k < lead ? 1u : uint32_t(shape[k - lead]);
    pc.stride[k] = k < lead ? 0u : uint32_t(src.strides()[k - lead]);
    pc.ostride[k] = k < lead ? 0u : uint32_t(out.strides()[k - lead]);
  }
  // No window: a window on dim 0 covering everything. Else the window is the source's extent along wdim.
  pc.wdim = wdim < 0 ? 0u : uint32_t(size_t(wdim) + lead);
  pc.wstart = wdim < 0 ? 0u : uint32_t(wstart);
  pc.wlen = wdim < 0 ? pc.size[0] : uint32_t(src.size(wdim));
  const auto bs = rt_->input_storage(src);
  rt_->run(src.dtype() == DType::f16 ? "copy_u16" : "copy_u32", {256},
           {{bs, false}, {Runtime::buffer_of(out), true, disjoint}},
           pc, Runtime::grid_for(pc.n, 256), double(n));
}

Tensor VulkanBackend::strided_copy(const Tensor& src, const Shape& out_shape, int64_t wdim, int64_t wstart) {
  if (src.dim() != static_cast<int64_t>(out_shape.size()) || !copyable(src, shape_numel(out_shape))) return {};
  Tensor out = rt_->output(out_shape, src.dtype());
  record_copy(src, out, out_shape, wdim, wstart, 0);
  return out;
}

// One copy per input into its window of the output (the same kernel: the window's offset and out's strides). The
// windows are disjoint and the output fresh, so the copies need no barriers between them (Llama's per-forward joins
// of q/k/v and gate/up weights took one barrier per part).
Tensor VulkanBackend::cat(const std::vector<Tensor>& xs, int64_t dim) {
  Shape shape = xs[0].shape();
  shape[dim] = 0;
  for (const Tensor& x : xs) shape[dim] += x.size(dim);
  const int64_t n = shape_numel(shape);
  if (n == 0) return {};
  for (const Tensor& x : xs)
    if (x.numel() > 0 && !copyable(x, n)) return {};
  Tensor out = rt_->output(shape, xs[0].dtype());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    if (x.numel() > 0) record_copy(x, out, x.shape(), -1, 0, at * out.strides()[dim], /*disjoint=*/true);
    at += x.size(dim);
  }
  return out;
}

Tensor VulkanBackend::copy(const Tensor& src) { return strided_copy(src, src.shape(), -1, 0); }

Tensor VulkanBackend::narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start) {
  return strided_copy(g, shape, dim, start);
}

}  // namespace alpha::vk
