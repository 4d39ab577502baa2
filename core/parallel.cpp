#include "core/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace alpha {

namespace {

inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }  // the caller works too

  void resize(int n) {
    stop();
    quit_ = false;
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { loop(); });
  }

  // Chunks are claimed from an atomic counter, not under the mutex: a run of 16-64 chunks took ~2 contended
  // locks per chunk, tens of microseconds per op on a 16-vCPU VM, where the CPU recipe runs ~100s of small ops.
  void run(int64_t chunks, const std::function<void(int64_t)>& task) {
    {
      std::lock_guard lk(mu_);
      task_ = &task;
      chunks_ = chunks;
      next_.store(0, std::memory_order_relaxed);
      active_.fetch_add(1, std::memory_order_relaxed);  // the caller's own share
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work(task, chunks);
    // Every worker that took this run's task must leave it before the next run resets the counter, or it could
    // claim a chunk of that run with this task: spin briefly (workers are finishing their last chunk), then
    // sleep; the task is cleared under the same lock that admits workers.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (active_.load(std::memory_order_acquire) != 0 && std::chrono::steady_clock::now() < until) spin_pause();
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return active_.load(std::memory_order_acquire) == 0; });
    task_ = nullptr;
  }

 private:
  void work(const std::function<void(int64_t)>& task, int64_t chunks) {
    for (int64_t c; (c = next_.fetch_add(1, std::memory_order_relaxed)) < chunks;) task(c);
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {  // the last one out wakes the caller
      std::lock_guard lk(mu_);
      done_cv_.notify_all();
    }
  }
  void loop() {
    uint64_t seen = 0;
    while (true) {
      // Spin briefly before sleeping: kernels arrive back to back, and waking a sleeping thread costs
      // ~0.1 ms on a VM, as long as a small GEMM takes.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
      while (generation_.load(std::memory_order_acquire) == seen && !quit_.load(std::memory_order_relaxed) &&
             std::chrono::steady_clock::now() < until) {
        for (int i = 0; i < 64; ++i) spin_pause();
      }
      const std::function<void(int64_t)>* task = nullptr;
      int64_t chunks = 0;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
        if (!task_) continue;  // that run is over
        task = task_;
        chunks = chunks_;
        active_.fetch_add(1, std::memory_order_relaxed);
      }
      work(*task, chunks);
    }
  }
  void stop() {
    {
      std::lock_guard lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* task_ = nullptr;  // the current run's, under mu_
  int64_t chunks_ = 0;                                   // under mu_
  std::atomic<int64_t> next_{0};                         // the next unclaimed chunk
  std::atomic<int> active_{0};                           // threads inside the current run's work()
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> quit_{false};
};

int default_threads() {
  if (const char* e = std::getenv("ALPHA_NUM_THREADS")) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  // The CPUs this process may run on (taskset, container cpusets), not every CPU of the host: more workers
  // than that would time-slice against each other.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

thread_local bool in_parallel = false;  // nested parallel_for runs inline

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) { pool().resize(std::max(1, n)); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t threads = num_threads();
  if (threads <= 1 || n <= grain || in_parallel) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, threads * 4);
  const int64_t per = (n + chunks - 1) / chunks;
  pool().run(chunks, [&](int64_t c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b >= e) return;
    in_parallel = true;
    fn(b, e);
    in_parallel = false;
  });
}

}  // namespace alpha
