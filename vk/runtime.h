// Runtime: the pieces one Vulkan backend owns (device, memory pool, lazy queue, pipeline cache) plus the
// glue between Tensors and device buffers that the kernel files (vk/<op>.cpp) use:
//   input(t)   -> the tensor's device buffer, uploaded when the host copy is newer (nullptr: not ours)
//   output()   -> a new tensor whose storage has a device buffer and whose host copy is stale
//   run()      -> records one dispatch of a spirv/ kernel on the lazy queue
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>

#include "core/storage.h"
#include "core/tensor.h"
#include "vk/device.h"
#include "vk/memory.h"
#include "vk/pipeline.h"
#include "vk/queue.h"

namespace alpha::vk {

// The DeviceBuffer core/Storage holds: a pool block plus the queue that orders its transfers.
class VkDeviceBuffer final : public DeviceBuffer {
 public:
  VkDeviceBuffer(std::shared_ptr<LazyQueue> q, std::shared_ptr<GpuBuffer> b) : queue_(std::move(q)), buf_(std::move(b)) {}
  void upload(const void* src, size_t nbytes) override { queue_->upload(buf_, src, nbytes); }
  void download(void* dst, size_t nbytes) override { queue_->download(buf_, dst, nbytes); }  // flushes + waits
  const std::shared_ptr<GpuBuffer>& gpu() const { return buf_; }
  const LazyQueue* queue() const { return queue_.get(); }

 private:
  std::shared_ptr<LazyQueue> queue_;
  std::shared_ptr<GpuBuffer> buf_;
};

struct RuntimeOptions {
  DeviceOptions device;
  LazyQueue::Policy queue;
  VkDeviceSize slab_bytes = VkDeviceSize{64} << 20;
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions opts = {});
  ~Runtime();

  Device& device() { return *dev_; }
  BufferPool& pool() { return *pool_; }
  LazyQueue& queue() { return *queue_; }
  PipelineCache& pipelines() { return *pipelines_; }

  // f32/i32/f64, f16 with 16-bit storage (kernels check dtypes), contiguous, offset 0, non-empty, within one storage binding, not another runtime's buffer.
  bool accepts(const Tensor& t) const;
  std::shared_ptr<GpuBuffer> input(const Tensor& t);
  // Any view (strides, offset) whose storage can live here; input_storage() is its whole storage's buffer.
  bool accepts_storage(const Tensor& t) const;
  std::shared_ptr<GpuBuffer> input_storage(const Tensor& t);
  Tensor output(const Shape& shape, DType dtype = DType::f32);
  static const std::shared_ptr<GpuBuffer>& buffer_of(const Tensor& t);  // t came from output()/input()
  std::shared_ptr<GpuBuffer> scratch(VkDeviceSize bytes) { return pool_->acquire(bytes); }
  std::shared_ptr<GpuBuffer> upload_new(const void* src, size_t nbytes);  // a filled scratch buffer

  // Records kernel `name` with specialization constants `spec` (spec[0] is the workgroup size x).
  // label: the dispatch's name in the per-kernel GPU times when profiling (default: the kernel's name).
  template <class PC>
  void run(const std::string& name, std::span<const uint32_t> spec, std::span<const Binding> bindings,
           const PC& push, std::array<uint32_t, 3> groups, double work, std::string_view label = {}) {
    const ComputePipeline& p = pipelines_->get(name, spec, static_cast<uint32_t>(bindings.size()), sizeof(PC));
    if (count_kernels_) ++kernel_counts_[name];
    queue_->dispatch(p, bindings, &push, groups, work, label.empty() ? std::string_view(name) : label);
  }
  template <class PC>
  void run(const std::string& name, std::initializer_list<uint32_t> spec, std::span<const Binding> bindings,
           const PC& push, std::array<uint32_t, 3> groups, double work, std::string_view label = {}) {
    run(name, std::span<const uint32_t>(spec.begin(), spec.size()), bindings, push, groups, work, label);
  }
  template <class PC>
  void run(const std::string& name, std::initializer_list<uint32_t> spec, std::initializer_list<Binding> bindings,
           const PC& push, std::array<uint32_t, 3> groups, double work, std::string_view label = {}) {
    run(name, spec, std::span<const Binding>(bindings.begin(), bindings.size()), push, groups, work, label);
  }
  // Grid for `groups` 1-D workgroups: x capped at 65535, the rest in y (shaders fold y back in).
  static std::array<uint32_t, 3> grid(uint64_t groups);
  static std::array<uint32_t, 3> grid_for(uint64_t items, uint32_t wg) { return grid((items + wg - 1) / wg); }
  // ALPHA_VK_STATS=1: dispatches per kernel are counted and the destructor prints them with the queue stats.
  const std::map<std::string, int64_t>& kernel_counts() const { return kernel_counts_; }

 private:
  std::shared_ptr<Device> dev_;
  std::shared_ptr<BufferPool> pool_;
  std::unique_ptr<PipelineCache> pipelines_;  // destroyed after the queue, which waits for the device
  std::shared_ptr<LazyQueue> queue_;
  bool count_kernels_ = false;
  std::map<std::string, int64_t> kernel_counts_;
};

}  // namespace alpha::vk
