// Device memory: a sub-allocating Allocator (large device-local slabs, first-fit free lists with
// coalescing, aligned offsets), a BufferPool that recycles freed blocks by size class, and GpuBuffer, the
// shared handle to one block that kernels bind and the lazy queue keeps alive while a submission uses it.
//
// Budget: new slabs are refused once the heap's usage would pass Device::heap_budget(); the pool then
// drops its cached blocks and retries, and if that fails throws OutOfMemoryError naming size and heap.
#pragma once
#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "vk/device.h"
#include "vk/handles.h"

namespace alpha::vk {

class Allocator {
 public:
  struct Block {
    uint32_t slab = 0;
    VkDeviceSize offset = 0, size = 0;
  };
  // Slabs of slab_size; requests over slab_size / 2 get a dedicated slab, freed when the block is.
  Allocator(std::shared_ptr<Device> dev, VkDeviceSize slab_size = VkDeviceSize{64} << 20);
  std::optional<Block> allocate(VkDeviceSize size);  // nullopt: over budget or the driver refused
  void free(const Block& b);
  VkBuffer buffer(uint32_t slab) const { return slabs_[slab].buffer.get(); }
  VkDeviceAddress address(uint32_t slab) const { return slabs_[slab].address; }  // 0 unless features().nvx_ptx
  uint32_t heap() const { return heap_; }
  VkDeviceSize alignment() const { return alignment_; }
  VkDeviceSize used_bytes() const { return slab_bytes_; }  // device memory held in slabs
  std::string heap_str() const;                            // "heap 0 (device-local, 2.0 GiB, budget ...)"
  const std::string& last_failure() const { return last_failure_; }  // why the last new slab was refused
  const std::shared_ptr<Device>& device() const { return dev_; }

 private:
  struct Slab {
    DeviceMemory memory;
    Buffer buffer;
    VkDeviceSize size = 0;
    VkDeviceAddress address = 0;
    bool dedicated = false;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  };
  std::optional<uint32_t> new_slab(VkDeviceSize size, bool dedicated);

  std::shared_ptr<Device> dev_;
  VkDeviceSize slab_size_, alignment_;
  uint32_t type_index_ = 0, heap_ = 0;
  VkDeviceSize slab_bytes_ = 0;
  std::string last_failure_;
  std::vector<Slab> slabs_;  // a freed dedicated slab leaves an empty entry, reused by the next one
};

class BufferPool;

// One block of device memory, bound to kernels as (buffer, offset, size). Freed blocks go back to the
// pool when the last owner (a Tensor's storage, or an in-flight submission) lets go.
class GpuBuffer {
 public:
  GpuBuffer(std::shared_ptr<BufferPool> pool, Allocator::Block block, VkBuffer buffer, VkDeviceSize size)
      : pool_(std::move(pool)), block_(block), buffer_(buffer), size_(size) {}
  ~GpuBuffer();
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;

  VkBuffer buffer() const { return buffer_; }
  VkDeviceSize offset() const { return block_.offset; }
  VkDeviceSize size() const { return size_; }  // bytes requested (the block may be larger)
  VkDeviceAddress address() const;              // the device address of offset(); needs features().nvx_ptx

  // Hazard tracking for the lazy queue (LazyQueue epochs): last barrier epoch that wrote / read it.
  uint64_t write_epoch = 0, read_epoch = 0;
  uint64_t retained_by = 0;  // timeline value of the recording that already holds a reference

 private:
  std::shared_ptr<BufferPool> pool_;
  Allocator::Block block_;
  VkBuffer buffer_;
  VkDeviceSize size_;
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  struct Stats {
    int64_t hits = 0;    // acquire served from a recycled block
    int64_t misses = 0;  // acquire that went to the allocator
    int64_t cached_blocks = 0;
    VkDeviceSize cached_bytes = 0;
  };
  explicit BufferPool(std::shared_ptr<Allocator> alloc) : alloc_(std::move(alloc)) {}
  std::shared_ptr<GpuBuffer> acquire(VkDeviceSize bytes);  // throws OutOfMemoryError
  void trim();  // returns every cached block to the allocator
  const Stats& stats() const { return stats_; }
  Allocator& allocator() { return *alloc_; }
  static VkDeviceSize size_class(VkDeviceSize bytes);  // rounding that makes blocks reusable

 private:
  friend class GpuBuffer;
  void release(const Allocator::Block& b);

  std::shared_ptr<Allocator> alloc_;
  std::unordered_map<VkDeviceSize, std::vector<Allocator::Block>> free_;  // size class -> blocks
  Stats stats_;
};

}  // namespace alpha::vk
