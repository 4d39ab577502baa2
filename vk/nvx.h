// PTX kernels through VK_NVX_binary_import (NVIDIA drivers): the module ptx/ embeds, loaded once per device (the
// driver compiles the PTX for its GPU), and its functions by name; LazyQueue::launch_cu records their launches.
#pragma once
#include <map>
#include <string>

#include "vk/device.h"
#include "vk/handles.h"

namespace alpha::vk {

class PtxModule {
 public:
  explicit PtxModule(const Device& dev);  // throws VkError when the driver refuses the module
  PtxModule(const PtxModule&) = delete;
  PtxModule& operator=(const PtxModule&) = delete;
  VkCuFunctionNVX function(const std::string& name);  // created on first use; throws VkError

 private:
  VkDevice dev_;
  CuModule module_;
  std::map<std::string, CuFunction> functions_;
};

}  // namespace alpha::vk
