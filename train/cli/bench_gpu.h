// Helpers of `alpha bench gpu` shared by its sections' files (train/cli/bench_gpu.cpp, bench_overlap.cpp,
// bench_tiles.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "model/gpt.h"

namespace alpha::vk {
class VulkanBackend;
}

namespace alpha::bench_gpu {

double median(std::vector<double> v);
double total_ns(const std::map<std::string, double>& m);
// Kernel-timestamp ms of fn (median of reps) after warmup calls and warm_s seconds of back-to-back calls.
double gpu_ms(vk::VulkanBackend& be, const std::function<void()>& fn, int warmup, int reps, double warm_s);
// Cheap f16 operands (values in +-[1/8, 1/4), from a counter hash), on the host.
Tensor fill_f16(const Shape& s, uint32_t seed);
// Median kernel-timestamp ms per call of fn in bursts of ~2e12 / flops back-to-back calls (bursts 1: a smoke run).
double burst_ms(vk::VulkanBackend& be, const std::function<void()>& fn, double flops, int bursts);
// Median wall ms per call of fn in bursts of ~2e12 / flops back-to-back calls, one sync per burst.
double burst_wall_ms(vk::VulkanBackend& be, const std::function<void()>& fn, double flops, int bursts);

// The GPT's attention operands: q, k, v the head views (B, H, T, D) of one (B, T, 3C) projection qkv, as in the
// model; dout (B, H, T, D); ap the model's scale.
struct AttentionCase {
  Tensor qkv, dout, q, k, v;
  ops::AttentionParams ap;
};
AttentionCase attention_case(const GPTConfig& mc, int64_t batch, Tensor qkv, Tensor dout);

// One GEMM of the sweeps: C (M x N) = op(A) op(B) over K, A / B transposed as stored.
struct GemmCase {
  std::string name;
  int64_t M, K, N;
  bool ta, tb;
};
// --tiles: every coopmat block tile, trial tile and walk twin (at each band height of walks) at each case
// (bench_tiles.cpp).
nlohmann::json bench_gemm_tiles(vk::VulkanBackend& be, const std::vector<GemmCase>& cases, bool quick,
                                const std::vector<uint32_t>& walks);
// --tiles --alternate: the named tiles at each case, timed in alternation over rounds (bench_tiles.cpp).
nlohmann::json bench_gemm_alternate(vk::VulkanBackend& be, const std::vector<GemmCase>& cases,
                                    const std::vector<std::string>& tiles, int rounds);

// --only overlap: weight gradients beside the backward walk's memory-bound kernels, and half batches interleaved
// (bench_overlap.cpp).
nlohmann::json bench_overlap(const GpuBenchOptions& o, vk::VulkanBackend& be);

}  // namespace alpha::bench_gpu
