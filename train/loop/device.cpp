#include "loop/device.h"

#include <cstdlib>

#include <fmt/format.h>

#include "loop/calibrate.h"
#include "dist/comm.h"
#include "vk/backend.h"
#include "vk/check.h"

namespace alpha {

DeviceScope::DeviceScope(const std::string& config_device, int64_t threshold, int64_t matmul_threshold,
                         bool profile, const std::string& dispatch_profile) {
  std::string spec = config_device;
  if (const char* e = std::getenv("ALPHA_DEVICE"); e && *e) spec = e;
  if (spec == "cpu") {
    description_ = "cpu";
    return;
  }
  vk::RuntimeOptions opts;
  if (spec == "auto") {
    opts.device.allow_cpu = false;  // lavapipe is slower than the CPU path: auto never picks it
  } else if (spec == "vulkan") {
    opts.device.allow_cpu = true;
  } else if (spec.starts_with("vulkan:")) {
    const std::string n = spec.substr(7);
    char* end = nullptr;
    const long idx = std::strtol(n.c_str(), &end, 10);
    ALPHA_CHECK(!n.empty() && *end == '\0' && idx >= 0 && idx < 1000, ValueError,
                "[device] \"{}\" is not cpu, auto, vulkan or vulkan:N", spec);
    opts.device.index = static_cast<int>(idx);
  } else {
    throw ValueError(fmt::format("[device] \"{}\" is not cpu, auto, vulkan or vulkan:N", spec));
  }
  opts.device.local_rank = dist::World::local_rank();  // MPI ranks on one host spread over its GPUs
  opts.device.validation = std::getenv("ALPHA_VK_VALIDATION") && std::string(std::getenv("ALPHA_VK_VALIDATION")) != "0";
  try {
    auto be = std::make_unique<vk::VulkanBackend>(opts);
    // "auto": every op on a hardware GPU (an op sent to the CPU waits for the GPU and copies its inputs
    // back: GPT-2 124M on an H200, 130 vs 86 ms per step); size thresholds on a CPU-type device (lavapipe).
    const bool cpu_type = be->runtime().device().features().type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (threshold == kAutoThreshold) threshold = cpu_type ? int64_t{1} << 20 : 0;
    if (matmul_threshold == kAutoThreshold) matmul_threshold = cpu_type ? int64_t{1} << 24 : 0;
    be->configure_thresholds(threshold, matmul_threshold);
    dispatch_profile_path_ = use_dispatch_profile(*be, dispatch_profile);  // before the backend goes live
    profiling_ = profile && be->set_profiling(true);
    description_ = be->name();
    backend_ = std::move(be);
    set_active_backend(backend_.get());
  } catch (const vk::VkError& e) {
    // auto falls back to the CPU on any failure to bring Vulkan up: no device, or a loader without a driver
    // (vkCreateInstance -> VK_ERROR_INCOMPATIBLE_DRIVER).
    if (spec != "auto") throw;
    description_ = fmt::format("cpu (auto: no Vulkan GPU: {})", e.what());
  }
}

DeviceScope::~DeviceScope() {
  if (backend_) {
    if (active_backend() == backend_.get()) set_active_backend(nullptr);
  }
}

void DeviceScope::sync() {
  if (auto* be = dynamic_cast<vk::VulkanBackend*>(backend_.get())) be->sync();
}

}  // namespace alpha
