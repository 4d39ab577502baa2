// Bucketed gradient all-reduce overlapped with backward, as PyTorch DDP does: parameters are grouped into
// buckets of about `bucket_bytes` in reverse registration order (the order backward finishes them); when the
// last parameter of a bucket has its final gradient (autograd's leaf-ready hook, on the last micro-step) the
// main thread copies the bucket's gradients into one flat f32 buffer and a communication thread sums it over
// the ranks (dist::allreduce_sum_f32, fixed rank order) while backward goes on with earlier layers. Buckets go
// out strictly in index order on every rank, so the collectives always pair up. GPU gradients come to the host
// through the tensors' staging path when they are packed.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace alpha::dist {

class GradReducer {
 public:
  GradReducer(std::vector<Tensor> params, int64_t bucket_bytes);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // The leaf-ready hook for the step's last backward (autograd::backward's on_leaf_ready).
  void on_ready(const Tensor& leaf);
  // Sends the buckets not sent yet, waits for all, and sets every parameter's grad to the sum over the ranks.
  // A parameter without a gradient counts as zeros. Rethrows a communication error.
  void finish();

  struct Stats {
    double comm_ms = 0;  // the communication thread's time in all-reduces this step
    double wait_ms = 0;  // how long finish() blocked: the all-reduce time backward did not hide
    double copy_ms = 0;  // packing gradients into the buffers (GPU -> host reads included) and back
    int64_t bytes = 0;   // bytes this rank sent
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> params;
    int64_t offset = 0, size = 0;
    size_t pending = 0;  // parameters not yet ready this step
  };
  void pack(size_t b);  // main thread: copies the bucket's grads in and hands it to the thread
  void comm_loop();

  std::vector<Tensor> params_;
  std::unordered_map<const void*, size_t> index_;  // TensorImpl -> parameter index
  std::vector<size_t> bucket_of_;
  std::vector<int64_t> offset_of_;
  std::vector<Bucket> buckets_;
  std::vector<float> flat_;
  Stats stats_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> packed_;  // bucket handed to the thread this step
  size_t done_ = 0;           // buckets [0, done_) summed this step (the thread goes in index order)
  bool stop_ = false;
  bool busy_ = false;         // the thread is inside a collective
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace alpha::dist
