// Wall time of the ops the CPU runs, keyed "op input-shapes", for `alpha bench cpu --profile` (where a CPU step
// goes). Only the outermost op is timed (nested ops count in their caller). Off by default: one untaken branch.
#pragma once
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <type_traits>

#include "core/tensor.h"

namespace alpha {

struct CpuOpTime {
  double ms = 0;
  int64_t calls = 0;
  int64_t page_faults = 0;  // minor faults of the process during the op: first touches of fresh memory
};
void set_cpu_op_timing(bool on);  // on or off; both clear the table
bool cpu_op_timing();
const std::map<std::string, CpuOpTime>& cpu_op_times();

namespace detail {
void add_op_time(const char* op, std::initializer_list<Tensor> inputs, double ms, int64_t faults);
int64_t minor_faults();  // the process's minor page faults so far (getrusage)
int& op_timing_depth();  // > 0 inside a timed op (this thread)
}  // namespace detail

// Runs f(), adding its wall time to op's entry when timing is on.
template <class F>
auto timed_op(const char* op, std::initializer_list<Tensor> inputs, F&& f) -> decltype(f()) {
  if (!cpu_op_timing() || detail::op_timing_depth() > 0) return f();
  const int64_t f0 = detail::minor_faults();
  const auto t0 = std::chrono::steady_clock::now();
  struct Depth {
    Depth() { ++detail::op_timing_depth(); }
    ~Depth() { --detail::op_timing_depth(); }
  };
  auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
  if constexpr (std::is_void_v<decltype(f())>) {
    { Depth d; f(); }
    detail::add_op_time(op, inputs, ms(), detail::minor_faults() - f0);
  } else {
    auto r = [&] { Depth d; return f(); }();
    detail::add_op_time(op, inputs, ms(), detail::minor_faults() - f0);
    return r;
  }
}

}  // namespace alpha
