// `alpha bench cpu`: CPU matmul GFLOP/s at GPT shapes and the forward+backward time of a transformer block.
// `alpha bench gpu` (train/cli/bench_gpu.cpp): GEMM TFLOP/s per matmul kernel (or per coopmat tile), memory-bound
// kernel GB/s, fused attention and the GPT training step on a Vulkan device. Medians after warm-up; timings are benchmarks, never tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/gpt.h"

namespace alpha {

// kernels: per-kernel GB/s and GFLOP/s against measured peaks; gpt2: GPT-2 small forward+backward at B4 T256;
// profile: gpt2 plus one step's time per CPU op (and outside ops).
void run_cpu_bench(bool json, bool kernels = false, bool gpt2 = false, bool profile = false);

struct GpuBenchOptions {
  std::string device = "vulkan";
  GPTConfig model;        // defaults: shakespeare_char (6L, 6H, 384 wide, T 256, V 65)
  int64_t batch = 64;
  int grad_accum = 1;
  bool defer_weight_grads = true;  // train.defer_weight_grads
  bool overlap_steps = true;  // train.overlap_steps: a step's stats read during the next one's forward
  std::string optim_device = "gpu";  // AdamW on the GPU (optim.device gpu) or the CPU
  OptimConfig optim;  // from --config/--set: optim.name muon times Muon (optim.muon.*) for the block matrices
  int warmup = 3, steps = 10;
  double warmup_s = 1.0;  // and at least this long: the GPU's clocks ramp under load (bench_train_step)
  double peak_tflops = 0;  // > 0: MFU of the step
  bool json = false;
  bool quick = false;  // smoke run (CI on lavapipe): no 4096^3 case, 1 warm-up + 3 timed repetitions, 2 steps
  std::vector<std::string> gemm;  // "M,K,N[,ta,tb]" shapes instead of the default list (then no kernels/step)
  bool tiles = false;   // GEMM only: every coopmat block tile and the per-shape choice, f16 (tuning sweeps)
  std::vector<uint32_t> walks;  // with tiles: each walk twin (vk::CmTile::walk) at each of these band heights too
  // With tiles: only these tiles ("auto" = the per-shape choice; a ":f32" suffix = f32 out), timed in alternation
  // over rounds (A B C A B C ...), so the GPU's clock drift within a process falls on each alike (A/B of tiles).
  std::vector<std::string> alternate;
  bool step_split = false;  // step: a host wait after the backward, to time it and the update apart
  std::string only;     // sections, comma-separated: gemm, kernels, attention, step ("" = all); overlap if named
};
void run_gpu_bench(const GpuBenchOptions& opts);

}  // namespace alpha
