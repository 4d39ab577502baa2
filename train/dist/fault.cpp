#include "dist/fault.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "dist/comm.h"

namespace alpha::dist {

void inject_fault_at_step(int64_t step) {
  static const std::string spec = [] {
    const char* e = std::getenv("ALPHA_DIST_INJECT");
    return std::string(e ? e : "");
  }();
  if (spec.empty()) return;
  const size_t a = spec.find(':'), b = spec.find(':', a + 1);
  if (a == std::string::npos || b == std::string::npos)
    throw DistError(fmt::format("[dist] ALPHA_DIST_INJECT \"{}\" is not ACTION:RANK:STEP", spec));
  const std::string action = spec.substr(0, a);
  const int rank = std::atoi(spec.substr(a + 1, b - a - 1).c_str());
  const int64_t at = std::atoll(spec.substr(b + 1).c_str());
  if (rank != World::rank() || step != at) return;
  if (action == "kill") std::raise(SIGKILL);
  if (action == "throw") throw DistError(fmt::format("[dist] rank {}: injected fault at step {}", rank, step));
  if (action == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  throw DistError(fmt::format("[dist] ALPHA_DIST_INJECT action \"{}\" is not kill, throw or hang", action));
}

}  // namespace alpha::dist
