// GpuAdamW: records the grad norm (per-grad partial sums, 8 grads per dispatch, then one fixed-order final sum),
// the clip scale and one fused update per param (spirv/adamw.comp). Coefficients are computed exactly as
// optim/adamw.cpp does (in double, rounded to float once), so the kernel performs the CPU's float operations in the
// CPU's order.
#include "vk/adamw.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "spirv/push_constants.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kAdamwWG = 256;
constexpr uint64_t kNormChunk = uint64_t{kAdamwWG} * ADAMW_NORM_ITEMS;  // grad elements per partial sum

uint64_t norm_parts(int64_t n) { return (static_cast<uint64_t>(n) + kNormChunk - 1) / kNormChunk; }

bool probe_fused_fma(Runtime& rt) {
  // Pairs whose products and errors stay normal floats (|a|, |b| in [2^-40, 2^40]): there the exact error is a float,
  // so a fused fma gives it bit for bit and an unfused one (a * b rounded first: error 0) does not.
  constexpr uint32_t kPairs = 4096;
  std::vector<float> ab(2 * kPairs);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (float& v : ab) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const float mant = 1.0f + float((x >> 40) & 0xffffff) / 16777216.0f;  // 24 random mantissa bits
    v = std::ldexp((x >> 39) & 1 ? -mant : mant, int((x >> 32) % 81) - 40);
  }
  const auto in = rt.upload_new(ab.data(), ab.size() * sizeof(float));
  const auto out = rt.scratch(ab.size() * sizeof(float));
  const struct { uint32_t n; } push{kPairs};
  rt.run("fma_probe", {64}, {{in, false}, {out, true}}, push, Runtime::grid_for(kPairs, 64), 0.0);
  std::vector<float> pe(ab.size());
  rt.queue().download(out, pe.data(), pe.size() * sizeof(float));
  for (uint32_t i = 0; i < kPairs; ++i) {
    const float a = ab[2 * i], b = ab[2 * i + 1], p = a * b, e = std::fma(a, b, -p);
    if (std::memcmp(&pe[2 * i], &p, 4) != 0 || std::memcmp(&pe[2 * i + 1], &e, 4) != 0) return false;
  }
  return true;
}
}  // namespace

bool fused_fma(Runtime& rt) {
  const char* e = std::getenv("ALPHA_VK_FUSED_FMA");
  const std::string mode = e && *e ? e : "auto";
  if (mode == "0") return false;
  if (mode != "1" && mode != "auto")
    throw ValueError(fmt::format("[adamw gpu] ALPHA_VK_FUSED_FMA='{}' is not one of 0, 1, auto", mode));
  const bool fused = probe_fused_fma(rt);
  ALPHA_CHECK(fused || mode == "auto", ValueError,
              "[adamw gpu] ALPHA_VK_FUSED_FMA=1 but this device's fma() is not fused (spirv/fma_probe.comp)");
  return fused;
}

GpuAdamW::GpuAdamW(VulkanBackend& backend, std::vector<Tensor> params, AdamWOptions opt)
    : AdamW(std::move(params), opt), rt_(backend.runtime()) {
  for (size_t i = 0; i < this->params().size(); ++i) {
    const Tensor& p = this->params()[i];
    ALPHA_CHECK(rt_.accepts(p), ValueError,
                "[adamw gpu] param {} ({}) cannot live on the GPU (needs contiguous, offset 0, this device's buffer)",
                i, p.str());
  }
  ffma_ = fused_fma(rt_) ? "_ffma" : "";
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
    rt_.run("adamw_norm_partial_f32" + ffma_, {kAdamwWG},
            {{gb[0], false}, {gb[1], false}, {gb[2], false}, {gb[3], false}, {gb[4], false}, {gb[5], false},
             {gb[6], false}, {gb[7], false}, {partials_, true, /*disjoint=*/true}},
            npc, Runtime::grid(groups), work);
    offset += groups;
  }
  const auto bs = rt_.input(stats_);
  const pc::AdamWFinalPC fpc{uint32_t(parts), static_cast<float>(std::max(max_norm, 0.0)), inv, loss_added_ ? 1u : 0u};
  rt_.run("adamw_norm_final_f32" + ffma_, {kAdamwWG}, {{partials_, false}, {bs, true}}, fpc, {1, 1, 1}, 2.0 * double(parts));
  stats_.storage()->mark_device_written();
  loss_added_ = false;

  // The update, with optim/adamw.cpp's coefficients; read_stats() takes the count back if the GPU vetoes it.
  set_step_count(step_count() + 1);
  step_unread_ = true;
  const AdamWOptions& o = options();
  const double t = static_cast<double>(step_count());
  const double bc1 = 1.0 - std::pow(o.beta1, t), bc2 = 1.0 - std::pow(o.beta2, t);
  const pc::AdamWPC coef{0,
                         static_cast<float>(1.0 - lr * o.weight_decay),
                         static_cast<float>(o.beta1),
                         static_cast<float>(1.0 - o.beta1),
                         static_cast<float>(o.beta2),
                         static_cast<float>(1.0 - o.beta2),
                         static_cast<float>(std::sqrt(bc2)),
                         static_cast<float>(o.eps),
                         static_cast<float>(-(lr / bc1)),
                         0u};
  // Params whose sizes divide by 4 go ADAMW_MULTI per dispatch where the device binds 5 buffers per param and the
  // stats (GPT-2: 148 dispatches -> 25; ~100 of them a bias or norm of 768-3072 elements at ~5 us each on an H200).
  const bool multi = rt_.device().features().max_storage_buffers_per_stage >= 5 * ADAMW_MULTI + 1;
  std::vector<size_t> batch;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (!grads[i].defined() || (!excluded_.empty() && excluded_[i])) continue;
    if (multi && ps[i].numel() % 4 == 0) {
      batch.push_back(i);
      if (batch.size() == ADAMW_MULTI) update_params(batch, grads, coef, true), batch.clear();
    } else {
      update_params({i}, grads, coef, false);
    }
  }
  if (!batch.empty()) update_params(batch, grads, coef, true);
}

// The f16 copy of param p (ops::cast_cached's, rewritten by the update) when current, else nothing.
Tensor GpuAdamW::half_copy(const Tensor& p) {
  Storage::Derived& d = p.storage()->derived();
  const bool h16 = d.storage && d.version == p.storage()->version() && p.offset() == 0 &&
                   d.storage->nbytes() * 2 == p.storage()->nbytes() && p.storage()->nbytes() == size_t(p.numel()) * 4;
  return h16 ? Tensor::over(d.storage, p.shape(), DType::f16) : Tensor();
}

void GpuAdamW::update_params(const std::vector<size_t>& which, const std::vector<Tensor>& grads,
                             const pc::AdamWPC& coef, bool multi) {
  const std::vector<Tensor>& ps = params();
  std::vector<Tensor>& ms = exp_avg();
  std::vector<Tensor>& vs = exp_avg_sq();
  const auto bs = rt_.input(stats_);
  std::vector<Tensor> halves;
  for (size_t i : which) halves.push_back(half_copy(ps[i]));
  if (!multi) {
    const size_t i = which[0];
    const Tensor& p = ps[i];
    const uint32_t n = static_cast<uint32_t>(p.numel());
    pc::AdamWPC pc = coef;
    pc.n = n;
    pc.apply_decay = p.dim() >= 2 ? 1u : 0u;
    const bool vec4 = n % 4 == 0;  // whole buffers: 16-byte aligned; the same per-element operations (same bits)
    // The weight's f16 copy (ops::cast_cached), when current, is rewritten here rather than cast again next forward.
    const bool h16 = halves[0].defined();
    std::vector<Binding> b{{rt_.input(p), true}, {rt_.input(grads[i]), false}, {rt_.input(ms[i]), true},
                           {rt_.input(vs[i]), true}, {bs, false}};
    if (h16) b.push_back({rt_.input(halves[0]), true});
    const std::string kernel = std::string(vec4 ? "adamw_f32_vec4" : "adamw_f32") + (h16 ? "_h16" : "") + ffma_;
    // ALPHA_VK_PROFILE_SHAPES=1: the per-kernel GPU times split the updates by param size.
    rt_.run(kernel, {kAdamwWG}, b, pc, Runtime::grid_for(vec4 ? n / 4 : n, kAdamwWG), (h16 ? 11.0 : 10.0) * double(n),
            profile_sizes_ ? fmt::format("{}[n={}]", kernel, n) : std::string());
  } else {
    pc::AdamWMultiPC pc{};
    pc.c = coef;
    pc.count = uint32_t(which.size());
    std::array<Binding, 5 * ADAMW_MULTI + 1> b{};
    uint64_t groups = 0;
    double work = 0;
    std::shared_ptr<GpuBuffer> placeholder;  // the f16 copy of a param without one: bound, never written
    for (size_t k = 0; k < ADAMW_MULTI; ++k) {
      const size_t slot = std::min(k, which.size() - 1), i = which[slot];  // unused slots repeat the last param
      const bool used = k < which.size();
      b[k] = {rt_.input(ps[i]), used};
      b[ADAMW_MULTI + k] = {rt_.input(grads[i]), false};
      b[2 * ADAMW_MULTI + k] = {rt_.input(ms[i]), used};
      b[3 * ADAMW_MULTI + k] = {rt_.input(vs[i]), used};
      if (!halves[slot].defined() && !placeholder) placeholder = rt_.scratch(16);
      b[4 * ADAMW_MULTI + k] =
          halves[slot].defined() ? Binding{rt_.input(halves[slot]), used} : Binding{placeholder, false};
      if (!used) continue;
      const uint64_t n = uint64_t(ps[i].numel());
      pc.n[k] = uint32_t(n), pc.first[k] = uint32_t(groups);
      if (ps[i].dim() >= 2) pc.decay_mask |= 1u << k;
      if (halves[slot].defined()) pc.h16_mask |= 1u << k;
      groups += (n / 4 + kAdamwWG - 1) / kAdamwWG;
      work += (halves[slot].defined() ? 11.0 : 10.0) * double(n);
    }
    b[5 * ADAMW_MULTI] = {bs, false};
    rt_.run("adamw_f32_vec4_multi" + ffma_, {kAdamwWG}, std::span<const Binding>(b), pc, Runtime::grid(groups), work);
  }
  for (size_t k = 0; k < which.size(); ++k) {
    const Tensor& p = ps[which[k]];
    p.storage()->mark_device_written();
    if (halves[k].defined()) {
      Storage::Derived& d = p.storage()->derived();
      d.storage->mark_device_written();
      d.version = p.storage()->version();
    }
    ms[which[k]].storage()->mark_device_written();
    vs[which[k]].storage()->mark_device_written();
  }
}

void GpuAdamW::request_stats() {
  if (ticket_.value == 0) ticket_ = rt_.queue().download_async(Runtime::buffer_of(stats_), 4 * sizeof(float));
}

GpuAdamW::Stats GpuAdamW::read_stats() {
  float s[4];
  if (ticket_.value != 0) rt_.queue().read(ticket_, s);  // the step's own submission: later work keeps running
  else std::memcpy(s, stats_.data<float>(), sizeof(s));  // the one download (waits for everything queued)
  const Stats out{s[0], s[1], s[2], s[3] != 0.0f};
  if (step_unread_ && out.skipped) set_step_count(step_count() - 1);  // the CPU path never calls step()
  step_unread_ = false;
  return out;
}

}  // namespace alpha::vk
