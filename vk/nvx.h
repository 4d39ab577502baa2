// PTX kernels through VK_NVX_binary_import (NVIDIA drivers): the module ptx/ embeds, loaded once per device (the
// driver compiles the PTX for its GPU), and its functions by name; LazyQueue::launch_cu records their launches.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "vk/device.h"
#include "vk/handles.h"

namespace alpha::vk {

class PtxModule {
 public:
  // The module ptx::matmul_module(sm); throws VkError when the driver refuses it (sm 90 on a GPU before Hopper).
  PtxModule(const Device& dev, int sm);
  PtxModule(const PtxModule&) = delete;
  PtxModule& operator=(const PtxModule&) = delete;
  VkCuFunctionNVX function(const std::string& name);  // created on first use; throws VkError

 private:
  VkDevice dev_;
  CuModule module_;
  std::map<std::string, CuFunction> functions_;
};

}  // namespace alpha::vk
