#include "core/op_timing.h"

#include <sys/resource.h>

namespace alpha {

namespace {
bool g_on = false;
std::map<std::string, CpuOpTime>& table() {
  static std::map<std::string, CpuOpTime> t;
  return t;
}
}  // namespace

void set_cpu_op_timing(bool on) {
  g_on = on;
  table().clear();
}
bool cpu_op_timing() { return g_on; }
const std::map<std::string, CpuOpTime>& cpu_op_times() { return table(); }

namespace detail {
int& op_timing_depth() {
  thread_local int depth = 0;
  return depth;
}
int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}
void add_op_time(const char* op, std::initializer_list<Tensor> inputs, double ms, int64_t faults) {
  std::string key = op;
  for (const Tensor& t : inputs)
    if (t.defined()) key += " " + shape_str(t.shape());
  CpuOpTime& e = table()[key];
  e.ms += ms;
  ++e.calls;
  e.page_faults += faults;
}
}  // namespace detail

}  // namespace alpha
