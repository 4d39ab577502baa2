// `alpha bench cpu`: CPU matmul GFLOP/s at GPT shapes and the forward+backward time of a transformer block.
// Medians after warm-up; timings are benchmarks, never tests.
#pragma once

namespace alpha {

void run_cpu_bench(bool json);

}  // namespace alpha
