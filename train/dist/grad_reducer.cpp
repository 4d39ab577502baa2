#include "dist/grad_reducer.h"

#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "dist/comm.h"

namespace alpha::dist {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
}  // namespace

GradReducer::GradReducer(std::vector<Tensor> params, int64_t bucket_bytes) : params_(std::move(params)) {
  const size_t n = params_.size();
  bucket_of_.resize(n);
  offset_of_.resize(n);
  int64_t offset = 0;
  for (size_t k = n; k-- > 0;) {  // reverse registration order: the last layers' grads are final first
    const Tensor& p = params_[k];
    ALPHA_CHECK(p.dtype() == DType::f32, dist::DistError, "[dist] parameter {} is {}: the all-reduce sums f32 gradients",
                k, p.str());
    index_[p.impl()] = k;
    if (buckets_.empty() || buckets_.back().size * 4 >= bucket_bytes) buckets_.push_back(Bucket{{}, offset, 0, 0});
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.size += p.numel();
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = offset;
    offset += p.numel();
  }
  for (Bucket& b : buckets_) b.pending = b.params.size();
  flat_.resize(static_cast<size_t>(offset));
  packed_.assign(buckets_.size(), false);
  thread_ = std::thread([this] { comm_loop(); });
}

GradReducer::~GradReducer() {
  bool busy = false;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    busy = busy_;
  }
  cv_.notify_all();
  // An error unwound the step while the thread waits in a collective the other ranks will never join: joining
  // would hang this rank before main's MPI_Abort ends the job, so the thread is left to die with the process.
  if (busy) thread_.detach();
  else thread_.join();
}

void GradReducer::on_ready(const Tensor& leaf) {
  auto it = index_.find(leaf.impl());
  if (it == index_.end()) return;  // not a parameter (e.g. a test's extra leaf)
  const size_t b = bucket_of_[it->second];
  if (--buckets_[b].pending == 0) pack(b);
}

void GradReducer::pack(size_t b) {
  const auto t0 = Clock::now();
  for (size_t k : buckets_[b].params) {
    float* dst = flat_.data() + offset_of_[k];
    const Tensor g = params_[k].grad();
    const auto n = static_cast<size_t>(params_[k].numel());
    if (!g.defined()) {
      std::memset(dst, 0, n * sizeof(float));
      continue;
    }
    ALPHA_CHECK(g.dtype() == DType::f32 && g.shape() == params_[k].shape(), dist::DistError,
                "[dist] gradient {} of parameter {} is not f32 of the parameter's shape", g.str(), k);
    const Tensor c = g.contiguous();
    std::memcpy(dst, c.data<float>(), n * sizeof(float));  // a GPU gradient is read back here (staging)
  }
  stats_.copy_ms += ms_since(t0);
  {
    std::lock_guard lock(mu_);
    packed_[b] = true;
  }
  cv_.notify_all();
}

void GradReducer::comm_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (done_ < buckets_.size() && packed_[done_]); });
    if (stop_) return;
    const Bucket& b = buckets_[done_];
    busy_ = true;
    lock.unlock();
    const auto t0 = Clock::now();
    int64_t bytes = 0;
    std::exception_ptr err;
    try {
      bytes = allreduce_sum_f32(flat_.data() + b.offset, b.size, "gradient all-reduce");
    } catch (...) {
      err = std::current_exception();
    }
    const double ms = ms_since(t0);
    lock.lock();
    busy_ = false;
    stats_.comm_ms += ms;
    stats_.bytes += bytes;
    if (err && !error_) error_ = err;
    ++done_;
    cv_.notify_all();
  }
}

void GradReducer::finish() {
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!packed_[b]) pack(b);  // parameters the hook did not report (no gradient, or no hook this step)
  const auto t0 = Clock::now();
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ == buckets_.size(); });
    stats_.wait_ms = ms_since(t0);
    done_ = 0;
    packed_.assign(buckets_.size(), false);
  }
  for (Bucket& b : buckets_) b.pending = b.params.size();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  const auto t1 = Clock::now();
  for (size_t k = 0; k < params_.size(); ++k) {
    Tensor g = Tensor::empty(params_[k].shape(), DType::f32);
    std::memcpy(g.mutable_data<float>(), flat_.data() + offset_of_[k], static_cast<size_t>(g.numel()) * sizeof(float));
    params_[k].set_grad(g);
  }
  stats_.copy_ms += ms_since(t1);
}

}  // namespace alpha::dist
