// `alpha calibrate` and dispatch profiles: the crossover rule (synthetic timings), a --quick calibration on any
// Vulkan device (lavapipe in CI), and dispatch.profile loading: thresholds replaced, other devices and
// malformed files refused with exit 2, "auto" falling back to the config thresholds when there is no profile.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "loop/calibrate.h"
#include "config/config.h"
#include "loop/device.h"
#include "vk/backend.h"

namespace {

using namespace alpha;
using alpha::test::read_file;
using alpha::test::TempDir;
using alpha::test::write_file;
using nlohmann::json;

const char* const kClasses[] = {"elementwise", "reduce", "matmul", "embedding", "layernorm",
                                "gelu", "softmax", "cross_entropy", "dropout"};

// Runs `env alpha args` in a shell; returns the exit code, stdout + stderr in `out`.
int run_alpha(const std::string& args, std::string* out, const std::string& env = "") {
  const std::string cmd = env + (env.empty() ? "" : " ") + ALPHA_BINARY + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) s.append(buf, n);
  const int st = pclose(p);
  if (out) *out = s;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The Vulkan device name the tests' backend (and `--device vulkan`) uses.
std::string device_name() {
  static const std::string name = [] {
    DeviceScope s("vulkan");
    return dynamic_cast<vk::VulkanBackend*>(s.backend())->runtime().device().features().name;
  }();
  return name;
}

// A profile for `device` with thresholds 1000 * (class index + 1), matmul "never".
json synthetic_profile(const std::string& device) {
  json t = json::object();
  for (int c = 0; c < 9; ++c) t[kClasses[c]] = 1000 * (c + 1);
  t["matmul"] = "never";
  return {{"version", 1}, {"device", device}, {"thresholds", t}, {"measurements", json::array()}};
}

// A quick calibration shared by the tests that need a real profile (run once per process).
const json& calibrated(std::string* path_out = nullptr) {
  static TempDir dir("alpha_calib");
  static const std::string path = (dir.path / "p.json").string();
  static const json j = [] {
    std::string out;
    const int rc = run_alpha("calibrate --quick --device vulkan --out " + path, &out);
    INFO(out);
    REQUIRE(rc == 0);
    return json::parse(read_file(path));
  }();
  if (path_out) *path_out = path;
  return j;
}

// One threshold line of `alpha info`.
std::string info_line(const char* cls, const std::string& value) {
  return fmt::format("  {:<14} {} {}", cls, value, std::string(cls) == "matmul" ? "flops" : "elements");
}

}  // namespace

TEST_CASE("crossover: the GPU faster only above X gives X") {
  std::vector<CalibSample> s;
  for (int e = 10; e <= 20; ++e) s.push_back({int64_t{1} << e, 1.0 * e, e >= 15 ? 0.5 * e : 2.0 * e});
  CHECK(crossover_work(s) == (int64_t{1} << 15));
  std::reverse(s.begin(), s.end());  // order of the samples does not matter
  CHECK(crossover_work(s) == (int64_t{1} << 15));
}

TEST_CASE("crossover: noisy wins below the last loss do not count") {
  // GPU wins at 2^11 and 2^13 (noise), loses at 2^14, then wins at every size from 2^15 on.
  const std::vector<CalibSample> s = {{1 << 10, 1, 2}, {1 << 11, 1, 0.5}, {1 << 12, 1, 2},
                                      {1 << 13, 1, 0.9}, {1 << 14, 1, 1.1}, {1 << 15, 1, 0.8},
                                      {1 << 16, 1, 0.7}, {1 << 17, 1, 0.1}};
  CHECK(crossover_work(s) == (1 << 15));
}

TEST_CASE("crossover: never, always, ties and shared sizes") {
  CHECK(crossover_work({{1024, 1, 2}, {4096, 1, 3}}) == kNeverWork);
  CHECK(crossover_work({{1024, 1, 2}, {4096, 1, 0.5}, {8192, 1, 2}}) == kNeverWork);  // loses at the largest
  CHECK(crossover_work({}) == kNeverWork);
  CHECK(crossover_work({{1024, 2, 1}, {4096, 2, 1}}) == 1024);
  CHECK(crossover_work({{1024, 2, 1}, {4096, 1, 1}, {8192, 2, 1}}) == 8192);  // a tie is not a win
  // Two shapes at one size: both must win (the square one loses at 4096).
  CHECK(crossover_work({{1024, 2, 1}, {4096, 2, 1}, {4096, 1, 3}, {8192, 2, 1}}) == 8192);
  CHECK(crossover_work({{1024, 2, 1}, {4096, 2, 1}, {4096, 3, 1}, {8192, 2, 1}}) == 1024);
}

TEST_CASE("profile paths: sanitized device names under XDG_CACHE_HOME") {
  CHECK(sanitize_device_name("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3");
  CHECK(sanitize_device_name("llvmpipe (LLVM 15.0.6, 256 bits)") == "llvmpipe-llvm-15-0-6-256-bits");
  CHECK(sanitize_device_name("../..") == "device");
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(default_profile_path("AMD Radeon RX 7900") == "/x/cache/alpha/dispatch-amd-radeon-rx-7900.json");
  if (old) setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("alpha calibrate --quick writes a valid profile for this device") {
  std::string path;
  const json& j = calibrated(&path);
  CHECK(j.at("version") == 1);
  CHECK(j.at("device") == device_name());
  CHECK(j.at("created").get<std::string>().size() == 20);  // 2026-01-02T03:04:05Z
  CHECK(j.at("gpu_timing").get<std::string>().find("wall clock") != std::string::npos);
  CHECK(j.at("passes") == 2);
  const json& t = j.at("thresholds");
  for (const char* c : kClasses) {
    CAPTURE(c);
    REQUIRE(t.contains(c));
    const json& v = t.at(c);
    CHECK(((v.is_string() && v == "never") || (v.is_number_integer() && v.get<int64_t>() > 0)));
    // The threshold is the crossover of that class's measurements, which cover several sizes.
    std::vector<CalibSample> s;
    for (const json& m : j.at("measurements"))
      if (m.at("class") == c) {
        CHECK(m.at("cpu_ms").get<double>() > 0);
        const double g = m.at("gpu_ms").is_number() ? m.at("gpu_ms").get<double>() : 1e300;
        // Each side keeps its faster pass (two passes, up then down the sizes).
        REQUIRE(m.at("cpu_ms_each").size() == 2);
        REQUIRE(m.at("gpu_ms_each").size() == 2);
        CHECK(m.at("cpu_ms") == std::min(m.at("cpu_ms_each")[0], m.at("cpu_ms_each")[1]));
        if (m.at("gpu_ms").is_number()) CHECK(m.at("gpu_ms") == std::min(m.at("gpu_ms_each")[0], m.at("gpu_ms_each")[1]));
        else CHECK(m.at("gpu_ms_each")[0] == "declined");
        s.push_back({m.at("work").get<int64_t>(), m.at("cpu_ms").get<double>(), g});
      }
    CHECK(s.size() >= 4);
    const int64_t x = crossover_work(s);
    CHECK(v == (x == kNeverWork ? json("never") : json(x)));
  }
  // The profile loads as it was written.
  const DispatchProfile p = load_dispatch_profile(path);
  CHECK(p.device == device_name());
  CHECK(p.thresholds.size() == 9);
}

TEST_CASE("dispatch.profile replaces the config thresholds per class; the environment still wins") {
  TempDir d;
  const std::string path = (d.path / "prof.json").string();
  write_file(path, synthetic_profile(device_name()).dump());
  {
    DeviceScope scope("vulkan", 7, 9, false, path);
    auto* be = dynamic_cast<vk::VulkanBackend*>(scope.backend());
    REQUIRE(be != nullptr);
    CHECK(scope.dispatch_profile_path() == path);
    for (int c = 0; c < 9; ++c) {
      CAPTURE(kClasses[c]);
      const int64_t want = c == 2 ? kNeverWork : 1000 * (c + 1);
      CHECK(be->threshold(static_cast<OpClass>(c)) == want);
    }
    CHECK_FALSE(be->wants(OpClass::matmul, int64_t{1} << 60));
    CHECK(be->wants(OpClass::gelu, 6000));
    CHECK_FALSE(be->wants(OpClass::gelu, 5999));
  }
  setenv("ALPHA_GPU_MIN_WORK", "5", 1);
  {
    DeviceScope scope("vulkan", 7, 9, false, path);
    auto* be = dynamic_cast<vk::VulkanBackend*>(scope.backend());
    for (int c = 0; c < 9; ++c) CHECK(be->threshold(static_cast<OpClass>(c)) == 5);
  }
  unsetenv("ALPHA_GPU_MIN_WORK");
  // The same through the CLI: alpha info shows the profile and its thresholds.
  std::string out;
  CHECK(run_alpha("info --device vulkan --set dispatch.profile=" + path, &out) == 0);
  INFO(out);
  CHECK(out.find("dispatch profile: " + path) != std::string::npos);
  CHECK(out.find(info_line("gelu", "6000")) != std::string::npos);
  CHECK(out.find(info_line("matmul", "never")) != std::string::npos);
}

TEST_CASE("a calibrated profile drives the backend through dispatch.profile=auto") {
  TempDir cache;
  std::string out;
  REQUIRE(run_alpha("calibrate --quick --device vulkan", &out, "XDG_CACHE_HOME=" + cache.path.string()) == 0);
  const std::string written =
      (cache.path / "alpha" / ("dispatch-" + sanitize_device_name(device_name()) + ".json")).string();
  INFO(out);
  REQUIRE(std::filesystem::exists(written));
  const json j = json::parse(read_file(written));
  CHECK(run_alpha("info --device vulkan --set dispatch.profile=auto --set dispatch.threshold=77", &out,
                  "XDG_CACHE_HOME=" + cache.path.string()) == 0);
  CHECK(out.find("dispatch profile: " + written) != std::string::npos);
  const json& v = j.at("thresholds").at("softmax");
  CHECK(out.find(info_line("softmax", v.is_string() ? "never" : std::to_string(v.get<int64_t>()))) != std::string::npos);
}

TEST_CASE("dispatch.profile=auto without a profile falls back to the config thresholds") {
  TempDir cache;
  std::string out;
  CHECK(run_alpha("info --device vulkan --set dispatch.profile=auto --set dispatch.threshold=123", &out,
                  "XDG_CACHE_HOME=" + cache.path.string()) == 0);
  INFO(out);
  CHECK(out.find("no calibration profile for") != std::string::npos);
  CHECK(out.find("dispatch profile: none") != std::string::npos);
  CHECK(out.find(info_line("elementwise", "123")) != std::string::npos);
  CHECK(out.find(info_line("matmul", "16777216")) != std::string::npos);
}

TEST_CASE("a profile measured on another device is refused with both names (exit 2)") {
  TempDir d;
  const std::string path = (d.path / "other.json").string();
  write_file(path, synthetic_profile("Imaginary GPU 9000").dump());
  CHECK_THROWS_AS(DeviceScope("vulkan", 7, 9, false, path), ConfigError);
  std::string out;
  CHECK(run_alpha("info --device vulkan --set dispatch.profile=" + path, &out) == 2);
  INFO(out);
  CHECK(out.find("Imaginary GPU 9000") != std::string::npos);
  CHECK(out.find(device_name()) != std::string::npos);
  // Training refuses it the same way, before any step.
  const std::string cfg = alpha::test::tiny_config(d.path);
  CHECK(run_alpha("train " + cfg + " --quiet --set device=vulkan --set dispatch.profile=" + path, &out) == 2);
  CHECK(out.find("Imaginary GPU 9000") != std::string::npos);
  CHECK(out.find(device_name()) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d.path / "run" / "metrics.jsonl"));
}

TEST_CASE("malformed, truncated or missing profiles are refused (exit 2)") {
  TempDir d;
  std::string cal_path;
  calibrated(&cal_path);
  const std::string good = read_file(cal_path);
  json bad_value = synthetic_profile(device_name()), unknown = bad_value, no_dev = bad_value, v2 = bad_value;
  bad_value["thresholds"]["gelu"] = -5;
  unknown["thresholds"]["warp_drive"] = 1;
  no_dev.erase("device");
  v2["version"] = 2;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", good.substr(0, good.size() / 2)}, {"not JSON", "hello"}, {"array", "[1, 2]"},
      {"negative threshold", bad_value.dump()},       {"unknown class", unknown.dump()},
      {"no device", no_dev.dump()},                   {"version 2", v2.dump()}};
  for (const auto& [what, text] : cases) {
    CAPTURE(what);
    const std::string path = (d.path / "bad.json").string();
    write_file(path, text);
    CHECK_THROWS_AS(load_dispatch_profile(path), ConfigError);
    std::string out;
    CHECK(run_alpha("info --device vulkan --set dispatch.profile=" + path, &out) == 2);
    CHECK(out.find(path) != std::string::npos);
  }
  std::string out;
  CHECK(run_alpha("info --device vulkan --set dispatch.profile=" + (d.path / "missing.json").string(), &out) == 2);
  CHECK(out.find("cannot be read") != std::string::npos);
}

TEST_CASE("alpha calibrate: usage errors and no Vulkan device") {
  std::string out;
  CHECK(run_alpha("calibrate --bogus", &out) == 2);
  CHECK(run_alpha("calibrate extra", &out) == 2);
  CHECK(run_alpha("calibrate --help", &out) == 0);
  CHECK(out.find("usage: alpha calibrate") != std::string::npos);
  CHECK(run_alpha("calibrate --device cpu", &out) == 1);
  CHECK(out.find("needs a Vulkan device") != std::string::npos);
}
