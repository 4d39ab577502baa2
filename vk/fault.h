// GPU fault handling: fault injection at named points (ALPHA_VK_FAULT), the finite wait timeout
// (ALPHA_VK_TIMEOUT_S) and VK_EXT_device_fault reports. docs/reliability.md lists the guarantees.
//
// ALPHA_VK_FAULT="point:N[,point:N...]": from the Nth pass through `point` on (counted per Runtime, from 1),
// that call site fails the way the real failure does (the same VkResult, so the same typed error and
// message path). Faults stay on once fired, like a real out-of-memory or lost device. Always compiled
// in: a pass costs one counter increment and a branch on a flag.
#pragma once
#include <volk.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "vk/check.h"

namespace alpha::vk {

class Device;

namespace fault {

// Each point sits at one real call site; the comment says which and what it returns there.
enum class Point : uint8_t {
  alloc_slab,       // Allocator::new_slab, vkAllocateMemory of a device-local slab: OUT_OF_DEVICE_MEMORY
  staging,          // StagingRing, vkAllocateMemory of the host-visible ring: OUT_OF_DEVICE_MEMORY
  command_buffer,   // LazyQueue::recording, vkAllocateCommandBuffers: OUT_OF_DEVICE_MEMORY
  descriptor_pool,  // LazyQueue::allocate_set, vkCreateDescriptorPool: OUT_OF_DEVICE_MEMORY
  pipeline,         // PipelineCache::get, vkCreateComputePipelines: OUT_OF_DEVICE_MEMORY
  submit,           // LazyQueue::flush, vkQueueSubmit: DEVICE_LOST
  wait,             // LazyQueue::wait_value, vkWaitSemaphores: DEVICE_LOST
  wait_timeout,     // LazyQueue::wait_value, vkWaitSemaphores: TIMEOUT (the finite wait ran out)
  poll,             // LazyQueue::retire, vkGetSemaphoreCounterValue: DEVICE_LOST
};
inline constexpr std::array<std::string_view, 9> kPointNames = {
    "alloc_slab", "staging", "command_buffer", "descriptor_pool", "pipeline", "submit", "wait", "wait_timeout", "poll"};

// Parses a spec ("" = no faults) and resets all pass counters; throws ValueError naming a bad entry.
void configure(std::string_view spec);
void configure_from_env();  // ALPHA_VK_FAULT; the Runtime's constructor calls it
// Counts one pass through p; true when this pass must fail.
bool fire(Point p);
// r, or the injected result `inject` when p fires (call sites: `r = fault::result(Point::x, r, VK_ERROR_...)`).
inline VkResult result(Point p, VkResult r, VkResult inject) { return fire(p) ? inject : r; }
int64_t passes(Point p);  // passes since the last configure
int64_t fired();          // passes that failed since the last configure
// When the first fault fired (tests measure the time to a clean exit from it).
std::chrono::steady_clock::time_point first_fired_at();

// At a synchronous call site: when `point` fires, throws what VK_CHECK(call) throws for result r.
#define ALPHA_VK_FAULT_POINT(point, r, call)                                                        \
  do {                                                                                              \
    if (::alpha::vk::fault::fire(::alpha::vk::fault::Point::point))                                 \
      ::alpha::vk::throw_result(r, call " (injected by ALPHA_VK_FAULT)", __FILE__, __LINE__);       \
  } while (0)

// Finite host waits: ALPHA_VK_TIMEOUT_S seconds (default 60), in nanoseconds. A wait that runs out is
// treated as a lost device.
uint64_t wait_timeout_ns();

// What VK_EXT_device_fault says about a lost device ("" when the extension is not enabled or says nothing).
std::string device_fault_report(const Device& dev);

}  // namespace fault
}  // namespace alpha::vk
