// LayerNorm forward/backward on the GPU. Forward and dx: one workgroup per row; dw/db: one invocation
// per column summing rows in order (deterministic). Absent w/b bind a placeholder the shader ignores.
// f16 x (with f16 w, b, dy): f16-storage variants; mean, rstd and dw/db stay f32 (core/ops.h).
#include "core/gpu_check.h"
#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kLayernormWG = 128;
}

ops::LayerNormOut VulkanBackend::layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  if (!flt(x) || (w.defined() && !flt(w, x)) || (b.defined() && !flt(b, x))) return {};
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  const auto bx = rt_->input(x);
  const auto bw = w.defined() ? rt_->input(w) : bx;  // placeholder: never read when has_w == 0
  const auto bb = b.defined() ? rt_->input(b) : bx;
  const Shape row_shape(x.shape().begin(), x.shape().end() - 1);
  ops::LayerNormOut out{rt_->output(x.shape(), x.dtype()), rt_->output(row_shape), rt_->output(row_shape)};
  const pc::LayerNormPC pc{uint32_t(rows), uint32_t(cols), static_cast<float>(eps), w.defined() ? 1u : 0u,
                           b.defined() ? 1u : 0u, 0, 0};
  rt_->run("layernorm" + sfx(x) + row_vec(cols), {row_wg(cols)},
           {{bx, false}, {bw, false}, {bb, false}, {Runtime::buffer_of(out.y), true},
            {Runtime::buffer_of(out.mean), true}, {Runtime::buffer_of(out.rstd), true}},
           pc, Runtime::grid(rows), 8.0 * double(x.numel()));
  return out;
}

ops::LayerNormGrads VulkanBackend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w,
                                                      const Tensor& mean, const Tensor& rstd, bool has_bias,
                                                      ops::LnGrads which, const Tensor& acc) {
  if (!flt(x) || !flt(dy, x) || !f32(mean) || !f32(rstd) || (w.defined() && !flt(w, x))) return {};
  const int64_t cols = x.size(-1), rows = x.numel() / cols;
  if (mean.numel() != rows || rstd.numel() != rows) return {};
  const auto bdy = rt_->input(dy), bx = rt_->input(x), bm = rt_->input(mean), br = rt_->input(rstd);
  const auto bw = w.defined() ? rt_->input(w) : bx;
  ops::LayerNormGrads g;
  // Columns in fours where they divide (8/16-byte loads; each column's rows in the same order: same bits).
  const uint32_t vec = cols % 4 == 0 ? 4 : 1, row_chunk = reduce_chunk(uint32_t(rows), uint64_t(cols) / vec);
  const pc::LayerNormPC pc{uint32_t(rows), uint32_t(cols), 0.0f, w.defined() ? 1u : 0u,
                           has_bias ? 1u : 0u, row_chunk, 0u};
  if (which != ops::LnGrads::params) {
    g.dx = rt_->output(x.shape(), x.dtype());
    // acc (the residual stream's gradient so far) added in the f16 4-wide kernel (same bits as the separate add);
    // elsewhere ops::layernorm_backward adds it.
    g.dx_has_acc = acc.defined() && x.dtype() == DType::f16 && *row_vec(cols) != '\0' && flt(acc, x);
    std::vector<Binding> b = {{bdy, false}, {bx, false}, {bm, false}, {br, false}, {bw, false},
                              {Runtime::buffer_of(g.dx), true}};
    if (g.dx_has_acc) b.push_back({rt_->input(acc), false});
    rt_->run("layernorm_bwd_dx" + sfx(x) + row_vec(cols) + (g.dx_has_acc ? "_acc" : ""), {row_wg(cols)},
             std::span<const Binding>(b), pc, Runtime::grid(rows), 10.0 * double(x.numel()));
  }
  if ((w.defined() || has_bias) && which != ops::LnGrads::dx) {
    if (w.defined()) g.dw = rt_->output({cols});
    if (has_bias) g.db = rt_->output({cols});
    // Partial sums per row chunk, (chunks, cols), then summed over the chunks in order. A placeholder for
    // a missing output: written by no invocation (the shader checks the flags).
    const uint32_t chunks = uint32_t((rows + row_chunk - 1) / row_chunk);
    const uint64_t part_bytes = uint64_t(chunks) * uint64_t(cols) * 4;
    const auto dummy = rt_->scratch(4);
    auto target = [&](bool has, const Tensor& t) {
      if (!has) return dummy;
      return chunks > 1 ? rt_->scratch(part_bytes) : Runtime::buffer_of(t);
    };
    // Both with chunk partials in fours: one buffer, (2, chunks, cols), and one sum pass into dw and db.
    const bool both = w.defined() && has_bias && chunks > 1 && vec == 4;
    auto pc2 = pc;
    if (both) pc2.db_off = chunks * uint32_t(cols);
    const auto pw = both ? rt_->scratch(2 * part_bytes) : target(w.defined(), g.dw);
    const auto pb = both ? pw : target(has_bias, g.db);
    rt_->run("layernorm_bwd_dwdb" + sfx(x) + (vec == 4 ? "_vec4" : ""), {kLayernormWG},
             {{bdy, false}, {bx, false}, {bm, false}, {br, false}, {pw, true}, {pb, true}}, pc2,
             Runtime::grid_for(uint64_t(chunks) * uint64_t(cols) / vec, kLayernormWG), 4.0 * double(x.numel()));
    const auto dw = w.defined() ? Runtime::buffer_of(g.dw) : nullptr, db = has_bias ? Runtime::buffer_of(g.db) : nullptr;
    auto sums = [this, both, chunks, cols, pw, pb, dw, db] {
      if (both) {
        record_sum(pw, dw, 2, chunks, uint32_t(cols), 1.0f, false, db, uint32_t(cols));
      } else if (chunks > 1) {
        if (dw) record_sum(pw, dw, 1, chunks, uint32_t(cols), 1.0f);
        if (db) record_sum(pb, db, 1, chunks, uint32_t(cols), 1.0f);
      }
    };
    // Beside other deferred products the sums wait for the phase's end (set_concurrent): their barrier comes once.
    // ALPHA_VK_CHECK reads every result as it returns: then they run now.
    if (concurrent_ && !ops::gpu_check::check_state().on) after_concurrent_.push_back(std::move(sums));
    else sums();
  }
  return g;
}

}  // namespace alpha::vk
