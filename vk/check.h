// Typed Vulkan errors and VK_CHECK: every failing call throws, naming the call, file:line and VkResult.
#pragma once
#include <volk.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace alpha::vk {

// Any Vulkan failure. result() is the VkResult that caused it (VK_ERROR_UNKNOWN for our own checks).
class VkError : public Error {
 public:
  VkError(const std::string& msg, VkResult r) : Error(msg), result_(r) {}
  VkResult result() const { return result_; }

 private:
  VkResult result_;
};
class NoDeviceError : public VkError { using VkError::VkError; };       // no loader / no usable device
class DeviceLostError : public VkError { using VkError::VkError; };     // VK_ERROR_DEVICE_LOST
class OutOfMemoryError : public VkError { using VkError::VkError; };    // host/device OOM, over budget

const char* result_name(VkResult r);  // "VK_ERROR_DEVICE_LOST"
// Throws the typed error for r (DeviceLostError, OutOfMemoryError or VkError).
[[noreturn]] void throw_result(VkResult r, const char* call, const char* file, int line);

#define VK_CHECK(call)                                                                  \
  do {                                                                                 \
    const VkResult vk_check_r_ = (call);                                               \
    if (vk_check_r_ != VK_SUCCESS) ::alpha::vk::throw_result(vk_check_r_, #call, __FILE__, __LINE__); \
  } while (0)

}  // namespace alpha::vk
