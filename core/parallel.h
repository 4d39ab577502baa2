// A fixed pool of worker threads and a blocking parallel_for. Work is split into fixed chunks by index,
// so results never depend on thread timing (each index is computed by exactly one deterministic loop).
#pragma once
#include <cstdint>
#include <functional>

namespace alpha {

// Calls fn(begin, end) over [0, n) in chunks of at least `grain` indices, on up to num_threads() threads.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
int num_threads();
void set_num_threads(int n);  // 1 = run inline; default: hardware concurrency (ALPHA_NUM_THREADS overrides)

}  // namespace alpha
