#include "vk/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "vk/check.h"

namespace alpha::vk {

namespace {

void init_loader() {
  static const VkResult r = volkInitialize();  // dlopen(libvulkan.so.1) once per process
  if (r != VK_SUCCESS)
    throw NoDeviceError("[vk] the Vulkan loader (libvulkan.so.1) was not found: install a Vulkan driver", r);
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  auto* counts = static_cast<ValidationCounts*>(user);
  if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    ++counts->errors;
    std::fprintf(stderr, "[vk validation error] %s\n", data->pMessage);
  } else if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    ++counts->warnings;
    std::fprintf(stderr, "[vk validation warning] %s\n", data->pMessage);
  }
  return VK_FALSE;
}

bool has_extension(const std::vector<VkExtensionProperties>& exts, std::string_view name) {
  for (const auto& e : exts)
    if (name == e.extensionName) return true;
  return false;
}

int type_rank(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
    default: return 0;
  }
}

std::vector<VkPhysicalDevice> enumerate(VkInstance inst) {
  uint32_t n = 0;
  VK_CHECK(vkEnumeratePhysicalDevices(inst, &n, nullptr));
  std::vector<VkPhysicalDevice> devs(n);
  VK_CHECK(vkEnumeratePhysicalDevices(inst, &n, devs.data()));
  return devs;
}

// ALPHA_DEVICE = "vulkan:N" or "N" -> N; -1 when unset or auto|cpu|vulkan; throws on garbage.
int env_device_index() {
  const char* e = std::getenv("ALPHA_DEVICE");
  if (!e || !*e) return -1;
  std::string_view s(e);
  if (s == "auto" || s == "cpu" || s == "vulkan") return -1;  // not an index: train/loop/device.cpp reads these
  if (s.starts_with("vulkan:")) s.remove_prefix(7);
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') throw VkError(fmt::format("[vk] ALPHA_DEVICE='{}' is not 'vulkan:N'", e), VK_ERROR_UNKNOWN);
    v = v * 10 + (c - '0');
  }
  return s.empty() ? -1 : v;
}

bool env_flag(const char* name) {
  const char* e = std::getenv(name);
  return e && *e && std::string_view(e) != "0";
}

}  // namespace

const char* device_type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

Device::Device(DeviceOptions opts) {
  init_loader();
  validation_ = opts.validation || env_flag("ALPHA_VK_VALIDATION");
  const int env_index = env_device_index();
  try {
    create_instance(validation_);
    pick_physical(env_index >= 0 ? env_index : opts.index, opts.allow_cpu, opts.local_rank);
    create_device();
  } catch (...) {
    release();  // the destructor does not run for a constructor that throws
    throw;
  }
}

Device::~Device() { release(); }

void Device::release() {
  if (abandoned_) return;  // vkDeviceWaitIdle could block forever on a hung GPU
  if (device_) {
    vkDeviceWaitIdle(device_);
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (messenger_) destroy_messenger_(instance_, messenger_, nullptr);
  messenger_ = VK_NULL_HANDLE;
  if (instance_) vkDestroyInstance(instance_, nullptr);
  instance_ = VK_NULL_HANDLE;
}

void Device::create_instance(bool validation) {
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "alpha";
  app.pEngineName = "alpha";
  app.apiVersion = VK_API_VERSION_1_2;  // timeline semaphores and 16-bit storage are core in 1.2
  std::vector<const char*> layers, exts;
  if (validation) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> props(n);
    vkEnumerateInstanceLayerProperties(&n, props.data());
    bool found = false;
    for (const auto& p : props) found |= std::string_view(p.layerName) == "VK_LAYER_KHRONOS_validation";
    if (!found)
      throw VkError("[vk] validation requested but VK_LAYER_KHRONOS_validation is not installed",
                    VK_ERROR_LAYER_NOT_PRESENT);
    layers.push_back("VK_LAYER_KHRONOS_validation");
    exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  // Validation also checks synchronization: a missing barrier between dependent dispatches is an error.
  const VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT vf{};
  vf.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT;
  vf.enabledValidationFeatureCount = 1;
  vf.pEnabledValidationFeatures = enables;
  if (validation) {
    info.pNext = &vf;
    exts.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
  }
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(exts.size());
  info.ppEnabledExtensionNames = exts.data();
  VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
  // Instance-level loading only: device calls go through the loader's trampolines, which stay correct
  // when several Devices (tests) coexist.
  volkLoadInstance(instance_);
  if (validation) {
    VkDebugUtilsMessengerCreateInfoEXT m{};
    m.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT;
    m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
    m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                    VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    m.pfnUserCallback = on_message;
    m.pUserData = counts_.get();
    VK_CHECK(vkCreateDebugUtilsMessengerEXT(instance_, &m, nullptr, &messenger_));
    destroy_messenger_ = vkDestroyDebugUtilsMessengerEXT;  // kept: another Device may repoint the global
  }
}

void Device::pick_physical(int index, bool allow_cpu, int local_rank) {
  const auto devs = enumerate(instance_);
  if (devs.empty())
    throw NoDeviceError("[vk] no Vulkan device found (no driver? CI uses lavapipe: "
                        "VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json)", VK_ERROR_INITIALIZATION_FAILED);
  if (index >= 0) {
    if (index >= static_cast<int>(devs.size()))
      throw NoDeviceError(fmt::format("[vk] device index {} out of range: {} Vulkan device(s)", index, devs.size()),
                          VK_ERROR_INITIALIZATION_FAILED);
    index_ = index;
  } else {
    int best_rank = 0;
    for (size_t i = 0; i < devs.size(); ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devs[i], &p);
      const int r = type_rank(p.deviceType);
      if (r == 1 && !allow_cpu) continue;
      if (p.apiVersion < VK_API_VERSION_1_2) continue;
      if (r > best_rank) best_rank = r, index_ = static_cast<int>(i);
    }
    // Several ranks on one host: rank k takes the k-th device of the best type (wrapping: ranks share GPUs).
    std::vector<int> best;
    for (size_t i = 0; i < devs.size() && index_ >= 0; ++i) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devs[i], &p);
      if (type_rank(p.deviceType) == best_rank && p.apiVersion >= VK_API_VERSION_1_2) best.push_back(static_cast<int>(i));
    }
    if (!best.empty()) index_ = best[static_cast<size_t>(local_rank) % best.size()];
    if (index_ < 0)
      throw NoDeviceError(fmt::format("[vk] no usable Vulkan GPU among {} device(s) (a CPU device such as lavapipe "
                                      "is used only when asked for: device vulkan:N or allow_cpu)", devs.size()),
                          VK_ERROR_INITIALIZATION_FAILED);
  }
  physical_ = devs[static_cast<size_t>(index_)];
}

namespace {
// The one shape the coopmat matmul kernels use: 16x16x16, f16 A/B, f32 C and result, subgroup scope (the NV and
// KHR property structs name the result type differently; their enum values agree).
template <class P>
bool matmul_shape(const P& p, uint32_t result_type) {
  return p.MSize == 16 && p.NSize == 16 && p.KSize == 16 && uint32_t(p.AType) == VK_COMPONENT_TYPE_FLOAT16_NV &&
         uint32_t(p.BType) == VK_COMPONENT_TYPE_FLOAT16_NV && uint32_t(p.CType) == VK_COMPONENT_TYPE_FLOAT32_NV &&
         result_type == VK_COMPONENT_TYPE_FLOAT32_NV && uint32_t(p.scope) == VK_SCOPE_SUBGROUP_NV;
}

// True when the driver lists that shape.
bool nv_coopmat_f16_shape(VkPhysicalDevice pd) {
  if (!vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) return false;
  uint32_t n = 0;
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, nullptr) != VK_SUCCESS) return false;
  VkCooperativeMatrixPropertiesNV blank{};
  blank.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  std::vector<VkCooperativeMatrixPropertiesNV> props(n, blank);
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &n, props.data()) != VK_SUCCESS) return false;
  for (const auto& p : props)
    if (matmul_shape(p, p.DType)) return true;
  return false;
}
// VK_KHR_cooperative_matrix is newer than Debian's Vulkan headers: its property query and structs by hand
// (the registry's layouts; component types and scopes share the NV enums' values).
struct KhrCoopmatProperties {
  VkStructureType sType;
  void* pNext;
  uint32_t MSize, NSize, KSize;
  uint32_t AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  uint32_t scope;
};
constexpr auto kKhrCoopmatPropertiesType = static_cast<VkStructureType>(1000506001);
constexpr auto kKhrCoopmatFeaturesType = static_cast<VkStructureType>(1000506000);
using KhrCoopmatQuery = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, KhrCoopmatProperties*);
// VK_NV_cooperative_matrix2's features (also newer than the headers): only the conversions between uses are used.
struct Coopmat2Features {
  VkStructureType sType;
  void* pNext;
  VkBool32 workgroup_scope, flexible_dimensions, reductions, conversions, per_element, tensor_addressing, block_loads;
};
constexpr auto kCoopmat2FeaturesType = static_cast<VkStructureType>(1000593000);

// The same shape as nv_coopmat_f16_shape, listed by the KHR extension's query.
bool khr_coopmat_f16_shape(VkInstance inst, VkPhysicalDevice pd) {
  const auto query = reinterpret_cast<KhrCoopmatQuery>(
      vkGetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!query) return false;
  uint32_t n = 0;
  if (query(pd, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<KhrCoopmatProperties> props(n, KhrCoopmatProperties{kKhrCoopmatPropertiesType, nullptr, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  if (query(pd, &n, props.data()) != VK_SUCCESS) return false;
  for (const auto& p : props)
    if (matmul_shape(p, p.ResultType)) return true;
  return false;
}
}  // namespace

bool hopper_name(std::string_view name) {
  for (const char* h : {"H100", "H200", "H800", "H20", "GH200"})
    if (name.find(h) != std::string_view::npos) return true;
  return false;
}

void Device::create_device() {
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(physical_, &props);
  if (props.apiVersion < VK_API_VERSION_1_2)
    throw NoDeviceError(fmt::format("[vk] {} supports Vulkan {}.{} only; 1.2 is needed", props.deviceName,
                                    VK_API_VERSION_MAJOR(props.apiVersion), VK_API_VERSION_MINOR(props.apiVersion)),
                        VK_ERROR_INCOMPATIBLE_DRIVER);
  uint32_t n = 0;
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n, nullptr));
  std::vector<VkExtensionProperties> exts(n);
  VK_CHECK(vkEnumerateDeviceExtensionProperties(physical_, nullptr, &n, exts.data()));
  VkPhysicalDeviceVulkan11Properties p11{};
  p11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES;
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV psm{};  // the SM count (PTX tiles' waves); chained where listed
  psm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV;
  if (has_extension(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) p11.pNext = &psm;
  VkPhysicalDeviceProperties2 p2{};
  p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  p2.pNext = &p11;
  vkGetPhysicalDeviceProperties2(physical_, &p2);
  VkPhysicalDeviceVulkan11Features f11{};
  f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features f12{};
  f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  f11.pNext = &f12;
  VkPhysicalDeviceFaultFeaturesEXT ffault{};  // chained only when the extension exists
  ffault.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT;
  if (has_extension(exts, VK_EXT_DEVICE_FAULT_EXTENSION_NAME)) f12.pNext = &ffault;
  VkPhysicalDeviceFeatures2 f2{};
  f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  f2.pNext = &f11;
  vkGetPhysicalDeviceFeatures2(physical_, &f2);

  auto& f = features_;
  f.name = props.deviceName;
  f.type = props.deviceType;
  f.api_version = props.apiVersion;
  f.fp16_arithmetic = f12.shaderFloat16;
  f.storage_16bit = f11.storageBuffer16BitAccess;
  f.timeline_semaphores = f12.timelineSemaphore;
  f.memory_budget = has_extension(exts, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  f.device_fault = ffault.deviceFault == VK_TRUE;
  f.nv_cooperative_matrix = has_extension(exts, "VK_NV_cooperative_matrix");
  f.khr_cooperative_matrix = has_extension(exts, "VK_KHR_cooperative_matrix");
  // Register counts and spills per pipeline (`alpha bench gpu --tiles`): opt-in, capturing them slows pipeline builds.
  const char* ps = std::getenv("ALPHA_VK_PIPELINE_STATS");
  f.pipeline_stats = ps && std::string_view(ps) == "1" &&
                     has_extension(exts, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  // Per-step clocks and SM ids of the GEMM tiles (`alpha bench gpu --tiles` with ALPHA_VK_TILE_TRACE=1): opt-in.
  const char* tt = std::getenv("ALPHA_VK_TILE_TRACE");
  f.tile_trace = tt && std::string_view(tt) == "1" && has_extension(exts, VK_KHR_SHADER_CLOCK_EXTENSION_NAME) &&
                 has_extension(exts, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  // The PTX GEMMs: on by default on Hopper GPUs, whose GPU suite runs them (scripts/gpu/ptx_check.sh); elsewhere
  // opt-in. ALPHA_VK_PTX=1 turns them on, =0 off.
  const char* ptx = std::getenv("ALPHA_VK_PTX");
  bool want_ptx = hopper_name(props.deviceName);
  if (ptx && *ptx) {
    if (std::string_view(ptx) != "0" && std::string_view(ptx) != "1")
      throw ValueError(fmt::format("[vk] ALPHA_VK_PTX='{}' is not 0 (off) or 1 (on)", ptx));
    want_ptx = std::string_view(ptx) == "1";
  }
  f.nvx_ptx = has_extension(exts, VK_NVX_BINARY_IMPORT_EXTENSION_NAME) && f12.bufferDeviceAddress && want_ptx &&
              !validation_;
  f.subgroup_size = p11.subgroupSize;
  f.sm_count = psm.shaderSMCount;
  f.subgroup_shuffle = (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (p11.subgroupSupportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  f.nv_coopmat_f16 = f.nv_cooperative_matrix && f.fp16_arithmetic && f.storage_16bit && f12.vulkanMemoryModel &&
                    f.subgroup_size == 32 && nv_coopmat_f16_shape(physical_);
  // The KHR twins of the coopmat GEMMs (spirv/nv2khr.h) where the driver has the extension: B fragments without
  // per-product register transposes. ALPHA_VK_KHR_COOPMAT=0 keeps the NV kernels (A/B comparisons), and so does
  // the validation layer, whose Debian build predates the KHR extension (it validates the NV kernels instead).
  const char* khr = std::getenv("ALPHA_VK_KHR_COOPMAT");
  f.khr_coopmat_f16 = f.nv_coopmat_f16 && f.khr_cooperative_matrix && !(khr && std::string_view(khr) == "0") &&
                      !validation_ && khr_coopmat_f16_shape(instance_, physical_);
  // Attention's KHR twins turn f32 accumulators into f16 A operands: NV_cooperative_matrix2's conversions.
  // ALPHA_VK_KHR_ATTENTION=0 keeps their NV kernels (A/B comparisons).
  const char* katt = std::getenv("ALPHA_VK_KHR_ATTENTION");
  if (f.khr_coopmat_f16 && has_extension(exts, "VK_NV_cooperative_matrix2") &&
      !(katt && std::string_view(katt) == "0")) {
    Coopmat2Features c2{kCoopmat2FeaturesType, nullptr, 0, 0, 0, 0, 0, 0, 0};
    VkPhysicalDeviceFeatures2 q{};
    q.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    q.pNext = &c2;
    vkGetPhysicalDeviceFeatures2(physical_, &q);
    f.coopmat2_conversions = c2.conversions == VK_TRUE;
  }
  f.shared_memory_bytes = props.limits.maxComputeSharedMemorySize;
  f.max_workgroup_invocations = props.limits.maxComputeWorkGroupInvocations;
  f.max_push_constants = props.limits.maxPushConstantsSize;
  f.max_storage_buffers_per_stage = props.limits.maxPerStageDescriptorStorageBuffers;
  f.max_storage_buffer_range = props.limits.maxStorageBufferRange;
  f.min_storage_buffer_alignment = props.limits.minStorageBufferOffsetAlignment;
  {
    VkPhysicalDeviceMaintenance3Properties m3{};
    m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
    VkPhysicalDeviceProperties2 q{};
    q.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    q.pNext = &m3;
    vkGetPhysicalDeviceProperties2(physical_, &q);
    f.max_allocation_size = m3.maxMemoryAllocationSize;
  }
  if (!f.timeline_semaphores)
    throw NoDeviceError(fmt::format("[vk] {} lacks timeline semaphores (needed by the lazy queue)", f.name),
                        VK_ERROR_FEATURE_NOT_PRESENT);
  vkGetPhysicalDeviceMemoryProperties(physical_, &mem_props_);

  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &qn, nullptr);
  std::vector<VkQueueFamilyProperties> qf(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &qn, qf.data());
  int family = -1;
  for (uint32_t i = 0; i < qn; ++i) {  // prefer a compute queue without graphics (async compute family)
    if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
    if (family < 0 || !(qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) family = static_cast<int>(i);
  }
  if (family < 0)
    throw NoDeviceError(fmt::format("[vk] {} has no compute queue", f.name), VK_ERROR_FEATURE_NOT_PRESENT);
  queue_family_ = static_cast<uint32_t>(family);

  const float prio = 1.0f;
  VkDeviceQueueCreateInfo qi{};
  qi.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  qi.queueFamilyIndex = queue_family_;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan11Features e11{};
  e11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
  VkPhysicalDeviceVulkan12Features e12{};
  e12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
  e11.pNext = &e12;
  e11.storageBuffer16BitAccess = f.storage_16bit;
  e12.timelineSemaphore = VK_TRUE;
  e12.shaderFloat16 = f.fp16_arithmetic;
  std::vector<const char*> dev_exts;
  if (f.nvx_ptx) {  // buffers get device addresses (vk/memory.cpp), the PTX kernels' pointer arguments
    dev_exts.push_back(VK_NVX_BINARY_IMPORT_EXTENSION_NAME);
    e12.bufferDeviceAddress = VK_TRUE;
  }
  if (f.memory_budget) dev_exts.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  VkPhysicalDeviceFaultFeaturesEXT efault{};  // lost-device reports (vk/fault.h)
  efault.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FAULT_FEATURES_EXT;
  efault.deviceFault = VK_TRUE;
  if (f.device_fault) dev_exts.push_back(VK_EXT_DEVICE_FAULT_EXTENSION_NAME);
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{};
  cm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  if (f.nv_coopmat_f16) {  // the matmul coopmat kernels need the extension and its feature bit
    dev_exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    cm.cooperativeMatrix = VK_TRUE;
    e12.vulkanMemoryModel = VK_TRUE;  // glslang declares it for the subgroup scope of the coopmat types
    e12.pNext = &cm;
  }
  struct {
    VkStructureType sType;
    void* pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
  } kcm{kKhrCoopmatFeaturesType, nullptr, VK_TRUE, VK_FALSE};
  if (f.khr_coopmat_f16) {  // prepended like the features below
    dev_exts.push_back("VK_KHR_cooperative_matrix");
    kcm.pNext = e12.pNext;
    e12.pNext = &kcm;
  }
  Coopmat2Features c2{kCoopmat2FeaturesType, nullptr, 0, 0, 0, VK_TRUE, 0, 0, 0};
  if (f.coopmat2_conversions) {  // prepended like the features below
    dev_exts.push_back("VK_NV_cooperative_matrix2");
    c2.pNext = e12.pNext;
    e12.pNext = &c2;
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR pexec{};
  pexec.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR;
  pexec.pipelineExecutableInfo = VK_TRUE;
  if (f.pipeline_stats) {  // prepended like the fault features below
    dev_exts.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    pexec.pNext = e12.pNext;
    e12.pNext = &pexec;
  }
  VkPhysicalDeviceShaderClockFeaturesKHR fclock{};
  fclock.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR;
  fclock.shaderSubgroupClock = VK_TRUE;
  VkPhysicalDeviceShaderSMBuiltinsFeaturesNV fsm{};
  fsm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV;
  fsm.shaderSMBuiltins = VK_TRUE;
  if (f.tile_trace) {  // prepended like the fault features below
    dev_exts.push_back(VK_KHR_SHADER_CLOCK_EXTENSION_NAME);
    dev_exts.push_back(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    fsm.pNext = e12.pNext;
    fclock.pNext = &fsm;
    e12.pNext = &fclock;
  }
  if (f.device_fault) {  // prepended: other features may already hang off e12
    efault.pNext = e12.pNext;
    e12.pNext = &efault;
  }
  VkDeviceCreateInfo di{};
  di.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  di.pNext = &e11;
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.enabledExtensionCount = static_cast<uint32_t>(dev_exts.size());
  di.ppEnabledExtensionNames = dev_exts.data();
  VK_CHECK(vkCreateDevice(physical_, &di, nullptr, &device_));
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
}

VkDeviceSize Device::heap_budget(uint32_t heap) const {
  if (features_.memory_budget) {
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b{};
    b.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT;
    VkPhysicalDeviceMemoryProperties2 p{};
    p.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2;
    p.pNext = &b;
    vkGetPhysicalDeviceMemoryProperties2(physical_, &p);
    return b.heapBudget[heap];
  }
  return mem_props_.memoryHeaps[heap].size / 10 * 8;
}

std::string Device::describe() const {
  const auto& f = features_;
  return fmt::format(
      "device {}: {} ({}), Vulkan {}.{}.{}\n"
      "  fp16 arithmetic: {}, 16-bit storage: {}, timeline semaphores: {}, memory budget ext: {}, device fault ext: {}\n"
      "  subgroup size: {}, shared memory: {} B, max workgroup invocations: {}, push constants: {} B\n"
      "  max storage buffer range: {} B, storage buffers per stage: {}, cooperative matrix: NV {} (f16 16x16x16 used by matmul: {}), KHR {} (matmul's KHR kernels: {})\n"
      "  validation: {}",
      index_, f.name, device_type_name(f.type), VK_API_VERSION_MAJOR(f.api_version),
      VK_API_VERSION_MINOR(f.api_version), VK_API_VERSION_PATCH(f.api_version), f.fp16_arithmetic, f.storage_16bit,
      f.timeline_semaphores, f.memory_budget, f.device_fault, f.subgroup_size, f.shared_memory_bytes, f.max_workgroup_invocations,
      f.max_push_constants, f.max_storage_buffer_range, f.max_storage_buffers_per_stage, f.nv_cooperative_matrix, f.nv_coopmat_f16, f.khr_cooperative_matrix, f.khr_coopmat_f16,
      validation_ ? "on" : "off");
}

std::vector<std::string> Device::list() {
  std::vector<std::string> out;
  try {
    init_loader();
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    info.pApplicationInfo = &app;
    VkInstance inst = VK_NULL_HANDLE;
    if (vkCreateInstance(&info, nullptr, &inst) != VK_SUCCESS) return out;
    // Local function pointers: volkLoadInstance would repoint the globals a live Device uses.
    auto load = [&](const char* name) { return vkGetInstanceProcAddr(inst, name); };
    auto enum_devs = reinterpret_cast<PFN_vkEnumeratePhysicalDevices>(load("vkEnumeratePhysicalDevices"));
    auto get_props = reinterpret_cast<PFN_vkGetPhysicalDeviceProperties>(load("vkGetPhysicalDeviceProperties"));
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(load("vkDestroyInstance"));
    uint32_t n = 0;
    enum_devs(inst, &n, nullptr);
    std::vector<VkPhysicalDevice> devs(n);
    enum_devs(inst, &n, devs.data());
    for (uint32_t i = 0; i < n; ++i) {
      VkPhysicalDeviceProperties p;
      get_props(devs[i], &p);
      out.push_back(fmt::format("{}: {} ({})", i, p.deviceName, device_type_name(p.deviceType)));
    }
    destroy(inst, nullptr);
  } catch (const NoDeviceError&) {
  }
  return out;
}

}  // namespace alpha::vk
