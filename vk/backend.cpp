#include "vk/backend.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "spirv/push_constants.h"

namespace alpha::vk {

VulkanBackend::VulkanBackend(RuntimeOptions opts) : rt_(std::make_unique<Runtime>(opts)) {
  configure_thresholds(int64_t{1} << 20, int64_t{1} << 24);
}

void VulkanBackend::configure_thresholds(int64_t elements, int64_t matmul_flops) {
  ALPHA_CHECK(elements >= 0 && matmul_flops >= 0, ValueError, "[vk] thresholds must be >= 0, got {} and {}",
              elements, matmul_flops);
  for (size_t i = 0; i < thresholds_.size(); ++i)
    thresholds_[i] = static_cast<OpClass>(i) == OpClass::matmul ? matmul_flops : elements;
  apply_threshold_env();
}

void VulkanBackend::configure_class_thresholds(const std::map<OpClass, int64_t>& per_class) {
  for (const auto& [cls, work] : per_class) {
    ALPHA_CHECK(work >= 0 && static_cast<size_t>(cls) < thresholds_.size(), ValueError,
                "[vk] bad threshold {} for op class {}", work, op_class_name(cls));
    thresholds_[static_cast<size_t>(cls)] = work;
  }
  apply_threshold_env();
}

void VulkanBackend::apply_threshold_env() {
  if (const char* e = std::getenv("ALPHA_GPU_MIN_WORK"); e && *e) {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (*end != '\0' || v < 0)
      throw ValueError(fmt::format("[vk] ALPHA_GPU_MIN_WORK='{}' is not a non-negative integer", e));
    thresholds_.fill(v);
  }
  // ALPHA_VK_CPU_OPS=matmul,softmax,...: those op classes never run here (for bisecting a GPU/CPU difference).
  if (const char* e = std::getenv("ALPHA_VK_CPU_OPS"); e && *e) {
    const std::string list = fmt::format(",{},", e);
    for (size_t i = 0; i < thresholds_.size(); ++i)
      if (list.find(fmt::format(",{},", op_class_name(static_cast<OpClass>(i)))) != std::string::npos)
        thresholds_[i] = std::numeric_limits<int64_t>::max();
  }
}

VulkanBackend::~VulkanBackend() = default;

std::string VulkanBackend::name() const {
  return fmt::format("vulkan:{} ({})", rt_->device().index(), rt_->device().features().name);
}

bool VulkanBackend::wants(OpClass cls, int64_t work) const { return work >= threshold(cls); }

QueueCounters VulkanBackend::queue_counters() const {
  const LazyQueue::Stats& s = rt_->queue().stats();
  return {s.submissions, s.dispatches, s.barriers, s.syncs, s.bytes_up, s.bytes_down, s.wait_ns, s.host_reads};
}

void VulkanBackend::record_sum(const std::shared_ptr<GpuBuffer>& in, const std::shared_ptr<GpuBuffer>& out,
                               uint32_t outer, uint32_t n, uint32_t inner, float scale, bool in_f16,
                               const std::shared_ptr<GpuBuffer>& out2, uint32_t split) {
  const double work = double(outer) * n * inner;
  ALPHA_CHECK(!out2 || (!in_f16 && inner % 4 == 0 && split % 4 == 0), ValueError,
              "[vk] a sum into two buffers needs f32 input in fours (inner {}, split {})", inner, split);
  const std::string o2 = out2 ? "_out2" : "";
  const uint32_t usplit = split / 4;  // in the VEC4 kernels' units
  // Bindings: the kernel's own, then out2 where there is one.
  auto with2 = [&](std::initializer_list<Binding> b) {
    std::vector<Binding> v(b);
    if (out2) v.push_back({out2, true});
    return v;
  };
  if (inner == 1) {
    const pc::SumPC pc{outer, n, inner, scale, n, 0};
    rt_->run(in_f16 ? "sum_rows_f16in" : "sum_rows_f32", {128}, {{in, false}, {out, true}}, pc, Runtime::grid(outer), work);
    return;
  }
  // Columns in fours where they divide (8/16-byte loads and stores; an H100 summed 2-byte columns at ~0.7 TB/s),
  // each column in the scalar kernel's order: every choice below counts columns, not units, so both chunk alike.
  const uint32_t vec = inner % 4 == 0 ? 4 : 1;
  const uint64_t cols = uint64_t(outer) * inner;
  const std::string sfx = in_f16 ? "_f16in" : "_f32";
  if (n <= 4 || (n <= 64 && cols >= (uint64_t{1} << 17))) {
    // Short columns over many of them (split-K partials): one invocation per column unit, rows in order.
    const pc::SumPC pc{outer, n, inner, scale, std::max(n, 1u), usplit};
    const auto b = with2({{in, false}, {out, true}});
    rt_->run(std::string(vec == 4 ? "sum_cols4" : "sum_cols") + sfx + o2, {256}, std::span<const Binding>(b), pc,
             Runtime::grid_for(cols / vec, 256), work);
    return;
  }
  // Long columns (bias gradients: 8192 rows): workgroups of 16 row lanes over 64-column blocks, in row chunks of 16
  // lanes x 64 down to x 4 rows until ~512 workgroups run, at most 64 chunks, then one more pass over the chunks'
  // partials. Invocations summing whole columns alone left a GPT-2 bias gradient's second pass latency-bound (~50 us
  // on an H200); 1024 workgroups of 4-row lanes made three passes of a 768-wide bias gradient.
  const uint64_t blocks = (cols + 63) / 64;
  const uint32_t floor = std::max<uint32_t>(4, (n + 16 * 64 - 1) / (16 * 64));  // chunks <= 64
  uint32_t per_lane = 64;
  while (per_lane / 2 >= floor && blocks * ((n + 16 * per_lane - 1) / (16 * per_lane)) < 512) per_lane /= 2;
  const uint32_t chunk = 16 * per_lane, chunks = (n + chunk - 1) / chunk;
  const uint64_t units = inner / vec, col_blocks = (units + 15) / 16, groups = uint64_t(outer) * chunks * col_blocks;
  const std::string kernel = std::string(vec == 4 ? "sum_cols4_wg" : "sum_cols_wg") + sfx;
  if (chunks == 1 || uint64_t(outer) * col_blocks > counter_ring_) {
    // One chunk; or more column blocks than the counter ring holds: partials, then a second pass (the same bits).
    if (chunks == 1) {
      const auto b = with2({{in, false}, {out, true}});
      rt_->run(kernel + o2, {256}, std::span<const Binding>(b), pc::SumPC{outer, n, inner, scale, chunk, usplit},
               Runtime::grid(groups), work);
      return;
    }
    const auto part = rt_->scratch(uint64_t(outer) * chunks * inner * 4);
    rt_->run(kernel, {256}, {{in, false}, {part, true}}, pc::SumPC{outer, n, inner, 1.0f, chunk, 0},
             Runtime::grid(groups), work);
    record_sum(part, out, outer, chunks, inner, scale, false, out2, split);
    return;
  }
  // The chunks' partials, summed by the last workgroup of each column block in the order (and so to the bits) of a
  // second record_sum pass over them: GPT-2's ~100 bias and norm gradients per step lose their second dispatch.
  const auto part = rt_->scratch(uint64_t(outer) * chunks * inner * 4);
  const uint64_t cols2 = uint64_t(outer) * inner;
  const uint32_t seq = chunks <= 4 || (chunks <= 64 && cols2 >= (uint64_t{1} << 17)) ? 1u : 0u;
  const auto [ctr, ctr_off] = counter_window(uint64_t(outer) * col_blocks);
  const auto b = with2({{in, false}, {part, true}, {out, true}, ctr});
  rt_->run(kernel + "_last" + o2, {256}, std::span<const Binding>(b),
           pc::SumLastPC{outer, n, inner, scale, chunk, ctr_off, seq, usplit}, Runtime::grid(groups), work);
}

std::pair<Binding, uint32_t> VulkanBackend::counter_window(uint64_t count) {
  ALPHA_CHECK(count <= counter_ring_, ValueError, "[vk] {} arrival counters asked for, at most {}", count,
              counter_ring_);
  const bool fresh = !counters_;
  if (fresh) counters_ = rt_->upload_new(std::vector<uint32_t>(kCounters, 0u).data(), kCounters * 4);
  // A fresh window is a disjoint write (no barrier); when the ring wraps, a plain write waits for the earlier users
  // (and the first use for the zeros' upload).
  const bool wrap = fresh || counter_next_ + count > counter_ring_;
  if (wrap) counter_next_ = 0;
  const uint32_t off = uint32_t(counter_next_);
  counter_next_ += count;
  return {Binding{counters_, true, /*disjoint=*/!wrap}, off};
}

}  // namespace alpha::vk
