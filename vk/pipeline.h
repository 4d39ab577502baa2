// Compute pipelines built lazily per (kernel variant, specialization constants) and cached for the
// process; set and pipeline layouts are shared by kernels with the same binding count and push size.
#pragma once
#include <volk.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "vk/device.h"
#include "vk/handles.h"

namespace alpha::vk {

struct ComputePipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_size = 0;
};

class PipelineCache {
 public:
  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;  // pipelines built
  };
  explicit PipelineCache(std::shared_ptr<Device> dev) : dev_(std::move(dev)) {}
  // kernel: a spirv/ variant name. Throws VkError for an unknown kernel.
  const ComputePipeline& get(const std::string& kernel, std::span<const uint32_t> spec, uint32_t bindings,
                             uint32_t push_size);
  const Stats& stats() const { return stats_; }
  // The driver's statistics of a built kernel variant ("Register Count": "168", ...), captured when the device
  // enabled them (DeviceFeatures::pipeline_stats); empty otherwise. First pipeline of that variant.
  std::map<std::string, std::string> executable_stats(const std::string& kernel) const;

 private:
  struct Layout {
    DescriptorSetLayout set;
    PipelineLayout layout;
  };
  struct Entry {
    Pipeline pipeline;
    ComputePipeline view;
  };
  using Key = std::tuple<std::string, std::vector<uint32_t>, uint32_t, uint32_t>;

  std::shared_ptr<Device> dev_;  // first member: destroyed last
  std::map<std::string, ShaderModule> modules_;
  std::map<std::pair<uint32_t, uint32_t>, Layout> layouts_;  // (bindings, push size)
  std::map<Key, Entry> pipelines_;
  std::map<std::string, std::map<std::string, std::string>> exec_stats_;  // by kernel variant
  Stats stats_;
};

}  // namespace alpha::vk
