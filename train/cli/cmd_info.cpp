// `alpha info`: what the Vulkan backend sees — every Vulkan device, the one a config's `device` (or ALPHA_DEVICE)
// picks, its features and limits, and the dispatch thresholds in effect. Without a Vulkan loader or device it
// says so and exits 0: the CPU path needs neither.
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "cli/cli.h"
#include "config/config.h"
#include "loop/device.h"
#include "vk/backend.h"
#include "vk/device.h"

namespace alpha {

namespace {

constexpr const char* kInfoHelp = R"(usage: alpha info [CONFIG] [--set key=value]... [--device SPEC]

Lists the Vulkan devices, the device a run would use (config key `device`, default "auto"; ALPHA_DEVICE
overrides it; --device SPEC overrides both) with its features and limits, and the dispatch thresholds
(dispatch.threshold, dispatch.matmul_threshold, or the dispatch.profile `alpha calibrate` wrote;
ALPHA_GPU_MIN_WORK overrides them).
)";

std::string env_or(const char* name, const char* fallback) {
  const char* e = std::getenv(name);
  return e && *e ? e : fallback;
}

}  // namespace

int cmd_info(const std::vector<std::string>& args) {
  std::string config_path, device_arg;
  std::vector<std::string> overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kInfoHelp, stdout);
      return kExitOk;
    } else if (a == "--set" && i + 1 < args.size()) {
      overrides.push_back(args[++i]);
    } else if (a == "--device" && i + 1 < args.size()) {
      device_arg = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      throw ConfigError(fmt::format("[config] unknown option \"{}\" for info (see alpha info --help)", a));
    } else {
      ALPHA_CHECK(config_path.empty(), ConfigError, "[config] more than one config file: \"{}\" and \"{}\"", config_path, a);
      config_path = a;
    }
  }
  const Config cfg = config_path.empty() ? load_config_text("{}", overrides, "<defaults>") : load_config(config_path, overrides);

  std::printf("alpha %s\n\nVulkan devices:\n", ALPHA_VERSION);
  const std::vector<std::string> devices = vk::Device::list();
  if (devices.empty()) std::printf("  no Vulkan device (or no Vulkan loader)\n");
  for (const std::string& d : devices) std::printf("  %s\n", d.c_str());

  std::string spec = cfg.device;
  std::string source = config_path.empty() ? "default" : "config";
  if (!env_or("ALPHA_DEVICE", "").empty()) {
    spec = env_or("ALPHA_DEVICE", "");
    source = "ALPHA_DEVICE";
  }
  if (!device_arg.empty()) {
    spec = device_arg;
    source = "--device";
    setenv("ALPHA_DEVICE", device_arg.c_str(), 1);  // DeviceScope lets the environment win over its argument
  }
  std::printf("\ndevice \"%s\" (%s) -> ", spec.c_str(), source.c_str());
  try {
    DeviceScope scope(cfg.device, cfg.dispatch.threshold, cfg.dispatch.matmul_threshold, false, cfg.dispatch.profile);
    std::printf("%s\n", scope.description().c_str());
    if (auto* be = dynamic_cast<vk::VulkanBackend*>(scope.backend())) {
      std::printf("%s\n", be->runtime().device().describe().c_str());
      std::printf("\ndispatch profile: %s\n", scope.dispatch_profile_path().empty()
                                                   ? "none (dispatch.profile; `alpha calibrate` writes one)"
                                                   : scope.dispatch_profile_path().c_str());
      std::printf("dispatch thresholds (ops at least this big run on the GPU):\n");
      for (int c = 0; c < be->class_count(); ++c) {
        const auto cls = static_cast<OpClass>(c);
        const int64_t t = be->threshold(cls);
        std::printf("  %-14s %s %s\n", op_class_name(cls),
                    t == std::numeric_limits<int64_t>::max() ? "never" : std::to_string(t).c_str(),
                    cls == OpClass::matmul ? "flops" : "elements");
      }
      auto text = [](int64_t t) { return t == kAutoThreshold ? std::string("auto") : std::to_string(t); };
      std::printf("  (config: dispatch.threshold %s, dispatch.matmul_threshold %s; ALPHA_GPU_MIN_WORK=%s, "
                  "ALPHA_VK_CPU_OPS=%s)\n",
                  text(cfg.dispatch.threshold).c_str(), text(cfg.dispatch.matmul_threshold).c_str(),
                  env_or("ALPHA_GPU_MIN_WORK", "unset").c_str(), env_or("ALPHA_VK_CPU_OPS", "unset").c_str());
    }
  } catch (const ConfigError&) {
    throw;  // a bad dispatch.profile: exit 2 like any config error
  } catch (const Error& e) {
    std::printf("none: %s\n", e.what());
  }
  std::printf("\nALPHA_VK_CHECK (re-run GPU ops on the CPU): %s\n", gpu_check_enabled() ? "on" : "off");
  return kExitOk;
}

}  // namespace alpha
