// RMSNorm forward/backward on the GPU, laid out like vk/layernorm.cpp: forward and dx one workgroup per row;
// dw one invocation per (row chunk, column) summing rows in order, then the chunks (deterministic). An absent
// w binds a placeholder the shader ignores. f16 x (with f16 w, dy): f16-storage variants; rstd, dw stay f32.
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kRmsnormWG = 128;
}  // namespace

ops::RMSNormOut VulkanBackend::rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  if (!flt(x) || (w.defined() && !flt(w, x))) return {};
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  const auto bx = rt_->input(x);
  const auto bw = w.defined() ? rt_->input(w) : bx;  // placeholder: never read when has_w == 0
  ops::RMSNormOut out{rt_->output(x.shape(), x.dtype()), rt_->output(Shape(x.shape().begin(), x.shape().end() - 1))};
  const pc::LayerNormPC pc{uint32_t(rows), uint32_t(cols), static_cast<float>(eps), w.defined() ? 1u : 0u, 0u, 0u, 0u};
  rt_->run("rmsnorm" + sfx(x) + row_vec(cols), {row_wg(cols)},
           {{bx, false}, {bw, false}, {Runtime::buffer_of(out.y), true}, {Runtime::buffer_of(out.rstd), true}}, pc,
           Runtime::grid(rows), 5.0 * double(x.numel()));
  return out;
}

ops::RMSNormGrads VulkanBackend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd) {
  if (!flt(x) || !flt(dy, x) || !f32(rstd) || (w.defined() && !flt(w, x))) return {};
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  if (rstd.numel() != rows) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x), br = rt_->input(rstd);
  const auto bw = w.defined() ? rt_->input(w) : bx;
  ops::RMSNormGrads g;
  g.dx = rt_->output(x.shape(), x.dtype());
  const uint32_t vec = cols % 4 == 0 ? 4 : 1, row_chunk = reduce_chunk(uint32_t(rows), uint64_t(cols) / vec);
  const pc::LayerNormPC pc{uint32_t(rows), uint32_t(cols), 0.0f, w.defined() ? 1u : 0u, 0u, row_chunk, 0u};
  rt_->run("rmsnorm_bwd_dx" + sfx(x) + row_vec(cols), {row_wg(cols)},
           {{bdy, false}, {bx, false}, {br, false}, {bw, false}, {Runtime::buffer_of(g.dx), true}}, pc,
           Runtime::grid(rows), 8.0 * double(x.numel()));
  if (w.defined()) {
    g.dw = rt_->output({cols});
    const uint32_t chunks = uint32_t((rows + row_chunk - 1) / row_chunk);
    const auto part = chunks > 1 ? rt_->scratch(uint64_t(chunks) * uint64_t(cols) * 4) : Runtime::buffer_of(g.dw);
    rt_->run("rmsnorm_bwd_dw" + sfx(x) + (vec == 4 ? "_vec4" : ""), {kRmsnormWG},
             {{bdy, false}, {bx, false}, {br, false}, {part, true}}, pc,
             Runtime::grid_for(uint64_t(chunks) * uint64_t(cols) / vec, kRmsnormWG), 3.0 * double(x.numel()));
    if (chunks > 1) record_sum(part, Runtime::buffer_of(g.dw), 1, chunks, uint32_t(cols), 1.0f);
  }
  return g;
}

}  // namespace alpha::vk
