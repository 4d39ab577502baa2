#include "vk/check.h"

#include <fmt/format.h>

namespace alpha::vk {

const char* result_name(VkResult r) {
  switch (r) {
#define ALPHA_VK_RESULT(x) case x: return #x;
    ALPHA_VK_RESULT(VK_SUCCESS)
    ALPHA_VK_RESULT(VK_NOT_READY)
    ALPHA_VK_RESULT(VK_TIMEOUT)
    ALPHA_VK_RESULT(VK_EVENT_SET)
    ALPHA_VK_RESULT(VK_EVENT_RESET)
    ALPHA_VK_RESULT(VK_INCOMPLETE)
    ALPHA_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    ALPHA_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    ALPHA_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    ALPHA_VK_RESULT(VK_ERROR_DEVICE_LOST)
    ALPHA_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    ALPHA_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    ALPHA_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    ALPHA_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    ALPHA_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    ALPHA_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    ALPHA_VK_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    ALPHA_VK_RESULT(VK_ERROR_FRAGMENTED_POOL)
    ALPHA_VK_RESULT(VK_ERROR_UNKNOWN)
    ALPHA_VK_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    ALPHA_VK_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    ALPHA_VK_RESULT(VK_ERROR_FRAGMENTATION)
    ALPHA_VK_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
#undef ALPHA_VK_RESULT
    default: return "VK_RESULT_UNKNOWN";
  }
}

void throw_result(VkResult r, const char* call, const char* file, int line) {
  const std::string msg = fmt::format("[vk] {} failed at {}:{}: {} ({})", call, file, line, result_name(r),
                                      static_cast<int>(r));
  if (r == VK_ERROR_DEVICE_LOST) throw DeviceLostError(msg, r);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) throw OutOfMemoryError(msg, r);
  throw VkError(msg, r);
}

}  // namespace alpha::vk
