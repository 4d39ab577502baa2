#include "vk/memory.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

#include "vk/fault.h"

namespace alpha::vk {

namespace {
VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }
constexpr VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
}  // namespace

Allocator::Allocator(std::shared_ptr<Device> dev, VkDeviceSize slab_size) : dev_(std::move(dev)), slab_size_(slab_size) {
  // 256 B covers every device's minStorageBufferOffsetAlignment and keeps vec4 loads aligned.
  alignment_ = std::max<VkDeviceSize>(256, dev_->features().min_storage_buffer_alignment);
  const auto& mp = dev_->memory_properties();
  int best = -1;
  for (uint32_t i = 0; i < mp.memoryTypeCount; ++i) {
    if (!(mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) continue;
    best = static_cast<int>(i);
    break;
  }
  if (best < 0) throw VkError("[vk] no device-local memory type", VK_ERROR_FEATURE_NOT_PRESENT);
  type_index_ = static_cast<uint32_t>(best);
  heap_ = mp.memoryTypes[type_index_].heapIndex;
}

std::string Allocator::heap_str() const {
  const auto& h = dev_->memory_properties().memoryHeaps[heap_];
  return fmt::format("heap {} (device-local, {} bytes, budget {} bytes ({}), {} bytes in slabs)", heap_, h.size,
                     dev_->heap_budget(heap_),
                     dev_->features().memory_budget ? "VK_EXT_memory_budget" : "80% of the heap: no VK_EXT_memory_budget",
                     slab_bytes_);
}

std::optional<uint32_t> Allocator::new_slab(VkDeviceSize size, bool dedicated) {
  if (slab_bytes_ + size > dev_->heap_budget(heap_)) {
    last_failure_ = fmt::format("a new {}-byte slab would pass the budget", size);
    return std::nullopt;
  }
  if (dev_->features().max_allocation_size && size > dev_->features().max_allocation_size) {
    last_failure_ = fmt::format("a {}-byte slab is over maxMemoryAllocationSize", size);
    return std::nullopt;
  }
  Slab s;
  try {
    const bool bda = dev_->features().nvx_ptx;  // the PTX kernels take device addresses (vk/nvx.h)
    s.buffer = make_buffer(dev_->get(), size, bda ? kUsage | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : kUsage);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev_->get(), s.buffer.get(), &req);
    if (!(req.memoryTypeBits & (1u << type_index_))) return std::nullopt;
    ALPHA_VK_FAULT_POINT(alloc_slab, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory");
    s.memory = allocate_memory(dev_->get(), req.size, type_index_, bda);
    VK_CHECK(vkBindBufferMemory(dev_->get(), s.buffer.get(), s.memory.get(), 0));
    if (bda) {
      VkBufferDeviceAddressInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO;
      ai.buffer = s.buffer.get();
      s.address = vkGetBufferDeviceAddress(dev_->get(), &ai);
    }
  } catch (const VkError& e) {  // the driver refused (OOM, or e.g. over maxBufferSize): the caller reports
    if (e.result() == VK_ERROR_DEVICE_LOST) throw;
    last_failure_ = e.what();   // size and heap, with this
    return std::nullopt;
  }
  s.size = size;
  s.dedicated = dedicated;
  s.free[0] = size;
  slab_bytes_ += size;
  for (uint32_t i = 0; i < slabs_.size(); ++i)
    if (!slabs_[i].buffer) {
      slabs_[i] = std::move(s);
      return i;
    }
  slabs_.push_back(std::move(s));
  return static_cast<uint32_t>(slabs_.size() - 1);
}

std::optional<Allocator::Block> Allocator::allocate(VkDeviceSize size) {
  size = align_up(std::max<VkDeviceSize>(size, 1), alignment_);
  if (size > slab_size_ / 2) {
    const auto s = new_slab(size, true);
    if (!s) return std::nullopt;
    slabs_[*s].free.clear();
    return Block{*s, 0, size};
  }
  auto take = [&](uint32_t si) -> std::optional<Block> {
    auto& fl = slabs_[si].free;
    for (auto it = fl.begin(); it != fl.end(); ++it) {  // first fit: offsets stay packed at the low end
      if (it->second < size) continue;
      const Block b{si, it->first, size};
      const VkDeviceSize rest = it->second - size, off = it->first + size;
      fl.erase(it);
      if (rest) fl[off] = rest;
      return b;
    }
    return std::nullopt;
  };
  for (uint32_t i = 0; i < slabs_.size(); ++i)
    if (slabs_[i].buffer && !slabs_[i].dedicated)
      if (auto b = take(i)) return b;
  const auto s = new_slab(slab_size_, false);
  if (!s) return std::nullopt;
  return take(*s);
}

void Allocator::free(const Block& b) {
  Slab& s = slabs_[b.slab];
  if (s.dedicated) {
    slab_bytes_ -= s.size;
    s = Slab{};  // destroys buffer and memory
    return;
  }
  auto [it, ok] = s.free.emplace(b.offset, b.size);
  (void)ok;
  auto next = std::next(it);
  if (next != s.free.end() && it->first + it->second == next->first) {  // merge with the right neighbour
    it->second += next->second;
    s.free.erase(next);
  }
  if (it != s.free.begin()) {  // merge with the left neighbour
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      s.free.erase(it);
    }
  }
}

GpuBuffer::~GpuBuffer() { pool_->release(block_); }

VkDeviceAddress GpuBuffer::address() const { return pool_->allocator().address(block_.slab) + block_.offset; }

VkDeviceSize BufferPool::size_class(VkDeviceSize bytes) {
  // Powers of two with 4 steps per octave: at most 25% slack, and equal-shaped tensors share a class.
  if (bytes <= 256) return 256;
  const VkDeviceSize p = std::bit_floor(bytes);
  const VkDeviceSize step = std::max<VkDeviceSize>(p / 4, 1);
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<GpuBuffer> BufferPool::acquire(VkDeviceSize bytes) {
  const VkDeviceSize cls = align_up(size_class(bytes), alloc_->alignment());  // == the block size
  auto& list = free_[cls];
  Allocator::Block b;
  if (!list.empty()) {
    b = list.back();
    list.pop_back();
    ++stats_.hits;
    --stats_.cached_blocks;
    stats_.cached_bytes -= b.size;
  } else {
    ++stats_.misses;
    auto got = alloc_->allocate(cls);
    if (!got) {
      trim();  // cached blocks of other sizes may free a slab's worth of space
      got = alloc_->allocate(cls);
    }
    if (!got)
      throw OutOfMemoryError(fmt::format("[vk] out of device memory: cannot allocate {} bytes on {}: {}", bytes,
                                         alloc_->heap_str(), alloc_->last_failure()),
                             VK_ERROR_OUT_OF_DEVICE_MEMORY);
    b = *got;
  }
  return std::make_shared<GpuBuffer>(shared_from_this(), b, alloc_->buffer(b.slab), bytes);
}

void BufferPool::release(const Allocator::Block& b) {
  free_[b.size].push_back(b);  // blocks are exactly their (aligned) size class
  ++stats_.cached_blocks;
  stats_.cached_bytes += b.size;
}

void BufferPool::trim() {
  for (auto& [cls, list] : free_)
    for (const auto& b : list) alloc_->free(b);
  free_.clear();
  stats_.cached_blocks = 0;
  stats_.cached_bytes = 0;
}

}  // namespace alpha::vk
