// Chooses where a run computes: "cpu", "auto" (a real Vulkan GPU when one exists, else the CPU), "vulkan"
// (any Vulkan device, software ones included; an error if none) or "vulkan:N". ALPHA_DEVICE overrides the
// config's value. While a DeviceScope lives, its backend is the dispatcher's active backend.
#pragma once
#include <memory>
#include <string>

#include "core/backend.h"

namespace alpha {

class DeviceScope {
 public:
  explicit DeviceScope(const std::string& config_device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  const std::string& description() const { return description_; }  // e.g. "vulkan: NVIDIA H100 (discrete)"
  bool gpu() const { return backend_ != nullptr; }
  void sync();  // waits for queued GPU work (timing points)

 private:
  std::unique_ptr<Backend> backend_;
  std::string description_;
};

}  // namespace alpha
