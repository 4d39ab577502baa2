// `alpha calibrate` and dispatch profiles: per op class, the smallest op size (the dispatcher's `work`: elements,
// or 2*M*N*K flops for matmul) from which this machine's GPU beats its CPU, measured once and saved as JSON
// (docs/config.md, dispatch.profile). A loaded profile replaces dispatch.threshold / dispatch.matmul_threshold
// per class; ALPHA_GPU_MIN_WORK / ALPHA_VK_CPU_OPS still win. Profile errors are ConfigErrors (exit 2).
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/backend.h"

namespace alpha {

namespace vk {
class VulkanBackend;
}

// "Never": the GPU lost at the largest size measured (written as "never" in the profile).
inline constexpr int64_t kNeverWork = std::numeric_limits<int64_t>::max();

// One timed op size: median wall-clock seconds on each side.
struct CalibSample {
  int64_t work = 0;
  double cpu_s = 0, gpu_s = 0;
};

// The smallest measured work w such that the GPU is strictly faster at every measured work >= w (several
// samples may share a work: all must win); kNeverWork when the GPU loses at the largest work. Pure.
int64_t crossover_work(std::vector<CalibSample> samples);

struct DispatchProfile {
  std::string path;                             // where it was read from
  std::string device;                           // the Vulkan device name it was measured on
  std::map<OpClass, int64_t> thresholds;        // kNeverWork = never on the GPU
};

// "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3" (lower-case ASCII letters and digits, '-' between runs).
std::string sanitize_device_name(const std::string& name);
// $XDG_CACHE_HOME/alpha/dispatch-<sanitized>.json, else $HOME/.cache/alpha/... (else ./.cache/alpha/...).
std::string default_profile_path(const std::string& device_name);

// Reads and validates a profile (version 1, device, a threshold per known class): ConfigError naming the
// file and what is wrong when it is missing, truncated or malformed.
DispatchProfile load_dispatch_profile(const std::string& path);

// Applies a profile to a backend: ConfigError naming both devices when it was measured on another device.
void apply_dispatch_profile(vk::VulkanBackend& be, const DispatchProfile& p);

// dispatch.profile for a backend: "" = none (returns ""), "auto" = the default path when that file exists (else a
// one-line notice on stderr and ""), otherwise a path. Returns the path it loaded.
std::string use_dispatch_profile(vk::VulkanBackend& be, const std::string& setting);

// `alpha calibrate [--device vulkan[:N]] [--out PATH] [--quick] [--json]` (train/cli/cli.cpp dispatches here).
int cmd_calibrate(const std::vector<std::string>& args);

}  // namespace alpha
