// The staging ring: one persistently mapped host-visible buffer that uploads are copied into and
// read-backs land in. Slices are handed out in ring order and tagged with the timeline value of the
// submission that uses them; a slice is reused only after that value has completed.
#pragma once
#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include "vk/device.h"
#include "vk/handles.h"

namespace alpha::vk {

class StagingRing {
 public:
  struct Slice {
    VkDeviceSize offset;
    std::byte* ptr;
  };
  StagingRing(std::shared_ptr<Device> dev, VkDeviceSize capacity);
  // nullopt when the ring is full: the caller retires completed values (or waits) and retries.
  std::optional<Slice> try_allocate(VkDeviceSize n, uint64_t value);
  void retire(uint64_t completed);  // frees slices whose value has completed
  bool empty() const { return live_.empty(); }
  uint64_t oldest_value() const { return live_.front().value; }
  VkBuffer buffer() const { return buffer_.get(); }
  VkDeviceSize capacity() const { return capacity_; }

 private:
  struct Live {
    VkDeviceSize offset, size;
    uint64_t value;
  };
  std::shared_ptr<Device> dev_;
  VkDeviceSize capacity_;
  DeviceMemory memory_;
  Buffer buffer_;
  std::byte* mapped_ = nullptr;
  std::deque<Live> live_;  // in allocation order
};

}  // namespace alpha::vk
