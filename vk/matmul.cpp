// Batched matmul on the GPU (spirv/matmul.comp). Batch dims: an operand either has the output's batch
// dims (left-padded with 1s) or a single matrix shared by every batch (stride 0); other broadcasts decline.
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kTile = 16;

// Batch stride (elements) of operand x against output batch dims; -1 when unsupported.
int64_t batch_stride(const Tensor& x, const Shape& batch) {
  const Shape bx(x.shape().begin(), x.shape().end() - 2);
  if (shape_numel(bx) == 1) return 0;
  Shape padded(batch.size() - bx.size(), 1);
  padded.insert(padded.end(), bx.begin(), bx.end());
  if (padded != batch) return -1;
  return x.size(-1) * x.size(-2);
}
}  // namespace

Tensor VulkanBackend::matmul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (!f32(a) || !f32(b)) return {};
  const int64_t M = ta ? a.size(-1) : a.size(-2), K = ta ? a.size(-2) : a.size(-1);
  const int64_t N = tb ? b.size(-2) : b.size(-1);
  const Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = broadcast_shapes(ba, bb, "matmul");
  const int64_t nb = shape_numel(batch);
  const int64_t sa = batch_stride(a, batch), sb = batch_stride(b, batch);
  if (sa < 0 || sb < 0 || nb == 0 || M == 0 || N == 0 || nb > 65535) return {};
  if ((M + kTile - 1) / kTile > 65535 || (N + kTile - 1) / kTile > 65535) return {};
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  const auto bufa = rt_->input(a), bufb = rt_->input(b);
  Tensor out = rt_->output(out_shape);
  const pc::MatmulPC pc{uint32_t(M), uint32_t(N), uint32_t(K), uint32_t(a.size(-1)), uint32_t(b.size(-1)),
                        uint32_t(sa), uint32_t(sb), ta ? 1u : 0u, tb ? 1u : 0u};
  const std::array<uint32_t, 3> groups{uint32_t((N + kTile - 1) / kTile), uint32_t((M + kTile - 1) / kTile),
                                       uint32_t(nb)};
  rt_->run("matmul_f32", {kTile, kTile}, {{bufa, false}, {bufb, false}, {Runtime::buffer_of(out), true}}, pc, groups,
           2.0 * double(nb) * double(M) * double(N) * double(K));
  return out;
}

}  // namespace alpha::vk
