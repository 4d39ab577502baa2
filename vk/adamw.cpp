// GpuAdamW: records the grad norm (per-grad partial sums, 8 grads per dispatch, then one fixed-order final sum),
// the clip scale and one fused update per param (spirv/adamw.comp). Coefficients are computed exactly as
// optim/adamw.cpp does (in double, rounded to float once), so the kernel performs the CPU's float operations in the
// CPU's order.
#include "vk/adamw.h"

#include <algorithm>
#include <array>
#include <vector>

#include "spirv/push_constants.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kWG = 256;
constexpr uint64_t kNormChunk = uint64_t{kWG} * ADAMW_NORM_ITEMS;  // grad elements per partial sum

uint64_t norm_parts(int64_t n) { return (static_cast<uint64_t>(n) + kNormChunk - 1) / kNormChunk; }
}  // namespace

GpuAdamW::GpuAdamW(VulkanBackend& backend, std::vector<Tensor> params, AdamWOptions opt)
    : AdamW(std::move(params), opt), rt_(backend.runtime()) {
  for (size_t i = 0; i < this->params().size(); ++i) {
    const Tensor& p = this->params()[i];
    ALPHA_CHECK(rt_.accepts(p), ValueError,
                "[adamw gpu] param {} ({}) cannot live on the GPU (needs contiguous, offset 0, this device's buffer)",
                i, p.str());
  }
  stats_ = Tensor::zeros({4}, DType::f32);
  rt_.input(stats_);  // uploaded once; from here on only kernels write it
}

void GpuAdamW::add_loss(const Tensor& loss, bool first) {
  ALPHA_CHECK(loss.defined() && loss.dtype() == DType::f32 && loss.numel() == 1, ValueError,
              "[adamw gpu] loss must be one f32 element, got {}", loss.defined() ? loss.str() : "undefined");
  const Tensor l = loss.contiguous();
  ALPHA_CHECK(rt_.accepts(l), ValueError, "[adamw gpu] loss {} cannot be read on the GPU", l.str());
  const auto bl = rt_.input(l), bs = rt_.input(stats_);
  rt_.run("adamw_loss_f32", {64}, {{bl, false}, {bs, true}}, pc::AdamWLossPC{first ? 1u : 0u}, {1, 1, 1}, 1.0);
  stats_.storage()->mark_device_written();
  loss_added_ = true;
}

void GpuAdamW::clip_and_step(double lr, double max_norm, double inv_scale) {
  ALPHA_CHECK(std::isfinite(lr) && lr >= 0.0, ValueError, "[adamw gpu] lr must be finite and >= 0, got {}", lr);
  ALPHA_CHECK(!std::isnan(max_norm), ValueError, "[adamw gpu] max_norm is NaN");
  ALPHA_CHECK(std::isfinite(inv_scale) && inv_scale > 0.0, ValueError,
              "[adamw gpu] inv_scale must be finite and > 0, got {}", inv_scale);
  const std::vector<Tensor>& ps = params();
  std::vector<Tensor>& ms = exp_avg();
  std::vector<Tensor>& vs = exp_avg_sq();
  ALPHA_CHECK(ms.size() == ps.size() && vs.size() == ps.size(), ValueError,
              "[adamw gpu] {} params but {} exp_avg and {} exp_avg_sq tensors", ps.size(), ms.size(), vs.size());
  // Validate everything before recording anything, so a throwing step leaves the optimizer unchanged.
  std::vector<Tensor> grads(ps.size());
  uint64_t parts = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Tensor g = ps[i].grad();
    if (!g.defined()) continue;
    ALPHA_CHECK(g.dtype() == DType::f32, DTypeError, "[adamw gpu] grad of param {} is {}, expected f32", i, g.str());
    ALPHA_CHECK(g.shape() == ps[i].shape(), ShapeError, "[adamw gpu] grad of param {} is {}, param is {}", i,
                shape_str(g.shape()), shape_str(ps[i].shape()));
    for (const Tensor* s : {&ms[i], &vs[i]})
      ALPHA_CHECK(s->defined() && s->dtype() == DType::f32 && s->shape() == ps[i].shape() && rt_.accepts(*s),
                  ValueError, "[adamw gpu] {} of param {} is {}, expected contiguous f32{}",
                  s == &ms[i] ? "exp_avg" : "exp_avg_sq", i, s->defined() ? s->str() : std::string("undefined"),
                  shape_str(ps[i].shape()));
    grads[i] = g.contiguous();  // a strided grad is copied (on the GPU when it is there)
    ALPHA_CHECK(rt_.accepts(grads[i]), ValueError, "[adamw gpu] grad of param {} ({}) cannot be read on the GPU", i,
                grads[i].str());
    parts += norm_parts(g.numel());
  }

  if (step_unread_) read_stats();  // the previous step's veto decides the step count this one uses

  // Grad norm: one partial per chunk of each grad, then one workgroup sums them all in order.
  const float inv = static_cast<float>(inv_scale);  // LossScaler::unscale multiplies by the float 1/scale too
  if (parts > partials_cap_) {
    partials_ = rt_.scratch(parts * 8);
    partials_cap_ = parts;
  }
  if (!partials_) partials_ = rt_.scratch(8);
  // ADAMW_NORM_GRADS grads per dispatch (one per grad cost an H200 0.5 ms of shakespeare_char's 0.9 ms optimizer
  // step), each writing its own window of partials_ (Binding::disjoint: no barriers between them).
  std::vector<size_t> live;
  for (size_t i = 0; i < ps.size(); ++i)
    if (grads[i].defined()) live.push_back(i);
  uint64_t offset = 0;
  for (size_t at = 0; at < live.size(); at += ADAMW_NORM_GRADS) {
    const size_t count = std::min<size_t>(ADAMW_NORM_GRADS, live.size() - at);
    pc::AdamWNormPC npc{};
    npc.count = uint32_t(count), npc.out_offset = uint32_t(offset), npc.inv_scale = inv;
    std::array<std::shared_ptr<GpuBuffer>, ADAMW_NORM_GRADS> gb;
    uint64_t groups = 0;
    double work = 0;
    for (size_t k = 0; k < ADAMW_NORM_GRADS; ++k) {
      const Tensor& g = grads[live[at + std::min(k, count - 1)]];  // unused bindings repeat the last grad
      gb[k] = rt_.input(g);
      if (k >= count) continue;
      npc.n[k] = uint32_t(g.numel()), npc.first[k] = uint32_t(groups);
      groups += norm_parts(g.numel());
      work += 2.0 * double(g.numel());
    }
    static_assert(ADAMW_NORM_GRADS == 8, "the binding list below names 8 grads");
    rt_.run("adamw_norm_partial_f32", {kWG},
            {{gb[0], false}, {gb[1], false}, {gb[2], false}, {gb[3], false}, {gb[4], false}, {gb[5], false},
             {gb[6], false}, {gb[7], false}, {partials_, true, /*disjoint=*/true}},
            npc, Runtime::grid(groups), work);
    offset += groups;
  }
  const auto bs = rt_.input(stats_);
  const pc::AdamWFinalPC fpc{uint32_t(parts), static_cast<float>(std::max(max_norm, 0.0)), inv, loss_added_ ? 1u : 0u};
  rt_.run("adamw_norm_final_f32", {kWG}, {{partials_, false}, {bs, true}}, fpc, {1, 1, 1}, 2.0 * double(parts));
  stats_.storage()->mark_device_written();
  loss_added_ = false;

  // The update, with optim/adamw.cpp's coefficients; read_stats() takes the count back if the GPU vetoes it.
  set_step_count(step_count() + 1);
  step_unread_ = true;
  const AdamWOptions& o = options();
  const double t = static_cast<double>(step_count());
  const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!grads[i].defined() || (!excluded_.empty() && excluded_[i])) continue;
    const Tensor& p = ps[i];
    const uint32_t n = static_cast<uint32_t>(p.numel());
    const pc::AdamWPC pc{n,
                         static_cast<float>(1.0 - lr * o.weight_decay),
                         static_cast<float>(o.beta1),
                         static_cast<float>(1.0 - o.beta1),
                         static_cast<float>(o.beta2),
                         static_cast<float>(1.0 - o.beta2),
                         static_cast<float>(std::sqrt(bc2)),
                         static_cast<float>(o.eps),
                         static_cast<float>(-(lr / bc1)),
                         p.dim() >= 2 ? 1u : 0u};
    const bool vec4 = n % 4 == 0;  // whole buffers: 16-byte aligned; the same per-element operations (same bits)
    // The weight's f16 copy (ops::cast_cached), when current, is rewritten here rather than cast again next forward.
    Storage::Derived& d = p.storage()->derived();
    const bool h16 = d.storage && d.version == p.storage()->version() && p.offset() == 0 &&
                     d.storage->nbytes() * 2 == p.storage()->nbytes() && p.storage()->nbytes() == size_t(n) * 4;
    std::vector<Binding> b{{rt_.input(p), true}, {rt_.input(grads[i]), false}, {rt_.input(ms[i]), true},
                           {rt_.input(vs[i]), true}, {bs, false}};
    if (h16) b.push_back({rt_.input(Tensor::over(d.storage, p.shape(), DType::f16)), true});
    rt_.run(std::string(vec4 ? "adamw_f32_vec4" : "adamw_f32") + (h16 ? "_h16" : ""), {kWG}, b, pc,
            Runtime::grid_for(vec4 ? n / 4 : n, kWG), (h16 ? 11.0 : 10.0) * double(n));
    p.storage()->mark_device_written();
    if (h16) {
      d.storage->mark_device_written();
      d.version = p.storage()->version();
    }
    ms[i].storage()->mark_device_written();
    vs[i].storage()->mark_device_written();
  }
}

GpuAdamW::Stats GpuAdamW::read_stats() {
  const float* s = stats_.data<float>();  // the one download
  const Stats out{s[0], s[1], s[2], s[3] != 0.0f};
  if (step_unread_ && out.skipped) set_step_count(step_count() - 1);  // the CPU path never calls step()
  step_unread_ = false;
  return out;
}

}  // namespace alpha::vk
