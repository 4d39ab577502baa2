// Per-kernel CPU rates for `alpha bench cpu`: each kernel's GB/s (bytes it must move) and GFLOP/s, next to this
// CPU's measured peaks (a parallel triad for memory, independent FMA chains for compute) at the pool's threads.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace alpha::cpu {

struct KernelRate {
  std::string name, shape;
  double ms = 0, gbs = 0, gflops = 0;  // gflops 0: not counted (memory-bound kernel)
  double oracle_ms = 0;                // the same kernel through the plain loops
};

struct CpuPeaks {
  double mem_gbs = 0, fma_gflops = 0;  // measured, all pool threads
};

CpuPeaks measure_peaks();
// Median wall-clock ms of fn over reps runs after `warmup` untimed ones (also `alpha bench cpu`'s timer).
double median_ms(int warmup, int reps, const std::function<void()>& fn);
std::vector<KernelRate> bench_kernels();  // GPT-2 small shapes at B=4, T=256

}  // namespace alpha::cpu
