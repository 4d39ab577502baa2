#include "vk/fault.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "vk/device.h"

namespace alpha::vk::fault {

namespace {

constexpr size_t kN = kPointNames.size();
struct State {
  std::array<std::atomic<int64_t>, kN> passes{};
  std::array<int64_t, kN> trigger{};  // 0: never fails; else the first failing pass
  std::atomic<int64_t> fired{0};
  std::chrono::steady_clock::time_point first{};
};
State& state() {
  static State s;
  return s;
}
std::atomic<bool> g_armed{false};  // any trigger set: the one flag a pass reads when nothing is injected

}  // namespace

void configure(std::string_view spec) {
  State& s = state();
  std::array<int64_t, kN> trigger{};
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string_view name = item.substr(0, colon);
    size_t idx = kN;
    for (size_t i = 0; i < kN; ++i)
      if (kPointNames[i] == name) idx = i;
    int64_t n = 0;
    bool ok = colon != std::string_view::npos && colon + 1 < item.size();
    for (size_t i = colon + 1; ok && i < item.size(); ++i) {
      ok = item[i] >= '0' && item[i] <= '9' && n < (int64_t{1} << 40);
      n = n * 10 + (item[i] - '0');
    }
    ALPHA_CHECK(idx < kN && ok && n >= 1, ValueError,
                "[vk] ALPHA_VK_FAULT entry \"{}\" is not point:N (N >= 1; points: {})", item,
                fmt::join(kPointNames, ", "));
    trigger[idx] = n;
  }
  bool armed = false;
  for (size_t i = 0; i < kN; ++i) {
    s.passes[i] = 0;
    s.trigger[i] = trigger[i];
    armed |= trigger[i] > 0;
  }
  s.fired = 0;
  s.first = {};
  g_armed = armed;
}

void configure_from_env() {
  const char* e = std::getenv("ALPHA_VK_FAULT");
  configure(e ? e : "");
}

bool fire(Point p) {
  State& s = state();
  const auto i = static_cast<size_t>(p);
  const int64_t n = ++s.passes[i];
  if (!g_armed.load(std::memory_order_relaxed)) return false;
  if (s.trigger[i] == 0 || n < s.trigger[i]) return false;
  if (s.fired++ == 0) s.first = std::chrono::steady_clock::now();
  return true;
}

int64_t passes(Point p) { return state().passes[static_cast<size_t>(p)].load(); }
int64_t fired() { return state().fired.load(); }
std::chrono::steady_clock::time_point first_fired_at() { return state().first; }

uint64_t wait_timeout_ns() {
  double s = 60;
  if (const char* e = std::getenv("ALPHA_VK_TIMEOUT_S"); e && *e) {
    char* end = nullptr;
    const double v = std::strtod(e, &end);
    ALPHA_CHECK(end && *end == '\0' && v > 0 && v < 1e6, ValueError,
                "[vk] ALPHA_VK_TIMEOUT_S=\"{}\" is not a number of seconds in (0, 1e6)", e);
    s = v;
  }
  return static_cast<uint64_t>(s * 1e9);
}

std::string device_fault_report(const Device& dev) {
  if (!dev.features().device_fault || !vkGetDeviceFaultInfoEXT) return "";
  VkDeviceFaultCountsEXT counts{};
  counts.sType = VK_STRUCTURE_TYPE_DEVICE_FAULT_COUNTS_EXT;
  if (vkGetDeviceFaultInfoEXT(dev.get(), &counts, nullptr) != VK_SUCCESS) return "";
  std::vector<VkDeviceFaultAddressInfoEXT> addrs(counts.addressInfoCount);
  std::vector<VkDeviceFaultVendorInfoEXT> vendor(counts.vendorInfoCount);
  counts.vendorBinarySize = 0;  // the binary dump is vendor tooling's business
  VkDeviceFaultInfoEXT info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_FAULT_INFO_EXT;
  info.pAddressInfos = addrs.empty() ? nullptr : addrs.data();
  info.pVendorInfos = vendor.empty() ? nullptr : vendor.data();
  const VkResult r = vkGetDeviceFaultInfoEXT(dev.get(), &counts, &info);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return "";
  std::string out = fmt::format("VK_EXT_device_fault: {}", info.description[0] ? info.description : "(no description)");
  for (uint32_t i = 0; i < counts.addressInfoCount; ++i)
    out += fmt::format("; address type {} at 0x{:x} (precision {})", static_cast<int>(addrs[i].addressType),
                       addrs[i].reportedAddress, addrs[i].addressPrecision);
  for (uint32_t i = 0; i < counts.vendorInfoCount; ++i)
    out += fmt::format("; vendor fault 0x{:x} data 0x{:x}: {}", vendor[i].vendorFaultCode, vendor[i].vendorFaultData,
                       vendor[i].description);
  return out;
}

}  // namespace alpha::vk::fault
