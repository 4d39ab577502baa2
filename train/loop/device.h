// Chooses where a run computes: "cpu", "auto" (a real Vulkan GPU when one exists, else the CPU), "vulkan"
// (any Vulkan device, software ones included; an error if none) or "vulkan:N". ALPHA_DEVICE overrides the
// config's value. While a DeviceScope lives, its backend is the dispatcher's active backend.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/backend.h"
#include "config/config.h"

namespace alpha {

class DeviceScope {
 public:
  // Thresholds: dispatch.threshold (elements) and dispatch.matmul_threshold (flops) of the config, or
  // kAutoThreshold (train/config/config.h): 0 on a hardware GPU, the defaults below on a CPU-type Vulkan device;
  // profile: metrics.profile (per-kernel GPU timestamps, when the device has them); dispatch_profile:
  // dispatch.profile ("" | "auto" | a path: per-class thresholds from `alpha calibrate`, train/loop/calibrate.h).
  explicit DeviceScope(const std::string& config_device, int64_t threshold = int64_t{1} << 20,
                       int64_t matmul_threshold = int64_t{1} << 24, bool profile = false,
                       const std::string& dispatch_profile = "");
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  const std::string& description() const { return description_; }  // e.g. "vulkan: NVIDIA H100 (discrete)"
  bool gpu() const { return backend_ != nullptr; }
  Backend* backend() const { return backend_.get(); }  // nullptr on the CPU
  void sync();  // waits for queued GPU work (timing points)
  bool profiling() const { return profiling_; }  // timestamps are being collected
  const std::string& dispatch_profile_path() const { return dispatch_profile_path_; }  // "" = none loaded

 private:
  std::unique_ptr<Backend> backend_;
  std::string description_;
  bool profiling_ = false;
  std::string dispatch_profile_path_;
};

}  // namespace alpha
