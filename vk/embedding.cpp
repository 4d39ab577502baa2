// Embedding gather and its deterministic backward on the GPU. Indices are range-checked on the host (an
// out-of-range index is declined so the CPU kernel raises its IndexError). The backward's host step is a
// stable counting sort of positions by vocab row; the GPU then sums each row's positions in order.
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

uint32_t VulkanBackend::embedding_splits(int64_t longest, int64_t vocab, int64_t cols) {
  const uint64_t items = std::max<uint64_t>(uint64_t(vocab) * uint64_t(cols), 1);
  const int64_t cap = std::max<int64_t>(1, int64_t((uint64_t{1} << 26) / items));
  return static_cast<uint32_t>(std::clamp<int64_t>(longest / 32, 1, std::min<int64_t>(64, cap)));
}

Tensor VulkanBackend::embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab) {
  if (!flt(dout) || !i32(idx) || vocab > INT32_MAX || !in_range(idx, vocab)) return {};
  const int64_t n = idx.numel(), cols = dout.size(-1);
  // (V + 1) row starts and the positions grouped by row, each group in index order.
  std::vector<int32_t> starts(static_cast<size_t>(vocab) + 1, 0), order(static_cast<size_t>(n));
  const int32_t* p = idx.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) ++starts[static_cast<size_t>(p[i]) + 1];
  for (int64_t v = 0; v < vocab; ++v) starts[v + 1] += starts[v];
  std::vector<int32_t> fill(starts.begin(), starts.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(fill[static_cast<size_t>(p[i])]++)] = int32_t(i);
  const auto bd = rt_->input(dout);
  const auto bo = rt_->upload_new(order.data(), order.size() * 4);
  const auto bs = rt_->upload_new(starts.data(), starts.size() * 4);
  Tensor dw = rt_->output({vocab, cols});
  // Splits of the longest row's positions: ~32 loads per invocation at most, while the (splits, V, C) f32 partials
  // stay under 2^26 floats (a character vocabulary: up to 64 splits; GPT-2's 50304 x 768: none, 1 split).
  int32_t longest = 0;
  for (int64_t v = 0; v < vocab; ++v) longest = std::max(longest, starts[v + 1] - starts[v]);
  const uint64_t items = uint64_t(vocab) * uint64_t(cols);
  const uint32_t splits = embedding_splits(longest, vocab, cols);
  const pc::EmbeddingPC pc{uint32_t(n), uint32_t(cols), uint32_t(vocab), splits};
  const auto part = splits > 1 ? rt_->scratch(items * splits * 4) : Runtime::buffer_of(dw);
  rt_->run("embedding_bwd" + sfx(dout), {256}, {{bd, false}, {bo, false}, {bs, false}, {part, true}}, pc,
           Runtime::grid_for(items * splits, 256), double(dout.numel()));
  if (splits > 1) record_sum(part, Runtime::buffer_of(dw), 1, splits, uint32_t(items), 1.0f);  // in split order
  return dw;
}

}  // namespace alpha::vk
