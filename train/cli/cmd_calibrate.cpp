// `alpha calibrate`: times each op class on the CPU and on the GPU over a geometric ladder of sizes and saves the
// crossovers as a dispatch profile (train/loop/calibrate.h). CPU: wall clock of the synchronous kernel. GPU: wall clock
// of record + submit + wait for one op whose inputs are already on the GPU (in training activations stay there,
// so uploads are not counted; submission latency is, as a step pays it). Medians after a warm-up run, in two passes
// over every class (sizes up, then down); a size keeps each side's faster pass.
// Dimension legend: n elements, R rows, C row width (channels), V vocabulary, M/K/N matmul.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/ops.h"
#include "loop/calibrate.h"
#include "cli/cli.h"
#include "cli/cmd_util.h"
#include "loop/device.h"
#include "vk/backend.h"

namespace alpha {

namespace {

using json = nlohmann::ordered_json;  // the profile keeps its keys in a readable order
using Clock = std::chrono::steady_clock;

constexpr const char* kCalibrateHelp = R"(usage: alpha calibrate [--device vulkan[:N]] [--out PATH] [--quick] [--json]

Measures, per op class (elementwise, reduce, matmul, embedding, layernorm, gelu, softmax, cross_entropy, dropout)
and over a ladder of sizes, where this machine's GPU beats its CPU, and saves the crossovers as a dispatch profile
that runs load with dispatch.profile ("auto" or the path; docs/config.md). A class's threshold is the smallest
size from which the GPU was faster at every larger size measured, or "never".
CPU time: wall clock of the kernel. GPU time: wall clock of one op recorded, submitted and waited for, inputs
already on the GPU (what a training step pays, submission latency included). Medians after a warm-up, in two
passes over every class (sizes up, then down): each size keeps each side's faster pass, so a stretch of host or
GPU noise in one pass need not move a threshold. Before each class of each pass 0.4 s of GPU products keep the
GPU's clock up (without, NVIDIA's drops within seconds of light load).

options:
  --device SPEC   vulkan or vulkan:N (default: auto = the best real GPU; ALPHA_DEVICE is used when unset)
  --out PATH      where to write the profile (default ~/.cache/alpha/dispatch-<device>.json; XDG_CACHE_HOME honoured)
  --quick         fewer sizes and repetitions (tests, software Vulkan)
  --json          print the profile JSON on stdout (the table goes to stderr)
exit codes: 0 ok, 1 runtime error (no Vulkan device), 2 usage error
)";

struct Ladder {
  int elem_lo, elem_hi, mm_lo, mm_hi, step;  // log2 sizes; step: log2 of the ratio between sizes
  int min_reps, max_reps;
  double budget_s;  // time one size aims to spend on each side
  double hold_s;    // full-load GPU time before each pass of a class (ClockHold)
  int passes;       // over the sizes, alternately up and down; a size keeps each side's fastest pass
};
// Two passes: single-pass runs on an H200 host moved thresholds 2-8x between runs, from stretches of 3-6
// consecutive sizes whose CPU medians carried ~0.4 ms extra (docs/PERFORMANCE.md, session 34).
constexpr Ladder kFull{10, 24, 12, 32, 1, 5, 50, 0.1, 0.4, 2};  // ~19 s on an H200 host (16 cores)
constexpr Ladder kQuick{10, 19, 12, 24, 3, 3, 5, 0.005, 0.0, 2};  // two passes: the merge is tested too

// One measured case: the inputs it needs and the op (through the dispatcher, so the GPU runs exactly what
// training runs).
struct Case {
  OpClass cls;
  std::string op, shape;
  int64_t work = 0;
  std::vector<Tensor> inputs;
  std::function<void(const std::vector<Tensor>&)> run;
};

struct Measurement {
  OpClass cls;
  std::string op, shape;
  int64_t work = 0;
  double cpu_s = 0, gpu_s = 0;
  int reps = 0;
  std::vector<double> cpu_each, gpu_each;  // each pass's medians (cpu_s, gpu_s: their minimum)
};

// Cheap deterministic values in [-1, 1) (Rng's normals would dominate the run at 2^24 elements).
Tensor filled(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.mutable_data<float>();
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = static_cast<float>(static_cast<double>(x >> 40) / double(1 << 23) - 1.0);
  }
  return t;
}
Tensor indices(int64_t n, int32_t bound) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % bound);
  return Tensor::from_vector(v, {n});
}

// The cases of one class at size 2^e (elements, or flops for matmul; the case's work is what it really does).
std::vector<Case> cases_for(OpClass cls, int e) {
  constexpr int64_t C = 256, V = 1024;
  const int64_t n = int64_t{1} << e;
  const int64_t R = std::max<int64_t>(1, n / C);
  auto sh = [](const Shape& s) { return shape_str(s); };
  switch (cls) {
    case OpClass::elementwise:
      return {{cls, "add", sh({n}), n, {filled({n}, 1), filled({n}, 2)},
               [](const std::vector<Tensor>& in) { (void)ops::add(in[0], in[1]); }}};
    case OpClass::reduce:  // bias gradients: column sums of (R, C)
      return {{cls, "sum(dim 0)", sh({R, C}), R * C, {filled({R, C}, 3)},
               [](const std::vector<Tensor>& in) { (void)ops::sum(in[0], 0, false); }}};
    case OpClass::embedding:
      return {{cls, "embedding", fmt::format("{} rows of {}", R, sh({V, C})), R * C, {filled({V, C}, 4), indices(R, V)},
               [](const std::vector<Tensor>& in) { (void)ops::embedding(in[0], in[1]); }}};
    case OpClass::layernorm:
      return {{cls, "layernorm", sh({R, C}), R * C, {filled({R, C}, 5), filled({C}, 6), filled({C}, 7)},
               [](const std::vector<Tensor>& in) { (void)ops::layernorm(in[0], in[1], in[2], 1e-5); }}};
    case OpClass::gelu:
      return {{cls, "gelu", sh({n}), n, {filled({n}, 8)}, [](const std::vector<Tensor>& in) { (void)ops::gelu(in[0]); }}};
    case OpClass::softmax:
      return {{cls, "softmax", sh({R, C}), R * C, {filled({R, C}, 9)},
               [](const std::vector<Tensor>& in) { (void)ops::softmax(in[0], false); }}};
    case OpClass::cross_entropy: {
      const int64_t rows = std::max<int64_t>(1, n / V);
      return {{cls, "cross_entropy", sh({rows, V}), rows * V, {filled({rows, V}, 10), indices(rows, V)},
               [](const std::vector<Tensor>& in) { (void)ops::cross_entropy(in[0], in[1], -1); }}};
    }
    case OpClass::dropout:
      return {{cls, "dropout", sh({n}), n, {filled({n}, 11)},
               [](const std::vector<Tensor>& in) { (void)ops::dropout(in[0], 0.1, 1234, 0); }}};
    case OpClass::matmul: {
      // Square M = N = K, and a GPT MLP product x (M, K) @ W^T with W (4K, K), M ~ 4K rows.
      const double flops = std::ldexp(1.0, e);
      const int64_t s = std::max<int64_t>(1, std::llround(std::cbrt(flops / 2)));
      const int64_t k = std::max<int64_t>(1, std::llround(std::cbrt(flops / 32)));
      const int64_t m = std::max<int64_t>(1, std::llround(flops / double(8 * k * k)));
      return {{cls, "matmul", fmt::format("{} @ {}", sh({s, s}), sh({s, s})), 2 * s * s * s,
               {filled({s, s}, 12), filled({s, s}, 13)},
               [](const std::vector<Tensor>& in) { (void)ops::matmul(in[0], in[1], false, false); }},
              {cls, "matmul", fmt::format("{} @ {}^T", sh({m, k}), sh({4 * k, k})), 2 * m * 4 * k * k,
               {filled({m, k}, 14), filled({4 * k, k}, 15)},
               [](const std::vector<Tensor>& in) { (void)ops::matmul(in[0], in[1], false, true); }}};
    }
    default:
      return {};  // a class this calibrator has no case for keeps the config threshold
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of run() + sync(): one warm-up, then as many runs as fit the budget (within the rep limits).
double time_side(const std::function<void()>& run, const std::function<void()>& sync, const Ladder& L, int& reps) {
  run();
  sync();
  std::vector<double> t;
  auto once = [&] {
    const auto t0 = Clock::now();
    run();
    sync();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  };
  once();
  reps = std::clamp(static_cast<int>(L.budget_s / std::max(t[0], 1e-7)), L.min_reps, L.max_reps);
  if (t[0] > 0.25) reps = 1;  // a slow side (software Vulkan at large sizes): one timed run is enough to lose
  while (static_cast<int>(t.size()) < reps) once();
  return median(t);
}

// NVIDIA's driver lowers the clock after ~3 s of light load, which calibration is (an H200 went 1980 -> 345 MHz
// within two classes, and its GPU sides read up to 4x slower than at full clock), and needs ~0.6 s of full load to
// climb back. Products back to back before each class keep the GPU measured at the clock a training step runs at
// (docs/PERFORMANCE.md, session 34).
class ClockHold {
 public:
  ClockHold(vk::VulkanBackend& be, double seconds) : be_(be), seconds_(seconds) {
    if (seconds_ <= 0) return;  // --quick (software Vulkan): no hold, no 2048^2 operands
    ab_ = {filled({2048, 2048}, 16), filled({2048, 2048}, 17)};
    for (Tensor& t : ab_) (void)be_.runtime().input(t);
  }
  void operator()() {
    if (seconds_ <= 0) return;
    set_active_backend(&be_);
    const auto until = Clock::now() + std::chrono::duration<double>(seconds_);
    while (Clock::now() < until) {
      for (int i = 0; i < 4; ++i) (void)ops::matmul(ab_[0], ab_[1], false, false);
      be_.sync();
    }
    set_active_backend(nullptr);
  }

 private:
  vk::VulkanBackend& be_;
  double seconds_;
  std::vector<Tensor> ab_;
};

Measurement measure(vk::VulkanBackend& be, Case& c, const Ladder& L) {
  Measurement m{c.cls, c.op, c.shape, c.work, 0, 0, 0, {}, {}};
  set_active_backend(nullptr);
  int reps = 0;
  m.cpu_s = time_side([&] { c.run(c.inputs); }, [] {}, L, reps);
  // The GPU's own copies, uploaded and waited for before timing (the host copies stay for nothing else).
  std::vector<Tensor> dev;
  for (const Tensor& t : c.inputs) {
    dev.push_back(t.clone());
    (void)be.runtime().input(dev.back());
  }
  be.sync();
  set_active_backend(&be);
  const int64_t before = dispatch_stats().gpu_ops;
  c.run(dev);  // declined by the backend (unsupported on this device): the GPU never wins this case
  const bool on_gpu = dispatch_stats().gpu_ops > before;
  int greps = 0;
  m.gpu_s = on_gpu ? time_side([&] { c.run(dev); }, [&] { be.sync(); }, L, greps) : std::numeric_limits<double>::infinity();
  set_active_backend(nullptr);
  m.reps = std::min(reps, on_gpu ? greps : reps);
  m.cpu_each = {m.cpu_s};
  m.gpu_each = {m.gpu_s};
  return m;
}

// Another pass's measurement of the same case: each side keeps its faster median.
void merge_pass(Measurement& into, const Measurement& m) {
  into.cpu_s = std::min(into.cpu_s, m.cpu_s);
  into.gpu_s = std::min(into.gpu_s, m.gpu_s);
  into.reps = std::min(into.reps, m.reps);
  into.cpu_each.push_back(m.cpu_s);
  into.gpu_each.push_back(m.gpu_s);
}

std::string human(int64_t w) {
  if (w == kNeverWork) return "never";
  const double x = static_cast<double>(w);
  if (x >= 1e9) return fmt::format("{:.3g}G", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.3g}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.3g}K", x / 1e3);
  return fmt::format("{}", w);
}

double ms4(double s) { return std::stod(fmt::format("{:.4g}", s * 1e3)); }  // 4 significant digits

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string version_str(uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v), VK_API_VERSION_PATCH(v));
}

// Driver name and version for the profile (VK 1.2 driver properties when the loader has them).
json driver_info(vk::VulkanBackend& be) {
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(be.runtime().device().physical(), &props);
  json d = {{"api_version", version_str(props.apiVersion)}, {"driver_version", props.driverVersion},
            {"vendor_id", props.vendorID}, {"device_id", props.deviceID}};
  if (vkGetPhysicalDeviceProperties2 && props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties drv{};
    drv.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &drv;
    vkGetPhysicalDeviceProperties2(be.runtime().device().physical(), &p2);
    d["driver_name"] = drv.driverName;
    d["driver_info"] = drv.driverInfo;
  }
  return d;
}

void write_file(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    ALPHA_CHECK(f.good(), ValueError, "[calibrate] cannot write \"{}\"", tmp);
  }
  std::filesystem::rename(tmp, p);  // readers never see half a profile
}

}  // namespace

int cmd_calibrate(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool quick = false, as_json = false;
  for (const std::string& a : args) {  // flags without values first; CmdArgs parses the rest
    if (a == "--quick") quick = true;
    else if (a == "--json") as_json = true;
    else rest.push_back(a);
  }
  CmdArgs a("calibrate", rest, {"--device", "--out"});
  if (a.help) {
    std::fputs(kCalibrateHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return a.usage(a.error);
  if (!a.positional.empty()) return a.usage("calibrate takes no positional arguments, got \"" + a.positional[0] + "\"");
  if (a.values.count("--device")) setenv("ALPHA_DEVICE", a.get("--device", "").c_str(), 1);  // wins, as in info
  const Ladder& L = quick ? kQuick : kFull;

  DeviceScope scope("auto");
  auto* be = dynamic_cast<vk::VulkanBackend*>(scope.backend());
  ALPHA_CHECK(be != nullptr, ValueError, "[calibrate] needs a Vulkan device, got {} (use --device vulkan or vulkan:N)",
              scope.description());
  const bool check_was = gpu_check_enabled();
  set_gpu_check(false);  // ALPHA_VK_CHECK would time the CPU re-run too
  for (int c = 0; c < be->class_count(); ++c) be->set_threshold(static_cast<OpClass>(c), 0);
  const std::string dev_name = be->runtime().device().features().name;
  const std::string out = a.get("--out", default_profile_path(dev_name));
  FILE* table = as_json ? stderr : stdout;
  std::fprintf(table, "calibrating %s%s: CPU = kernel wall clock; GPU = wall clock of record + submit + wait per op, "
               "inputs already on the GPU; medians\n", scope.description().c_str(), quick ? " (--quick)" : "");
  std::fflush(table);

  ClockHold hold(*be, L.hold_s);
  const auto t0 = Clock::now();
  std::vector<Measurement> all;
  json thresholds = json::object(), measurements = json::array();
  std::fprintf(table, "%-14s %-9s %s\n", "class", "GPU from", "CPU / GPU ms at some sizes (work)");
  // Passes over every class, not per class: a disturbance of a few seconds (seen on a shared host) then hits
  // different classes in each pass. Cases are rebuilt per pass (deterministic inputs), so one class's at a time
  // are in memory.
  std::vector<std::vector<Measurement>> per_class(static_cast<size_t>(be->class_count()));
  for (int pass = 0; pass < L.passes; ++pass)
    for (int c = 0; c < be->class_count(); ++c) {
      const auto cls = static_cast<OpClass>(c);
      const bool mm = cls == OpClass::matmul;
      std::vector<std::vector<Case>> sizes;
      for (int e = mm ? L.mm_lo : L.elem_lo; e <= (mm ? L.mm_hi : L.elem_hi); e += L.step) sizes.push_back(cases_for(cls, e));
      std::vector<Measurement>& ms = per_class[static_cast<size_t>(c)];
      size_t at = 0;  // ms's index of the first case of size s, in size order
      std::vector<size_t> first(sizes.size());
      for (size_t s = 0; s < sizes.size(); ++s) first[s] = at, at += sizes[s].size();
      if (at == 0) continue;
      hold();  // the GPU at full clock from each pass's first case on
      if (pass == 0) ms.resize(at);
      for (size_t i = 0; i < sizes.size(); ++i) {
        const size_t s = pass % 2 == 0 ? i : sizes.size() - 1 - i;  // up, then down: noise in time hits other sizes
        for (size_t j = 0; j < sizes[s].size(); ++j) {
          Measurement m = measure(*be, sizes[s][j], L);
          if (pass == 0) ms[first[s] + j] = std::move(m);
          else merge_pass(ms[first[s] + j], m);
        }
      }
    }
  for (int c = 0; c < be->class_count(); ++c) {
    const auto cls = static_cast<OpClass>(c);
    const std::vector<Measurement>& ms = per_class[static_cast<size_t>(c)];
    if (ms.empty()) {
      std::fprintf(table, "%-14s %-9s not measured (keeps the config threshold)\n", op_class_name(cls), "-");
      continue;
    }
    std::vector<CalibSample> samples;
    for (const Measurement& m : ms) {
      samples.push_back({m.work, m.cpu_s, m.gpu_s});
      json g = std::isfinite(m.gpu_s) ? json(ms4(m.gpu_s)) : json("declined");
      measurements.push_back({{"class", op_class_name(cls)}, {"op", m.op}, {"shape", m.shape}, {"work", m.work},
                              {"cpu_ms", ms4(m.cpu_s)}, {"gpu_ms", g}, {"reps", m.reps}});
      if (m.cpu_each.size() > 1) {
        json ce = json::array(), ge = json::array();
        for (double x : m.cpu_each) ce.push_back(ms4(x));
        for (double x : m.gpu_each) ge.push_back(std::isfinite(x) ? json(ms4(x)) : json("declined"));
        measurements.back()["cpu_ms_each"] = ce;
        measurements.back()["gpu_ms_each"] = ge;
      }
    }
    const int64_t x = crossover_work(samples);
    thresholds[op_class_name(cls)] = x == kNeverWork ? json("never") : json(x);
    std::string cols;
    for (size_t i : {size_t{0}, ms.size() / 2, ms.size() - 1})
      cols += fmt::format("  {:>6}: {:>8.3g} / {:<8.3g}", human(ms[i].work), ms[i].cpu_s * 1e3, ms[i].gpu_s * 1e3);
    std::fprintf(table, "%-14s %-9s%s\n", op_class_name(cls), human(x).c_str(), cols.c_str());
    std::fflush(table);
  }
  set_gpu_check(check_was);
  set_active_backend(scope.backend());

  const auto& f = be->runtime().device().features();
  json profile = {{"version", 1}, {"device", dev_name}, {"device_type", vk::device_type_name(f.type)},
                  {"created", iso_now()}, {"quick", quick},
                  {"cpu_timing", "wall clock of the CPU kernel (synchronous), median; the fastest pass's"},
                  {"gpu_timing", "wall clock of one op recorded + submitted + waited for, inputs already on the GPU, "
                                 "median; the fastest pass's"},
                  {"clock_hold_s", L.hold_s}, {"passes", L.passes},
                  {"thresholds", thresholds}, {"measurements", measurements}};
  profile.update(driver_info(*be));
  write_file(out, profile.dump(2) + "\n");
  std::fprintf(table, "wrote %s (%.1f s); use it with --set dispatch.profile=auto (or the path)\n", out.c_str(),
               std::chrono::duration<double>(Clock::now() - t0).count());
  if (as_json) std::printf("%s\n", profile.dump(2).c_str());
  return kExitOk;
}

}  // namespace alpha
