// `alpha bench gpu --tiles`: every cooperative-matrix block tile (vk::cm_tiles), the trial tiles and their walk twins,
// the timing probes and the traces at each GEMM case, on f16 operands (docs/PERFORMANCE.md's tile sweeps).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_gpu.h"
#include "core/ops.h"
#include "vk/backend.h"

namespace alpha::bench_gpu {

// --tiles: every coopmat block tile (vk::cm_tiles) and the per-shape choice ("auto") on f16 operands, f16 out.
nlohmann::json bench_gemm_tiles(vk::VulkanBackend& be, const std::vector<GemmCase>& cases, bool quick,
                                const std::vector<uint32_t>& walks) {
  ALPHA_CHECK(be.runtime().device().features().nv_coopmat_f16, ValueError,
              "[bench] --tiles needs NV cooperative matrices (the coopmat kernels); this device has none");
  {  // ~1 s of work first, so the GPU runs at its working clocks before the first row
    const Tensor a = fill_f16({4096, 4096}, 3), b = fill_f16({4096, 4096}, 4);
    for (int i = 0; i < (quick ? 4 : 2000); ++i) {
      ops::matmul(a, b, false, false);
      if (i % 50 == 49) be.sync();
    }
    be.sync();
  }
  auto time_tile = [&](const GemmCase& c, const Tensor& a, const Tensor& b, const std::string& name, bool f32 = false) {
    be.set_cm_tile(name);
    const double flops = 2.0 * double(c.M) * double(c.K) * double(c.N);
    const double ms = burst_ms(
        be, [&] { f32 ? (void)ops::matmul_f32(a, b, c.ta, c.tb) : (void)ops::matmul(a, b, c.ta, c.tb); }, flops,
        quick ? 1 : 7);
    return nlohmann::json{{"ms", ms}, {"tflops", flops / (ms * 1e9)}};
  };
  auto warm = [&](const GemmCase& c, const Tensor& a, const Tensor& b, int ms) {  // the per-shape tile for ~ms
    be.set_cm_tile("");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    do {
      ops::matmul(a, b, c.ta, c.tb);
      be.sync();
    } while (std::chrono::steady_clock::now() < until);
  };
  auto operands = [](const GemmCase& c) {
    return std::pair{fill_f16(c.ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, 1), fill_f16(c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, 2)};
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmCase& c : cases) {
    const auto [a, b] = operands(c);
    nlohmann::json row = {{"name", c.name}, {"M", c.M}, {"K", c.K}, {"N", c.N}, {"ta", c.ta}, {"tb", c.tb}};
    // Every pipeline this row times is built first (one call each): built just before its own bursts, one kernel
    // read 68-311 TFLOP/s on an H100 (session 39; steady within 3% built ahead or from the driver's disk cache).
    if (!quick) {
      for (const vk::CmTile& t : vk::cm_tiles()) {
        be.set_cm_tile(t.name);
        ops::matmul(a, b, c.ta, c.tb);
        if (c.ta && t.f32out) ops::matmul_f32(a, b, c.ta, c.tb);
      }
      for (const vk::CmTile& t : vk::cm_trials()) {
        be.set_cm_tile(t.name);
        for (const uint32_t w : t.walk ? walks : std::vector<uint32_t>{0}) {
          be.set_cm_walk(w);
          ops::matmul(a, b, c.ta, c.tb);
        }
        be.set_cm_walk(0);
      }
      be.set_cm_tile("");
      ops::matmul_f32(a, b, c.ta, c.tb);  // the per-shape choice with f32 out (auto_f32out)
      be.sync();
    }
    // Then ~1 s of this product: while the host fills and uploads the operands (1-2 s for the LM head's 824 MB
    // ones) an H200 drops to 345 MHz and then takes ~0.6 s of load to reach 1980 again; after 0.2 s the LM head
    // rows read 57-115 TFLOP/s, the same tile ~300 when timed next (docs/PERFORMANCE.md, sessions 9 and 34).
    warm(c, a, b, quick ? 0 : 1000);
    row["auto"] = time_tile(c, a, b, "");  // the per-shape choice first: what compare.py quotes
    row["auto"]["tile"] = be.matmul_tile_name(c.M, c.N, c.K, c.ta, c.tb, false);
    {  // f32 out (the weight gradients in training), the per-shape choice
      const double flops = 2.0 * double(c.M) * double(c.K) * double(c.N);
      const double ms = burst_ms(be, [&] { ops::matmul_f32(a, b, c.ta, c.tb); }, flops, quick ? 1 : 7);
      row["auto_f32out"] = {
          {"ms", ms}, {"tflops", flops / (ms * 1e9)}, {"tile", be.matmul_tile_name(c.M, c.N, c.K, c.ta, c.tb, true)}};
    }
    for (const vk::CmTile& t : vk::cm_tiles()) row["tiles"][t.name] = time_tile(c, a, b, t.name);
    for (const vk::CmTile& t : vk::cm_trials()) row["trials"][t.name] = time_tile(c, a, b, t.name);  // f16, whole K
    for (const vk::CmTile& t : vk::cm_trials()) {  // --walks: each walk twin at each band height (same tile, other order)
      if (!t.walk) continue;
      for (const uint32_t w : walks) {
        be.set_cm_walk(w);
        row["walks"][t.name][std::to_string(w)] = time_tile(c, a, b, t.name);
      }
      be.set_cm_walk(0);
    }
    if (c.ta)  // the weight-gradient layout: also each tile with f32 out (split-K partials), as training runs it
      for (const vk::CmTile& t : vk::cm_tiles())
        if (t.f32out) row["tiles_f32out"][t.name] = time_tile(c, a, b, t.name, true);
    rows.push_back(row);
  }
  // The probes last, in a pass of their own: on their garbage operands the H100 ran the next measurement up to
  // 1.5x slower (power), which once cost the per-shape rows after them.
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto [a, b] = operands(cases[i]);
    if (!quick) {  // built first, as the rows' tiles (above), then ~0.3 s of the per-shape tile at full clocks
      for (const vk::CmTile& t : vk::cm_probes()) {
        be.set_cm_tile(t.name);
        ops::matmul(a, b, cases[i].ta, cases[i].tb);
      }
      warm(cases[i], a, b, 300);
    }
    for (const vk::CmTile& t : vk::cm_probes()) rows[i]["probes"][t.name] = time_tile(cases[i], a, b, t.name);
  }
  // Traces (ALPHA_VK_TILE_TRACE=1): each trace tile's per-step clocks at every shape, written raw to
  // $ALPHA_VK_TRACE_DIR/trace_<case>_<tile>.bin (260 uvec4 per workgroup: scripts/gpu/tile_trace.py reads them).
  if (be.runtime().device().features().tile_trace) {
    const char* dir = std::getenv("ALPHA_VK_TRACE_DIR");
    for (size_t i = 0; i < cases.size(); ++i) {
      const GemmCase& c = cases[i];
      const auto [a, b] = operands(c);
      for (const vk::CmTile& t : vk::cm_traces()) {
        rows[i]["traces"][t.name] = time_tile(c, a, b, t.name);  // warm, and the trace's own rate
        be.set_cm_tile(t.name);
        const Tensor out = ops::matmul(a, b, c.ta, c.tb);
        const size_t bytes = std::min(out.nbytes(), size_t((c.M + t.bm - 1) / t.bm * ((c.N + t.bn - 1) / t.bn)) * 260 * 16);
        const std::string path = fmt::format("{}/trace_{}_{}.bin", dir ? dir : ".", i, t.name);
        std::FILE* f = std::fopen(path.c_str(), "wb");
        ALPHA_CHECK(f != nullptr, ValueError, "[bench] cannot write {} (ALPHA_VK_TRACE_DIR)", path);
        std::fwrite(out.data<uint16_t>(), 1, bytes, f);
        std::fclose(f);
      }
    }
  }
  be.set_cm_tile("");
  return rows;
}

// --tiles --alternate: the named tiles only, timed in turn over rounds at each case. A sweep times each tile once,
// in a fixed order; on a power-capped GPU the later ones can read 5-10% apart from the same code (session 55).
nlohmann::json bench_gemm_alternate(vk::VulkanBackend& be, const std::vector<GemmCase>& cases,
                                    const std::vector<std::string>& tiles, int rounds) {
  ALPHA_CHECK(be.runtime().device().features().nv_coopmat_f16, ValueError,
              "[bench] --tiles needs NV cooperative matrices (the coopmat kernels); this device has none");
  struct Pick {
    std::string name, tile;  // tile "" = the per-shape choice
    bool f32;
  };
  std::vector<Pick> picks;
  for (const std::string& n : tiles) {
    const size_t colon = n.find(':');
    const std::string base = n.substr(0, colon), suffix = colon == std::string::npos ? "" : n.substr(colon);
    ALPHA_CHECK(suffix.empty() || suffix == ":f32", ValueError, "[bench] --alternate: \"{}\" is not TILE or TILE:f32", n);
    picks.push_back({n, base == "auto" ? "" : base, !suffix.empty()});
    be.set_cm_tile(picks.back().tile);  // an unknown name stops here, before any timing
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmCase& c : cases) {
    const Tensor a = fill_f16(c.ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, 1), b = fill_f16(c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, 2);
    const double flops = 2.0 * double(c.M) * double(c.K) * double(c.N);
    auto call = [&](const Pick& p) { p.f32 ? (void)ops::matmul_f32(a, b, c.ta, c.tb) : (void)ops::matmul(a, b, c.ta, c.tb); };
    for (const Pick& p : picks) {  // every pipeline built first; then ~1 s of work, the GPU at its working clocks
      be.set_cm_tile(p.tile);
      call(p);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
    do {
      call(picks.front());
      be.sync();
    } while (std::chrono::steady_clock::now() < until);
    nlohmann::json row = {{"name", c.name}, {"M", c.M}, {"K", c.K}, {"N", c.N}, {"ta", c.ta}, {"tb", c.tb}};
    std::vector<std::vector<double>> tf(picks.size());
    for (int r = 0; r < rounds; ++r)
      for (size_t i = 0; i < picks.size(); ++i) {
        be.set_cm_tile(picks[i].tile);
        tf[i].push_back(flops / (burst_ms(be, [&] { call(picks[i]); }, flops, 3) * 1e9));
      }
    for (size_t i = 0; i < picks.size(); ++i) {
      be.set_cm_tile(picks[i].tile);
      row["alternate"][picks[i].name] = {{"tflops", median(tf[i])},
                                         {"rounds", tf[i]},
                                         {"tile", be.matmul_tile_name(c.M, c.N, c.K, c.ta, c.tb, picks[i].f32)}};
    }
    rows.push_back(row);
  }
  be.set_cm_tile("");
  return rows;
}

}  // namespace alpha::bench_gpu
