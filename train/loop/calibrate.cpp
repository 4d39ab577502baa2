// Dispatch profiles (train/loop/calibrate.h): the crossover rule, where profiles live, reading and applying them.
// The measuring side (`alpha calibrate`) is train/cli/cmd_calibrate.cpp.
#include "loop/calibrate.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/json_limits.h"
#include "vk/backend.h"

namespace alpha {

int64_t crossover_work(std::vector<CalibSample> samples) {
  std::sort(samples.begin(), samples.end(), [](const CalibSample& a, const CalibSample& b) { return a.work > b.work; });
  int64_t best = kNeverWork;
  // From the largest work down, one group of equal works at a time: stop at the first group the GPU does not win.
  for (size_t i = 0; i < samples.size();) {
    size_t j = i;
    bool wins = true;
    for (; j < samples.size() && samples[j].work == samples[i].work; ++j) wins = wins && samples[j].gpu_s < samples[j].cpu_s;
    if (!wins) break;
    best = samples[i].work;
    i = j;
  }
  return best;
}

std::string sanitize_device_name(const std::string& name) {
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 128 && std::isalnum(c)) out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "device" : out;
}

std::string default_profile_path(const std::string& device_name) {
  std::filesystem::path dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = x;
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::filesystem::path(h) / ".cache";
  else dir = ".cache";
  return (dir / "alpha" / ("dispatch-" + sanitize_device_name(device_name) + ".json")).string();
}

namespace {

using nlohmann::json;

bool op_class_from_name(const std::string& name, int class_count, OpClass& out) {
  for (int c = 0; c < class_count; ++c)
    if (name == op_class_name(static_cast<OpClass>(c))) {
      out = static_cast<OpClass>(c);
      return true;
    }
  return false;
}

// Op classes the enum has: op_class_name answers "?" past the last one.
int known_class_count() {
  int n = 0;
  while (n < 64 && std::string(op_class_name(static_cast<OpClass>(n))) != "?") ++n;
  return n;
}

}  // namespace

DispatchProfile load_dispatch_profile(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return ConfigError(fmt::format("[dispatch] profile \"{}\" {} (dispatch.profile; `alpha calibrate` writes one)", path, what));
  };
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) throw bad("cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.size() > (size_t{16} << 20)) throw bad("is larger than 16 MiB");
  if (json_nesting_depth(text) > kMaxJsonDepth) throw bad(fmt::format("nests deeper than {} levels", kMaxJsonDepth));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw bad(fmt::format("is not valid JSON (truncated?): {}", e.what()));
  }
  if (!j.is_object()) throw bad("is not a JSON object");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
    throw bad("has no \"version\": 1");
  if (!j.contains("device") || !j["device"].is_string() || j["device"].get<std::string>().empty())
    throw bad("has no \"device\" name");
  if (!j.contains("thresholds") || !j["thresholds"].is_object() || j["thresholds"].empty())
    throw bad("has no \"thresholds\" object");
  DispatchProfile p;
  p.path = path;
  p.device = j["device"].get<std::string>();
  const int n = known_class_count();
  for (const auto& [name, v] : j["thresholds"].items()) {
    OpClass cls{};
    if (!op_class_from_name(name, n, cls)) throw bad(fmt::format("names an unknown op class \"{}\"", name));
    if (v.is_string() && v.get<std::string>() == "never") p.thresholds[cls] = kNeverWork;
    else if (v.is_number_integer() && v.get<int64_t>() >= 0) p.thresholds[cls] = v.get<int64_t>();
    else throw bad(fmt::format("has a bad threshold for \"{}\": {} (want an integer >= 0 or \"never\")", name, v.dump()));
  }
  return p;
}

void apply_dispatch_profile(vk::VulkanBackend& be, const DispatchProfile& p) {
  const std::string here = be.runtime().device().features().name;
  ALPHA_CHECK(p.device == here, ConfigError,
              "[dispatch] profile \"{}\" was measured on \"{}\" but this run uses \"{}\": run `alpha calibrate` on this "
              "device or set dispatch.profile to \"\"",
              p.path, p.device, here);
  std::map<OpClass, int64_t> usable;
  for (const auto& [cls, w] : p.thresholds)
    if (static_cast<int>(cls) < be.class_count()) usable[cls] = w;
  be.configure_class_thresholds(usable);
}

std::string use_dispatch_profile(vk::VulkanBackend& be, const std::string& setting) {
  if (setting.empty()) return "";
  std::string path = setting;
  if (setting == "auto") {
    const std::string dev = be.runtime().device().features().name;
    path = default_profile_path(dev);
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "[dispatch] no calibration profile for \"%s\" at %s (run `alpha calibrate`): using "
                   "dispatch.threshold / dispatch.matmul_threshold\n", dev.c_str(), path.c_str());
      return "";
    }
  }
  apply_dispatch_profile(be, load_dispatch_profile(path));
  return path;
}

}  // namespace alpha
