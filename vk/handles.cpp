#include "vk/handles.h"

#include <vector>

namespace alpha::vk {

Buffer make_buffer(VkDevice d, VkDeviceSize size, VkBufferUsageFlags usage) {
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateBuffer(d, &info, nullptr, &h));
  return Buffer(d, h);
}

DeviceMemory allocate_memory(VkDevice d, VkDeviceSize size, uint32_t type_index, bool device_address) {
  VkMemoryAllocateFlagsInfo flags{};
  flags.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO;
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  if (device_address) info.pNext = &flags;
  info.allocationSize = size;
  info.memoryTypeIndex = type_index;
  VkDeviceMemory h = VK_NULL_HANDLE;
  VK_CHECK(vkAllocateMemory(d, &info, nullptr, &h));
  return DeviceMemory(d, h);
}

ShaderModule make_shader_module(VkDevice d, std::span<const uint32_t> words) {
  VkShaderModuleCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  info.codeSize = words.size() * sizeof(uint32_t);
  info.pCode = words.data();
  VkShaderModule h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateShaderModule(d, &info, nullptr, &h));
  return ShaderModule(d, h);
}

DescriptorSetLayout make_storage_set_layout(VkDevice d, uint32_t bindings) {
  std::vector<VkDescriptorSetLayoutBinding> b(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  info.bindingCount = bindings;
  info.pBindings = b.data();
  VkDescriptorSetLayout h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateDescriptorSetLayout(d, &info, nullptr, &h));
  return DescriptorSetLayout(d, h);
}

PipelineLayout make_pipeline_layout(VkDevice d, VkDescriptorSetLayout set, uint32_t push_size) {
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size};
  VkPipelineLayoutCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  info.setLayoutCount = 1;
  info.pSetLayouts = &set;
  info.pushConstantRangeCount = push_size ? 1 : 0;
  info.pPushConstantRanges = &range;
  VkPipelineLayout h = VK_NULL_HANDLE;
  VK_CHECK(vkCreatePipelineLayout(d, &info, nullptr, &h));
  return PipelineLayout(d, h);
}

Pipeline make_compute_pipeline(VkDevice d, VkPipelineLayout layout, VkShaderModule module,
                               std::span<const uint32_t> spec_constants, bool capture_stats) {
  std::vector<VkSpecializationMapEntry> entries(spec_constants.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(), spec_constants.size_bytes(),
                            spec_constants.data()};
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
  info.layout = layout;
  if (capture_stats) info.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkPipeline h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateComputePipelines(d, VK_NULL_HANDLE, 1, &info, nullptr, &h));
  return Pipeline(d, h);
}

DescriptorPool make_descriptor_pool(VkDevice d, uint32_t max_sets, uint32_t storage_descriptors) {
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, storage_descriptors};
  VkDescriptorPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  info.maxSets = max_sets;
  info.poolSizeCount = 1;
  info.pPoolSizes = &size;
  VkDescriptorPool h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateDescriptorPool(d, &info, nullptr, &h));
  return DescriptorPool(d, h);
}

CommandPool make_command_pool(VkDevice d, uint32_t queue_family) {
  VkCommandPoolCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  info.queueFamilyIndex = queue_family;
  VkCommandPool h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateCommandPool(d, &info, nullptr, &h));
  return CommandPool(d, h);
}

Semaphore make_timeline_semaphore(VkDevice d, uint64_t initial) {
  VkSemaphoreTypeCreateInfo type{};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = initial;
  VkSemaphoreCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  info.pNext = &type;
  VkSemaphore h = VK_NULL_HANDLE;
  VK_CHECK(vkCreateSemaphore(d, &info, nullptr, &h));
  return Semaphore(d, h);
}

}  // namespace alpha::vk
