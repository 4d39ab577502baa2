#include "cli/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/cpu/kernel_bench.h"
#include "core/cpu/matmul.h"
#include "core/cpu/simd.h"
#include "core/op_timing.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "model/gpt.h"

namespace alpha {

namespace {

using cpu::median_ms;

Tensor randn(const Shape& s, Rng& rng) {
  Tensor t = Tensor::empty(s);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.normal());
  return t;
}

// Adds the per-kernel rates and this CPU's measured memory and FMA peaks to out.
void extra_kernel_report(nlohmann::json& out) {
  const cpu::CpuPeaks pk = cpu::measure_peaks();
  out["peak_mem_gbs"] = pk.mem_gbs;
  out["peak_fma_gflops"] = pk.fma_gflops;
  out["kernels"] = nlohmann::json::array();
  for (const cpu::KernelRate& k : cpu::bench_kernels())
    out["kernels"].push_back({{"name", k.name}, {"shape", k.shape}, {"ms", k.ms}, {"gbs", k.gbs}, {"gflops", k.gflops},
                              {"oracle_ms", k.oracle_ms}, {"mem_peak_frac", k.gbs / pk.mem_gbs},
                              {"fma_peak_frac", k.gflops / pk.fma_gflops}});
}

// One fwd+bwd under CPU op timing (core/op_timing.h): ms per op and input shapes, largest first, and the time
// spent outside ops (autograd bookkeeping, gradient accumulation in the tape, allocation).
nlohmann::json op_profile(const std::function<void()>& step) {
  set_cpu_op_timing(true);
  const int64_t f0 = detail::minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  step();
  const int64_t faults = detail::minor_faults() - f0;
  const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::pair<std::string, CpuOpTime>> rows(cpu_op_times().begin(), cpu_op_times().end());
  set_cpu_op_timing(false);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double in_ops = 0;
  std::map<std::string, double> by_op;  // "matmul", "gelu", ...: the key's first word
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [key, t] : rows) {
    in_ops += t.ms;
    by_op[key.substr(0, key.find(' '))] += t.ms;
    list.push_back({{"op", key}, {"ms", t.ms}, {"calls", t.calls}, {"page_faults", t.page_faults}});
  }
  nlohmann::json ops_total = nlohmann::json::object();
  for (const auto& [k, ms] : by_op) ops_total[k] = ms;
  return {{"total_ms", total}, {"outside_ops_ms", total - in_ops}, {"page_faults", faults}, {"by_op", ops_total}, {"ops", list}};
}

void print_profile(const nlohmann::json& p) {
  std::printf("GPT-2 fwd+bwd, one step under op timing: %.1f ms, outside ops %.1f ms, %lld page faults\n",
              p["total_ms"].get<double>(), p["outside_ops_ms"].get<double>(),
              static_cast<long long>(p["page_faults"]));
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [k, v] : p["by_op"].items()) ops.emplace_back(v.get<double>(), k);
  std::sort(ops.rbegin(), ops.rend());
  for (const auto& [ms, k] : ops) std::printf("  %-22s %9.1f ms\n", k.c_str(), ms);
  std::printf("  largest (op and input shapes, all calls):\n");
  int shown = 0;
  for (const auto& r : p["ops"]) {
    if (++shown > 30) break;
    std::printf("  %9.2f ms %4lld x %7lld faults  %s\n", r["ms"].get<double>(), static_cast<long long>(r["calls"]),
                static_cast<long long>(r["page_faults"]), r["op"].get<std::string>().c_str());
  }
}

}  // namespace

void run_cpu_bench(bool json, bool kernels, bool gpt2, bool profile) {
  gpt2 = gpt2 || profile;
  Rng rng(0);
  nlohmann::json out = {{"threads", num_threads()}, {"simd_target", cpu::simd_enabled() ? cpu::simd_target() : "off"},
                        {"blas", (cpu::blas_setup(), cpu::blas_info())},
                        {"matmul", nlohmann::json::array()}};
  // (rows = B*T, in, out) of the linear layers of nanoGPT's CPU recipe (B=12, T=64, C=128, V=65) and of
  // shakespeare_char (B=64, T=256, C=384) scaled to 2048 rows.
  // GPT-2's fc layer (B4 T256) in its three layouts: forward x @ W^T, dX = dY @ W, dW = dY^T @ X.
  struct Shp { const char* name; int64_t M, K, N; bool ta = false, tb = true; };
  const std::vector<Shp> shapes = {
      {"cpu-recipe qkv", 768, 128, 384}, {"cpu-recipe fc", 768, 128, 512}, {"cpu-recipe proj", 768, 512, 128},
      {"cpu-recipe head", 768, 128, 65}, {"char qkv", 2048, 384, 1152},   {"char fc", 2048, 384, 1536},
      {"char proj", 2048, 1536, 384},    {"square 1024", 1024, 1024, 1024}, {"gpt2 fc fwd", 1024, 768, 3072},
      {"gpt2 fc dX", 1024, 3072, 768, false, false}, {"gpt2 fc dW", 3072, 1024, 768, true, false}};
  for (const auto& s : shapes) {
    // op(x) (M, K), op(w) (K, N): stored transposed where the flags say (w as (N, K) for y = x @ w^T).
    Tensor x = s.ta ? randn({s.K, s.M}, rng) : randn({s.M, s.K}, rng);
    Tensor w = s.tb ? randn({s.N, s.K}, rng) : randn({s.K, s.N}, rng);
    const double ms = median_ms(3, 15, [&] { ops::matmul(x, w, s.ta, s.tb); });
    const double gflops = 2.0 * s.M * s.K * s.N / (ms * 1e6);
    out["matmul"].push_back({{"name", s.name}, {"M", s.M}, {"K", s.K}, {"N", s.N}, {"ms", ms}, {"gflops", gflops}});
  }
  // One transformer block forward + backward at the CPU recipe's shape (through a 1-layer GPT minus head).
  GPTConfig mc{1, 4, 128, 64, 65, 0.0, false};
  Rng init(1), drop(2);
  GPT model(mc, init);
  Tensor idx = Tensor::zeros({12, 64}, DType::i32), tgt = Tensor::zeros({12, 64}, DType::i32);
  const double step_ms = median_ms(3, 15, [&] {
    Tensor loss = model.loss(idx, tgt, true, drop);
    ag::backward(loss);
    for (Tensor p : model.parameters()) p.set_grad(Tensor());
  });
  out["gpt_1layer_fwd_bwd_ms"] = step_ms;
  out["gpt_1layer_shape"] = "B=12 T=64 C=128 H=4 V=65";
  if (gpt2) {  // GPT-2 small (124M, biases, tied head) forward+backward at B4 T256
    GPT big(GPTConfig{12, 12, 768, 1024, 50257, 0.0, true}, init);
    Tensor bi = Tensor::zeros({4, 256}, DType::i32), bt = Tensor::zeros({4, 256}, DType::i32);
    auto step = [&] {
      ag::backward(big.loss(bi, bt, true, drop));
      for (Tensor p : big.parameters()) p.set_grad(Tensor());
    };
    out["gpt2_fwd_bwd_ms"] = median_ms(2, 5, step);
    if (profile) out["gpt2_profile"] = op_profile(step);
  }
  if (kernels) extra_kernel_report(out);
  if (json) {
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("CPU matmul (%d threads), y = x @ w^T, median of 15:\n", num_threads());
  std::printf("  %-16s %6s %6s %6s %9s %9s\n", "shape", "M", "K", "N", "ms", "GFLOP/s");
  for (const auto& m : out["matmul"])
    std::printf("  %-16s %6lld %6lld %6lld %9.3f %9.2f\n", m["name"].get<std::string>().c_str(),
                static_cast<long long>(m["M"]), static_cast<long long>(m["K"]), static_cast<long long>(m["N"]),
                m["ms"].get<double>(), m["gflops"].get<double>());
  std::printf("1-layer GPT forward+backward (B=12 T=64 C=128 H=4 V=65): %.3f ms\n", step_ms);
  if (gpt2) std::printf("GPT-2 small forward+backward (B=4 T=256): %.1f ms\n", out["gpt2_fwd_bwd_ms"].get<double>());
  if (profile) print_profile(out["gpt2_profile"]);
  if (!kernels) return;
  std::printf("Kernels (SIMD target %s; peaks: memory %.1f GB/s, FMA %.1f GFLOP/s):\n",
              out["simd_target"].get<std::string>().c_str(), out["peak_mem_gbs"].get<double>(),
              out["peak_fma_gflops"].get<double>());
  for (const auto& k : out["kernels"])
    std::printf("  %-24s %-18s %8.3f ms %7.1f GB/s %7.1f GFLOP/s  (plain loop %8.3f ms)\n",
                k["name"].get<std::string>().c_str(), k["shape"].get<std::string>().c_str(), k["ms"].get<double>(),
                k["gbs"].get<double>(), k["gflops"].get<double>(), k["oracle_ms"].get<double>());
}

}  // namespace alpha
