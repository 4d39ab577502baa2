// GpuMuon: per Muon matrix, four kernels and the dispatched Newton-Schulz iteration, all recorded on the lazy
// queue: momentum (muon_momentum_f32), sum-of-squares partials (adamw_norm_partial_f32), normalization
// (muon_normalize_f32), Newton-Schulz (ops::matmul/scale/add/cast), update (muon_update_f32).
#include "vk/muon.h"

#include <algorithm>
#include <cmath>

#include "core/ops.h"
#include "spirv/push_constants.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kWG = 256;
constexpr uint64_t kNormChunk = uint64_t{kWG} * ADAMW_NORM_ITEMS;  // elements per partial (adamw.comp)
}  // namespace

GpuMuon::GpuMuon(VulkanBackend& backend, std::vector<Tensor> params, std::vector<bool> muon_mask, AdamWOptions adamw,
                 MuonOptions muon)
    : GpuAdamW(backend, std::move(params), adamw), muon_(muon) {
  excluded_ = muon_matrices(this->params(), muon_mask, muon_);
  ALPHA_CHECK(muon_.ns_dtype == DType::f32 || muon_.ns_dtype == DType::f16, DTypeError,
              "[muon gpu] Newton-Schulz runs in f32 or f16");
}

void GpuMuon::clip_and_step(double lr, double max_norm, double inv_scale) {
  GpuAdamW::clip_and_step(lr, max_norm, inv_scale);  // validates every grad and state tensor first
  Runtime& rt = runtime();
  const auto bs = rt.input(stats());
  const double mlr = lr / muon_.base_lr * muon_.lr;
  const pc::MuonMomentumPC base{0, static_cast<float>(1.0 - muon_.momentum), static_cast<float>(muon_.momentum),
                                muon_.nesterov ? 1u : 0u};
  for (size_t i = 0; i < params().size(); ++i) {
    if (!excluded_[i]) continue;
    const Tensor& p = params()[i];
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().contiguous();
    Tensor& m = exp_avg()[i];
    const uint32_t n = static_cast<uint32_t>(p.numel());
    // (rows, cols): momentum buffer m, and u = the matrix Newton-Schulz orthogonalizes.
    Tensor u = rt.output(p.shape(), DType::f32);
    pc::MuonMomentumPC mpc = base;
    mpc.n = n;
    rt.run("muon_momentum_f32", {kWG},
           {{rt.input(g), false}, {rt.input(m), true}, {Runtime::buffer_of(u), true}, {bs, false}}, mpc,
           Runtime::grid_for(n, kWG), 6.0 * double(n));
    m.storage()->mark_device_written();

    const bool tall = p.size(0) > p.size(1);
    const Tensor x = tall ? ops::contiguous(u.transpose(0, 1)) : u;  // (m, n), m <= n
    const uint64_t parts = (uint64_t{n} + kNormChunk - 1) / kNormChunk;
    if (parts > partials_cap_) partials_ = rt.scratch(parts * 8), partials_cap_ = parts;
    const auto bx = rt.input(x);
    rt.run("adamw_norm_partial_f32", {kWG}, {{bx, false}, {partials_, true}}, pc::AdamWNormPC{n, 0, 1.0f},
           Runtime::grid(parts), 2.0 * double(n));
    Tensor xn = rt.output(x.shape(), DType::f32);
    rt.run("muon_normalize_f32", {kWG}, {{partials_, false}, {bx, false}, {Runtime::buffer_of(xn), true}},
           pc::MuonNormPC{n, static_cast<uint32_t>(parts)}, Runtime::grid_for(n, kWG), 2.0 * double(n));

    Tensor o = newton_schulz_iterate(xn, muon_.ns_steps, muon_.ns_coefficients, muon_.ns_dtype);
    o = tall ? ops::contiguous(o.transpose(0, 1)) : ops::contiguous(o);  // (rows, cols)

    const double rows = static_cast<double>(p.size(0)), cols = static_cast<double>(p.size(1));
    const pc::MuonUpdatePC upc{n, static_cast<float>(1.0 - mlr * muon_.weight_decay), static_cast<float>(-mlr),
                               static_cast<float>(std::sqrt(std::max(1.0, rows / cols))),
                               muon_.weight_decay != 0.0 ? 1u : 0u};
    rt.run("muon_update_f32", {kWG}, {{rt.input(p), true}, {rt.input(o), false}, {bs, false}}, upc,
           Runtime::grid_for(n, kWG), 3.0 * double(n));
    p.storage()->mark_device_written();
  }
}

}  // namespace alpha::vk
