#include "vk/runtime.h"

#include "core/backend.h"
#include "vk/fault.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace alpha::vk {

namespace {
// A number in [1, hi] from the environment, 0 when unset; anything else is refused, naming the variable.
double positive_from_env(const char* name, double hi) {
  const char* e = std::getenv(name);
  if (!e || !*e) return 0;
  char* end = nullptr;
  const double v = std::strtod(e, &end);
  if (*end != '\0' || !(v >= 1 && v <= hi))
    throw ValueError(fmt::format("[vk] {}='{}' is not a number from 1 to {:g}", name, e, hi));
  return v;
}
}  // namespace

Runtime::Runtime(RuntimeOptions opts) {
  fault::configure_from_env();  // ALPHA_VK_FAULT: pass counters start at this runtime
  (void)fault::wait_timeout_ns();  // a bad ALPHA_VK_TIMEOUT_S fails here, not at the first wait
  dev_ = std::make_shared<Device>(opts.device);
  pool_ = std::make_shared<BufferPool>(std::make_shared<Allocator>(dev_, opts.slab_bytes));
  pipelines_ = std::make_unique<PipelineCache>(dev_);
  if (const char* e = std::getenv("ALPHA_VK_DEBUG")) {
    opts.queue.barrier_all = std::strstr(e, "barriers") != nullptr;
    opts.queue.sync_each = std::strstr(e, "sync") != nullptr;
    opts.queue.cu_all_stages = std::strstr(e, "allstages") != nullptr;
  }
  // Submission sizes (tuning sweeps): dispatches and ~flops per submission.
  if (const double v = positive_from_env("ALPHA_VK_MAX_OPS", 1e6); v > 0) opts.queue.max_ops = static_cast<int64_t>(v);
  if (const double v = positive_from_env("ALPHA_VK_MAX_WORK", 1e18); v > 0) opts.queue.max_work = v;
  if (const double v = positive_from_env("ALPHA_VK_RAMP_OPS", 1e6); v > 0) opts.queue.ramp_ops = static_cast<int64_t>(v);
  if (const char* e = std::getenv("ALPHA_VK_SPIN_US"); e && *e) {  // 0 turns spinning off
    opts.queue.spin_wait_us = std::strcmp(e, "0") == 0 ? 0.0 : positive_from_env("ALPHA_VK_SPIN_US", 1e7);
    opts.queue.spin_on_cpu_device = true;
  }
  queue_ = std::make_shared<LazyQueue>(dev_, opts.queue);
  const char* st = std::getenv("ALPHA_VK_STATS");
  count_kernels_ = st && *st && std::strcmp(st, "0") != 0;
}

Runtime::~Runtime() {
  // Tensors may outlive the runtime holding VkDeviceBuffers (they keep the queue and pool alive); make
  // sure nothing is still running before the pipeline cache goes.
  try {
    queue_->sync();
  } catch (...) {  // a failed queue's sync throws without waiting: an injected fault's GPU may still run submissions
    // Still running (hung): the pipelines it may use are leaked rather than destroyed under it.
    if (!queue_->wait_idle_quietly()) (void)pipelines_.release();
  }
  if (count_kernels_) {
    const auto& s = queue_->stats();
    std::string k;
    for (const auto& [name, n] : kernel_counts_) k += fmt::format(" {}={}", name, n);
    std::fprintf(stderr,
                 "[vk stats] submissions %lld dispatches %lld barriers %lld syncs %lld up %.1f MB down %.1f MB "
                 "wait %.3f s, ops gpu %lld cpu %lld\n[vk stats] kernels:%s\n",
                 (long long)s.submissions, (long long)s.dispatches, (long long)s.barriers, (long long)s.syncs,
                 s.bytes_up / 1e6, s.bytes_down / 1e6, s.wait_ns / 1e9, (long long)dispatch_stats().gpu_ops,
                 (long long)dispatch_stats().cpu_ops, k.c_str());
  }
}

bool Runtime::accepts(const Tensor& t) const {
  if (!t.defined()) return false;  // f64 travels as bits (cross-entropy lse); f16 needs 16-bit storage
  if (t.dtype() == DType::f16 && !dev_->features().storage_16bit) return false;
  if (!t.is_contiguous() || t.offset() != 0 || t.numel() == 0) return false;
  return accepts_storage(t);
}

bool Runtime::accepts_storage(const Tensor& t) const {
  if (!t.defined() || t.numel() == 0) return false;
  if (t.dtype() == DType::f16 && !dev_->features().storage_16bit) return false;
  const auto& st = t.storage();
  if (st->nbytes() > dev_->features().max_storage_buffer_range) return false;
  if (st->nbytes() > std::numeric_limits<uint32_t>::max() / 2) return false;  // 32-bit indices in shaders
  if (DeviceBuffer* d = st->device()) {
    const auto* vb = dynamic_cast<const VkDeviceBuffer*>(d);
    if (!vb || vb->queue() != queue_.get()) return false;
  }
  return true;
}

std::shared_ptr<GpuBuffer> Runtime::input(const Tensor& t) {
  const auto& st = t.storage();
  if (!st->device()) st->attach_device(std::make_unique<VkDeviceBuffer>(queue_, pool_->acquire(st->nbytes())), false);
  st->ensure_device_current();  // queues an upload when the host copy is newer
  return buffer_of(t);
}

std::shared_ptr<GpuBuffer> Runtime::input_storage(const Tensor& t) { return input(t); }

Tensor Runtime::output(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  const auto& st = t.storage();
  st->attach_device(std::make_unique<VkDeviceBuffer>(queue_, pool_->acquire(st->nbytes())), false);
  st->mark_device_written();  // the kernel about to be recorded writes it: the host copy is stale
  return t;
}

const std::shared_ptr<GpuBuffer>& Runtime::buffer_of(const Tensor& t) {
  return static_cast<const VkDeviceBuffer*>(t.storage()->device())->gpu();
}

std::shared_ptr<GpuBuffer> Runtime::upload_new(const void* src, size_t nbytes) {
  auto b = pool_->acquire(nbytes);
  queue_->upload(b, src, nbytes);
  return b;
}

std::array<uint32_t, 3> Runtime::grid(uint64_t groups) {
  groups = std::max<uint64_t>(groups, 1);
  const uint64_t x = std::min<uint64_t>(groups, 65535);
  return {static_cast<uint32_t>(x), static_cast<uint32_t>((groups + x - 1) / x), 1};
}

}  // namespace alpha::vk
