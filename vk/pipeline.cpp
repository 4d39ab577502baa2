#include "vk/pipeline.h"

#include <fmt/format.h>

#include "spirv/kernels.h"
#include "vk/fault.h"

namespace alpha::vk {

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
  e.pipeline = make_compute_pipeline(dev_->get(), lit->second.layout.get(), mit->second.get(), spec);
  e.view = {e.pipeline.get(), lit->second.layout.get(), lit->second.set.get(), bindings, push_size};
  return pipelines_.emplace(std::move(key), std::move(e)).first->second.view;
}

}  // namespace alpha::vk
