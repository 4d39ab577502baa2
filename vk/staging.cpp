#include "vk/staging.h"

#include <fmt/format.h>

#include "vk/fault.h"

namespace alpha::vk {

StagingRing::StagingRing(std::shared_ptr<Device> dev, VkDeviceSize capacity)
    : dev_(std::move(dev)), capacity_(capacity) {
  buffer_ = make_buffer(dev_->get(), capacity_, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev_->get(), buffer_.get(), &req);
  const auto& mp = dev_->memory_properties();
  const VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int pick = -1;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    const auto flags = mp.memoryTypes[i].propertyFlags;
    if (!(req.memoryTypeBits & (1u << i)) || (flags & need) != need) continue;
    if (pick < 0 || (flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)) pick = static_cast<int>(i);  // cached: fast reads
    if (flags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) break;
  }
  if (pick < 0) throw VkError("[vk] no host-visible coherent memory type for staging", VK_ERROR_FEATURE_NOT_PRESENT);
  try {
    ALPHA_VK_FAULT_POINT(staging, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory");
    memory_ = allocate_memory(dev_->get(), req.size, static_cast<uint32_t>(pick));
  } catch (const OutOfMemoryError& e) {  // name size and heap, as the device-local pool does
    const uint32_t heap = mp.memoryTypes[pick].heapIndex;
    throw OutOfMemoryError(fmt::format("[vk] out of memory: cannot allocate the {}-byte staging ring on heap {} "
                                       "(host-visible, {} bytes, budget {} bytes): {}",
                                       req.size, heap, mp.memoryHeaps[heap].size, dev_->heap_budget(heap), e.what()),
                           e.result());
  }
  VK_CHECK(vkBindBufferMemory(dev_->get(), buffer_.get(), memory_.get(), 0));
  void* p = nullptr;
  VK_CHECK(vkMapMemory(dev_->get(), memory_.get(), 0, VK_WHOLE_SIZE, 0, &p));
  mapped_ = static_cast<std::byte*>(p);
}

std::optional<StagingRing::Slice> StagingRing::try_allocate(VkDeviceSize n, uint64_t value) {
  n = (n + 15) / 16 * 16;  // keeps every slice offset 16-byte aligned for copies
  if (n > capacity_) return std::nullopt;
  VkDeviceSize at;
  if (live_.empty()) {
    at = 0;
  } else {
    const VkDeviceSize head = live_.back().offset + live_.back().size, tail = live_.front().offset;
    if (head > tail) {  // live region is [tail, head): free at the end, then the start
      if (head + n <= capacity_) at = head;
      else if (n <= tail) at = 0;
      else return std::nullopt;
    } else {  // wrapped: live is [tail, cap) + [0, head); free is [head, tail)
      if (head + n <= tail) at = head;
      else return std::nullopt;
    }
  }
  live_.push_back({at, n, value});
  return Slice{at, mapped_ + at};
}

void StagingRing::retire(uint64_t completed) {
  while (!live_.empty() && live_.front().value <= completed) live_.pop_front();
}

}  // namespace alpha::vk
