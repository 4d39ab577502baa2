#include "vk/pipeline.h"

#include <fmt/format.h>

#include "spirv/kernels.h"
#include "vk/fault.h"

namespace alpha::vk {

namespace {
// Every statistic of the pipeline's executables as text (NVIDIA: register count, shared and local memory...).
std::map<std::string, std::string> read_stats(VkDevice d, VkPipeline p) {
  std::map<std::string, std::string> out;
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, nullptr, p};
  uint32_t n = 0;
  if (vkGetPipelineExecutablePropertiesKHR(d, &pi, &n, nullptr) != VK_SUCCESS) return out;
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, nullptr, p, e};
    uint32_t m = 0;
    if (vkGetPipelineExecutableStatisticsKHR(d, &ei, &m, nullptr) != VK_SUCCESS) continue;
    VkPipelineExecutableStatisticKHR blank{};
    blank.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    std::vector<VkPipelineExecutableStatisticKHR> st(m, blank);
    if (vkGetPipelineExecutableStatisticsKHR(d, &ei, &m, st.data()) != VK_SUCCESS) continue;
    for (const auto& s : st) {
      std::string v;
      switch (s.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: v = s.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: v = std::to_string(s.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: v = std::to_string(s.value.u64); break;
        default: v = fmt::format("{}", s.value.f64);
      }
      out[s.name] = v;
    }
  }
  return out;
}
}  // namespace

std::map<std::string, std::string> PipelineCache::executable_stats(const std::string& kernel) const {
  auto it = exec_stats_.find(kernel);
  return it == exec_stats_.end() ? std::map<std::string, std::string>{} : it->second;
}

const ComputePipeline& PipelineCache::get(const std::string& kernel, std::span<const uint32_t> spec,
                                          uint32_t bindings, uint32_t push_size) {
  Key key{kernel, std::vector<uint32_t>(spec.begin(), spec.end()), bindings, push_size};
  if (auto it = pipelines_.find(key); it != pipelines_.end()) {
    ++stats_.hits;
    return it->second.view;
  }
  ++stats_.misses;
  auto mit = modules_.find(kernel);
  if (mit == modules_.end()) {
    const spirv::Blob* blob = spirv::find_blob(kernel);
    if (!blob) throw VkError(fmt::format("[vk] unknown kernel '{}'", kernel), VK_ERROR_UNKNOWN);
    // A coopmat kernel's KHR twin (spirv/nv2khr.h) where the device enabled the extension: same kernel, same name.
    // Attention's twins (and any twin converting between uses) also need NV_cooperative_matrix2's conversions,
    // which ALPHA_VK_KHR_ATTENTION=0 leaves off.
    const auto& f = dev_->features();
    if (f.khr_coopmat_f16)
      if (const spirv::Blob* khr = spirv::find_blob(kernel + "_khr")) {
        const bool needs_conversions =
            kernel.rfind("attention", 0) == 0 || spirv::declares_capability(*khr, spirv::kCapConversionsNV);
        if (!needs_conversions || f.coopmat2_conversions) blob = khr;
      }
    mit = modules_.emplace(kernel, make_shader_module(dev_->get(), {blob->words, blob->count})).first;
  }
  auto lit = layouts_.find({bindings, push_size});
  if (lit == layouts_.end()) {
    Layout l;
    l.set = make_storage_set_layout(dev_->get(), bindings);
    l.layout = make_pipeline_layout(dev_->get(), l.set.get(), push_size);
    lit = layouts_.emplace(std::make_pair(bindings, push_size), std::move(l)).first;
  }
  Entry e;
  ALPHA_VK_FAULT_POINT(pipeline, VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkCreateComputePipelines");
  const bool capture = dev_->features().pipeline_stats;
  e.pipeline = make_compute_pipeline(dev_->get(), lit->second.layout.get(), mit->second.get(), spec, capture);
  if (capture && !exec_stats_.count(kernel)) exec_stats_[kernel] = read_stats(dev_->get(), e.pipeline.get());
  e.view = {e.pipeline.get(), lit->second.layout.get(), lit->second.set.get(), bindings, push_size};
  return pipelines_.emplace(std::move(key), std::move(e)).first->second.view;
}

}  // namespace alpha::vk
