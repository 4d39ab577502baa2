// Move-only RAII owners for device-level Vulkan objects, one class per object type
// (DeviceHandle<VkBuffer> = Buffer, ...), and factories that create them or throw a typed VkError.
#pragma once
#include <volk.h>

#include <span>
#include <utility>

#include "vk/check.h"

namespace alpha::vk {

template <class H> struct HandleTraits;  // destroy(VkDevice, H) per handle type
#define ALPHA_VK_HANDLE(Type, destroy_call)                                       \
  template <> struct HandleTraits<Type> {                                         \
    static void destroy(VkDevice d, Type h) { destroy_call(d, h, nullptr); }      \
  };
ALPHA_VK_HANDLE(VkBuffer, vkDestroyBuffer)
ALPHA_VK_HANDLE(VkDeviceMemory, vkFreeMemory)
ALPHA_VK_HANDLE(VkShaderModule, vkDestroyShaderModule)
ALPHA_VK_HANDLE(VkDescriptorSetLayout, vkDestroyDescriptorSetLayout)
ALPHA_VK_HANDLE(VkPipelineLayout, vkDestroyPipelineLayout)
ALPHA_VK_HANDLE(VkPipeline, vkDestroyPipeline)
ALPHA_VK_HANDLE(VkDescriptorPool, vkDestroyDescriptorPool)
ALPHA_VK_HANDLE(VkCommandPool, vkDestroyCommandPool)
ALPHA_VK_HANDLE(VkSemaphore, vkDestroySemaphore)
ALPHA_VK_HANDLE(VkQueryPool, vkDestroyQueryPool)
ALPHA_VK_HANDLE(VkCuModuleNVX, vkDestroyCuModuleNVX)
ALPHA_VK_HANDLE(VkCuFunctionNVX, vkDestroyCuFunctionNVX)
#undef ALPHA_VK_HANDLE

// Owns one object of a VkDevice; the device must outlive it (owners hold the Device by shared_ptr).
template <class H>
class DeviceHandle {
 public:
  DeviceHandle() = default;
  DeviceHandle(VkDevice d, H h) : dev_(d), h_(h) {}
  DeviceHandle(const DeviceHandle&) = delete;
  DeviceHandle& operator=(const DeviceHandle&) = delete;
  DeviceHandle(DeviceHandle&& o) noexcept : dev_(o.dev_), h_(std::exchange(o.h_, VK_NULL_HANDLE)) {}
  DeviceHandle& operator=(DeviceHandle&& o) noexcept {
    if (this != &o) {
      reset();
      dev_ = o.dev_;
      h_ = std::exchange(o.h_, VK_NULL_HANDLE);
    }
    return *this;
  }
  ~DeviceHandle() { reset(); }
  void reset() {
    if (h_ != VK_NULL_HANDLE) HandleTraits<H>::destroy(dev_, h_);
    h_ = VK_NULL_HANDLE;
  }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != VK_NULL_HANDLE; }

 private:
  VkDevice dev_ = VK_NULL_HANDLE;
  H h_ = VK_NULL_HANDLE;
};

using Buffer = DeviceHandle<VkBuffer>;
using DeviceMemory = DeviceHandle<VkDeviceMemory>;
using ShaderModule = DeviceHandle<VkShaderModule>;
using DescriptorSetLayout = DeviceHandle<VkDescriptorSetLayout>;
using PipelineLayout = DeviceHandle<VkPipelineLayout>;
using Pipeline = DeviceHandle<VkPipeline>;
using DescriptorPool = DeviceHandle<VkDescriptorPool>;
using CommandPool = DeviceHandle<VkCommandPool>;
using Semaphore = DeviceHandle<VkSemaphore>;
using QueryPool = DeviceHandle<VkQueryPool>;
using CuModule = DeviceHandle<VkCuModuleNVX>;
using CuFunction = DeviceHandle<VkCuFunctionNVX>;

// Factories: create or throw (VK_CHECK).
Buffer make_buffer(VkDevice d, VkDeviceSize size, VkBufferUsageFlags usage);
// device_address: VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT (buffers bound to it have device addresses).
DeviceMemory allocate_memory(VkDevice d, VkDeviceSize size, uint32_t type_index, bool device_address = false);
ShaderModule make_shader_module(VkDevice d, std::span<const uint32_t> words);
DescriptorSetLayout make_storage_set_layout(VkDevice d, uint32_t bindings);  // bindings 0..n-1, storage
PipelineLayout make_pipeline_layout(VkDevice d, VkDescriptorSetLayout set, uint32_t push_size);
// capture_stats: VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR (the device enabled pipeline executable properties).
Pipeline make_compute_pipeline(VkDevice d, VkPipelineLayout layout, VkShaderModule module,
                               std::span<const uint32_t> spec_constants, bool capture_stats = false);  // ids 0..n-1, all uint32
DescriptorPool make_descriptor_pool(VkDevice d, uint32_t max_sets, uint32_t storage_descriptors);
CommandPool make_command_pool(VkDevice d, uint32_t queue_family);
Semaphore make_timeline_semaphore(VkDevice d, uint64_t initial);

}  // namespace alpha::vk
