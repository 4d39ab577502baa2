// GpuMuon: the Muon matrices are grouped by oriented shape (m, n) = (min, max of rows and cols); per group, one
// momentum kernel per matrix writes u into a (G, m, n) stack (tall ones transposed), two kernels normalize every
// matrix of the stack, Newton-Schulz runs once on the stack through the dispatcher (batched GEMMs), and one update
// kernel per matrix reads its slice back. Llama at the shakespeare_char size: 2 stacks instead of 42 iterations.
#include "vk/muon.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "core/ops.h"
#include "spirv/push_constants.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kMuonWG = 256;
constexpr uint64_t kMuonNormChunk = uint64_t{kMuonWG} * ADAMW_NORM_ITEMS;  // elements per partial sum
}  // namespace

GpuMuon::GpuMuon(VulkanBackend& backend, std::vector<Tensor> params, std::vector<bool> muon_mask, AdamWOptions adamw,
                 MuonOptions muon)
    : GpuAdamW(backend, std::move(params), adamw), muon_(muon) {
  excluded_ = muon_matrices(this->params(), muon_mask, muon_);
  ALPHA_CHECK(muon_.ns_dtype == DType::f32 || muon_.ns_dtype == DType::f16, DTypeError,
              "[muon gpu] Newton-Schulz runs in f32 or f16");
  // The kernels index a stack of same-shape matrices in 32 bits: checked here, so a step never throws halfway.
  std::map<std::pair<int64_t, int64_t>, uint64_t> stacked;  // elements per oriented shape
  for (size_t i = 0; i < this->params().size(); ++i)
    if (excluded_[i]) {
      const Tensor& p = this->params()[i];
      uint64_t& total = stacked[{std::min(p.size(0), p.size(1)), std::max(p.size(0), p.size(1))}];
      total += static_cast<uint64_t>(p.numel());
      ALPHA_CHECK(total < (uint64_t{1} << 32), ValueError,
                  "[muon gpu] the Muon matrices of shape {} hold over 2^32 elements: too many for one stack",
                  shape_str(p.shape()));
    }
}

void GpuMuon::clip_and_step(double lr, double max_norm, double inv_scale) {
  GpuAdamW::clip_and_step(lr, max_norm, inv_scale);  // validates every grad and state tensor first
  // Muon matrices with a grad, grouped by oriented shape; std::map keeps the groups in a fixed order.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < params().size(); ++i) {
    const Tensor& p = params()[i];
    if (!excluded_[i] || !p.grad().defined()) continue;
    groups[{std::min(p.size(0), p.size(1)), std::max(p.size(0), p.size(1))}].push_back(i);
  }
  Runtime& rt = runtime();
  const auto bs = rt.input(stats());
  const double mlr = lr / muon_.base_lr * muon_.lr;
  for (const auto& [shape, members] : groups) {
    const auto [m, n] = shape;
    const uint64_t G = members.size(), mn = static_cast<uint64_t>(m * n);  // G * mn < 2^32: the constructor
    // u, stacked (G, m, n): each matrix's Newton-Schulz input, wide. Each momentum dispatch writes its own matrix of
    // the fresh stack (Binding::disjoint: no barriers between them).
    Tensor u = rt.output({static_cast<int64_t>(G), m, n}, DType::f32);
    for (size_t j = 0; j < G; ++j) {
      const size_t i = members[j];
      const Tensor& p = params()[i];
      const Tensor g = p.grad().contiguous();
      Tensor& mom = exp_avg()[i];
      const pc::MuonMomentumPC mpc{static_cast<uint32_t>(mn), static_cast<uint32_t>(p.size(0)),
                                   static_cast<uint32_t>(p.size(1)), p.size(0) > p.size(1) ? 1u : 0u,
                                   static_cast<uint32_t>(j * mn), static_cast<float>(1.0 - muon_.momentum),
                                   static_cast<float>(muon_.momentum), muon_.nesterov ? 1u : 0u};
      rt.run("muon_momentum_f32", {kMuonWG},
             {{rt.input(g), false}, {rt.input(mom), true}, {Runtime::buffer_of(u), true, /*disjoint=*/true}, {bs, false}},
             mpc, Runtime::grid_for(mn, kMuonWG), 6.0 * double(mn));
      mom.storage()->mark_device_written();
    }
    // x / (|x|_F + 1e-7) per matrix: partial sums of squares, then the division.
    const uint64_t parts = (mn + kMuonNormChunk - 1) / kMuonNormChunk;
    if (G * parts > partials_cap_) partials_ = rt.scratch(G * parts * 8), partials_cap_ = G * parts;
    const pc::MuonNormPC npc{static_cast<uint32_t>(mn), static_cast<uint32_t>(parts)};
    auto stacked = [&](std::array<uint32_t, 3> grid) {  // z: the matrix of the stack
      grid[2] = static_cast<uint32_t>(G);
      return grid;
    };
    rt.run("muon_partial_f32" + ffma(), {kMuonWG}, {{Runtime::buffer_of(u), false}, {partials_, true}}, npc,
           stacked(Runtime::grid(parts)), 2.0 * double(G * mn));
    Tensor x = rt.output(u.shape(), DType::f32);
    rt.run("muon_normalize_f32", {kMuonWG},
           {{partials_, false}, {Runtime::buffer_of(u), false}, {Runtime::buffer_of(x), true}}, npc,
           stacked(Runtime::grid_for(mn, kMuonWG)), 2.0 * double(G * mn));

    const Tensor o = ops::contiguous(newton_schulz_iterate(x, muon_.ns_steps, muon_.ns_coefficients, muon_.ns_dtype));
    const auto bo = rt.input(o);
    for (size_t j = 0; j < G; ++j) {
      const Tensor& p = params()[members[j]];
      const double rows = static_cast<double>(p.size(0)), cols = static_cast<double>(p.size(1));
      const pc::MuonUpdatePC upc{static_cast<uint32_t>(mn), static_cast<uint32_t>(p.size(0)),
                                 static_cast<uint32_t>(p.size(1)), p.size(0) > p.size(1) ? 1u : 0u,
                                 static_cast<uint32_t>(j * mn), static_cast<float>(1.0 - mlr * muon_.weight_decay),
                                 static_cast<float>(-mlr), static_cast<float>(std::sqrt(std::max(1.0, rows / cols))),
                                 muon_.weight_decay != 0.0 ? 1u : 0u};
      rt.run("muon_update_f32", {kMuonWG}, {{rt.input(p), true}, {bo, false}, {bs, false}}, upc,
             Runtime::grid_for(mn, kMuonWG), 3.0 * double(mn));
      p.storage()->mark_device_written();
    }
  }
}

}  // namespace alpha::vk
