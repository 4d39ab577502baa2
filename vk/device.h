// The Vulkan device: volk-loaded instance (optionally with validation), physical-device choice, logical
// device with one compute queue, and the detected features/limits the kernels and `alpha info` use.
//
// Choice: ALPHA_DEVICE ("vulkan:N" or "N") overrides options.index; an explicit index picks that device
// whatever its type. Otherwise the best type wins: discrete > integrated > virtual > CPU, and a CPU
// device (lavapipe) is taken only when options.allow_cpu is set. ALPHA_VK_VALIDATION=1 turns validation on.
#pragma once
#include <volk.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace alpha::vk {

// NVIDIA's Hopper data-centre GPUs by device name: the wgmma PTX module (sm_90a) runs there, and the PTX path is on.
bool hopper_name(std::string_view name);

struct DeviceOptions {
  int index = -1;          // -1: choose by type
  bool allow_cpu = false;  // accept a CPU implementation (lavapipe) when choosing by type
  bool validation = false; // VK_LAYER_KHRONOS_validation + a messenger that counts errors
  int local_rank = 0;      // choosing by type: the (local_rank mod count)-th device of the best type (MPI ranks)
};

struct DeviceFeatures {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  uint32_t api_version = 0;
  bool fp16_arithmetic = false;   // shaderFloat16
  bool storage_16bit = false;     // storageBuffer16BitAccess (f16 storage variants)
  bool timeline_semaphores = false;
  bool memory_budget = false;     // VK_EXT_memory_budget
  bool device_fault = false;      // VK_EXT_device_fault (enabled: lost-device reports, vk/fault.h)
  bool nv_cooperative_matrix = false;   // VK_NV_cooperative_matrix present
  bool nv_coopmat_f16 = false;          // ...with a 16x16x16 f16 x f16 -> f32 subgroup shape: matmul's coopmat path
  bool khr_cooperative_matrix = false;  // VK_KHR_cooperative_matrix present
  bool khr_coopmat_f16 = false;         // ...enabled for the GEMMs' KHR twins (spirv/nv2khr.h), same shape as NV
  bool coopmat2_conversions = false;    // VK_NV_cooperative_matrix2's conversions enabled: attention's KHR twins
  bool pipeline_stats = false;           // VK_KHR_pipeline_executable_properties enabled (ALPHA_VK_PIPELINE_STATS=1)
  bool tile_trace = false;  // VK_KHR_shader_clock + VK_NV_shader_sm_builtins enabled (ALPHA_VK_TILE_TRACE=1): GEMM traces
  // VK_NVX_binary_import + bufferDeviceAddress enabled (NVIDIA): the PTX matmul kernels (ptx/, vk/nvx.h) run on
  // buffers' device addresses. On by default on Hopper GPUs (the GPU suite checks them there), else opt-in
  // (ALPHA_VK_PTX=1; =0 off); validation leaves them off (the layer does not know the extension's launches).
  bool nvx_ptx = false;
  uint32_t subgroup_size = 0;
  uint32_t sm_count = 0;                 // VK_NV_shader_sm_builtins' shaderSMCount; 0 = unknown (other vendors)
  bool subgroup_shuffle = false;         // subgroupShuffleXor in compute shaders (attention_cm.comp)
  uint32_t shared_memory_bytes = 0;      // maxComputeSharedMemorySize
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_push_constants = 0;
  uint32_t max_storage_buffers_per_stage = 0;  // maxPerStageDescriptorStorageBuffers
  VkDeviceSize max_storage_buffer_range = 0;
  VkDeviceSize min_storage_buffer_alignment = 0;
  VkDeviceSize max_allocation_size = 0;
};

const char* device_type_name(VkPhysicalDeviceType t);

// Validation messages seen by the debug messenger (only when validation is on).
struct ValidationCounts {
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> warnings{0};
};

class Device {
 public:
  explicit Device(DeviceOptions opts = {});  // throws NoDeviceError / VkError
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Names of all Vulkan devices ("0: NVIDIA H100 (discrete)"); empty when there is no loader/device.
  static std::vector<std::string> list();

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice get() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  int index() const { return index_; }
  const DeviceFeatures& features() const { return features_; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return mem_props_; }
  // Bytes this process may still use on `heap` (VK_EXT_memory_budget when present, else 80% of its size).
  VkDeviceSize heap_budget(uint32_t heap) const;
  bool validation() const { return validation_; }
  int64_t validation_errors() const { return counts_->errors.load(); }
  int64_t validation_warnings() const { return counts_->warnings.load(); }
  std::string describe() const;  // multi-line feature report for `alpha info`
  // The GPU stopped making progress (a wait timed out): never wait for or destroy the device (leaked at exit).
  void abandon() { abandoned_ = true; }

 private:
  void create_instance(bool validation);
  void pick_physical(int index, bool allow_cpu, int local_rank);
  void create_device();
  void release();

  bool validation_ = false;
  bool abandoned_ = false;
  int index_ = -1;
  std::unique_ptr<ValidationCounts> counts_ = std::make_unique<ValidationCounts>();
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  DeviceFeatures features_;
  VkPhysicalDeviceMemoryProperties mem_props_{};
};

}  // namespace alpha::vk
