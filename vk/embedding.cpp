// Embedding gather and its deterministic backward on the GPU. Indices are range-checked on the host (an
// out-of-range index is declined so the CPU kernel raises its IndexError). The backward's host step is a
// stable counting sort of positions by vocab row, cut into segments of kSegment positions; the GPU sums each
// segment's positions in order, then each row's segments in order (spirv/embedding.comp).
// f16 weight / dout: f16-storage variants; the weight gradient stays f32 (core/ops.h).
#include <algorithm>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
bool in_range(const Tensor& idx, int64_t vocab) {
  const int32_t* p = idx.data<int32_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (p[i] < 0 || p[i] >= vocab) return false;
  return true;
}
}  // namespace

Tensor VulkanBackend::embedding(const Tensor& weight, const Tensor& idx) {
  if (!flt(weight) || !i32(idx) || !in_range(idx, weight.size(0))) return {};
  const int64_t cols = weight.size(1);
  Shape out_shape = idx.shape();
  out_shape.push_back(cols);
  const auto bw = rt_->input(weight), bi = rt_->input(idx);
  Tensor out = rt_->output(out_shape, weight.dtype());
  const pc::EmbeddingPC pc{uint32_t(idx.numel()), uint32_t(cols), uint32_t(weight.size(0)), 1};
  const uint64_t n = uint64_t(idx.numel()) * uint64_t(cols);
  rt_->run("embedding" + sfx(weight), {256}, {{bw, false}, {bi, false}, {Runtime::buffer_of(out), true}}, pc,
           Runtime::grid_for(n, 256), double(n));
  return out;
}

Tensor VulkanBackend::embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab, const Tensor& acc) {
  if (!flt(dout) || !i32(idx) || vocab > INT32_MAX || !in_range(idx, vocab)) return {};
  const int64_t n = idx.numel(), cols = dout.size(-1);
  // acc (the weight's gradient so far, held by no other tensor: ops::embedding_backward) is updated in place where
  // this device can bind it; else the plain gradient comes back and ops adds it.
  const bool in_place = acc.defined() && f32(acc) && acc.shape() == Shape{vocab, cols} && rt_->accepts(acc);
  // (V + 1) row starts and the positions grouped by row, each group in index order.
  std::vector<int32_t> starts(static_cast<size_t>(vocab) + 1, 0), order(static_cast<size_t>(n));
  const int32_t* p = idx.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) ++starts[static_cast<size_t>(p[i]) + 1];
  for (int64_t v = 0; v < vocab; ++v) starts[v + 1] += starts[v];
  std::vector<int32_t> fill(starts.begin(), starts.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(fill[static_cast<size_t>(p[i])]++)] = int32_t(i);
  // Each row's run in segments of at most kSegment positions ([first, end) into order), and each row's first
  // segment: a frequent token's positions are summed by many invocations, then its partials in order.
  std::vector<int32_t> segs, row_seg(static_cast<size_t>(vocab) + 1, 0), used;
  for (int64_t v = 0; v < vocab; ++v) {
    row_seg[static_cast<size_t>(v)] = int32_t(segs.size() / 2);
    if (starts[v] < starts[v + 1]) used.push_back(int32_t(v));
    for (int32_t k = starts[v]; k < starts[v + 1]; k += kSegment)
      segs.insert(segs.end(), {k, std::min(k + kSegment, starts[v + 1])});
  }
  row_seg[static_cast<size_t>(vocab)] = int32_t(segs.size() / 2);
  const uint32_t nseg = uint32_t(segs.size() / 2);
  const auto bd = rt_->input(dout);
  const auto brs = rt_->upload_new(row_seg.data(), row_seg.size() * 4);
  const auto part = rt_->scratch(std::max<uint64_t>(uint64_t(nseg) * uint64_t(cols), 1) * 4);
  if (nseg > 0) {
    const auto bo = rt_->upload_new(order.data(), order.size() * 4);
    const auto bs = rt_->upload_new(segs.data(), segs.size() * 4);
    const pc::EmbeddingPC spc{nseg, uint32_t(cols), uint32_t(vocab), 1};
    rt_->run("embedding_bwd_seg" + sfx(dout), {256}, {{bd, false}, {bo, false}, {bs, false}, {part, true}}, spc,
             Runtime::grid_for(uint64_t(nseg) * uint64_t(cols), 256), double(dout.numel()));
  }
  if (in_place) {
    // Only the used rows change (acc + 0 elsewhere): one pass over them instead of (V, C) sums and an add.
    if (!used.empty()) {
      const auto bu = rt_->upload_new(used.data(), used.size() * 4), ba = rt_->input(acc);
      const uint64_t items = uint64_t(used.size()) * uint64_t(cols);
      const pc::EmbeddingPC rpc{uint32_t(used.size()), uint32_t(cols), uint32_t(vocab), 1};
      rt_->run("embedding_bwd_rows_acc", {256}, {{part, false}, {brs, false}, {bu, false}, {ba, true}}, rpc,
               Runtime::grid_for(items, 256), double(items));
      acc.storage()->mark_device_written();
    }
    return acc;
  }
  Tensor dw = rt_->output({vocab, cols});
  const uint64_t items = uint64_t(vocab) * uint64_t(cols);
  const pc::EmbeddingPC rpc{uint32_t(n), uint32_t(cols), uint32_t(vocab), 1};
  rt_->run("embedding_bwd_rows", {256}, {{part, false}, {brs, false}, {Runtime::buffer_of(dw), true}}, rpc,
           Runtime::grid_for(items, 256), double(items));
  return dw;
}

}  // namespace alpha::vk
