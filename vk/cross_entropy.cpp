// Fused cross-entropy on the GPU. Targets are checked on the host (count of non-ignored rows, range):
// an out-of-range target or an all-ignored batch is declined so the CPU kernel reports / defines it.
// Forward: per-row lse and loss (one workgroup per row), then a deterministic sum / count into the 0-d loss.
// lse is f64 as core/ops.h specifies (so CPU and GPU halves interoperate); the kernels compute in f32 and
// move it through its bit pattern. f16 logits: f16-storage variants; the loss stays f32, dlogits is f16.
// Fused (f16 rows of a multiple of 4 logits, V <= 4 * CE_FUSED_WG * CE_FUSED_KEEP, shaderFloat16): one kernel keeps
// its row in f16 registers and writes lse, the row loss and the backward's dlogits (the backward kernel's bits for
// that lse; the lse's own last bits may differ from the forward kernel's); other rows run the two kernels.
#include <cstdlib>
#include <cstring>

#include "spirv/push_constants.h"
#include "vk/backend.h"

namespace alpha::vk {

namespace {
constexpr uint32_t kCrossEntropyWG = 128;

// Rows whose target is not ignore_index; -1 when a target is out of [0, V).
int64_t count_targets(const Tensor& targets, int64_t vocab, int64_t ignore_index) {
  const int32_t* t = targets.data<int32_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (t[i] == ignore_index) continue;
    if (t[i] < 0 || t[i] >= vocab) return -1;
    ++count;
  }
  return count;
}

// ALPHA_VK_FUSED_CE=0 runs the fused op as its two kernels (an A/B switch for benchmarks; same bits).
bool fused_ce_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("ALPHA_VK_FUSED_CE");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}
}  // namespace

ops::CrossEntropyOut VulkanBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  return cross_entropy_pass(logits, targets, ignore_index, nullptr);
}

ops::CrossEntropyOut VulkanBackend::cross_entropy_fused(const Tensor& logits, const Tensor& targets,
                                                        int64_t ignore_index, double dloss) {
  const int64_t cols = flt(logits) ? logits.size(1) : 0;
  const bool fused = fused_ce_enabled() && rt_->device().features().fp16_arithmetic && logits.dtype() == DType::f16 && cols % 4 == 0 && cols / 4 <= int64_t(CE_FUSED_WG) * CE_FUSED_KEEP;
  ops::CrossEntropyOut out = cross_entropy_pass(logits, targets, ignore_index, fused ? &dloss : nullptr);
  if (out.loss.defined() && !fused)
    out.dlogits = cross_entropy_backward(logits, targets, out.lse, dloss, out.count, ignore_index);
  return out;
}

// The forward; with dloss, the fused variant, which also writes out.dlogits for it.
ops::CrossEntropyOut VulkanBackend::cross_entropy_pass(const Tensor& logits, const Tensor& targets,
                                                       int64_t ignore_index, const double* dloss) {
  if (!flt(logits) || !i32(targets)) return {};
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const int64_t count = count_targets(targets, cols, ignore_index);
  if (count <= 0 || ignore_index < INT32_MIN || ignore_index > INT32_MAX) return {};
  const auto bx = rt_->input(logits), bt = rt_->input(targets);
  ops::CrossEntropyOut out{rt_->output({}), rt_->output({rows}, DType::f64), count, {}};
  const auto row_loss = rt_->scratch(uint64_t(rows) * 4);
  const float scale = dloss ? static_cast<float>(*dloss / double(count)) : 1.0f;  // the backward's scale
  const pc::CrossEntropyPC pc{uint32_t(rows), uint32_t(cols), int32_t(ignore_index), scale};
  std::vector<Binding> bind{{bx, false}, {bt, false}, {Runtime::buffer_of(out.lse), true}, {row_loss, true}};
  if (dloss) {
    out.dlogits = rt_->output(logits.shape(), logits.dtype());
    bind.push_back({Runtime::buffer_of(out.dlogits), true});
  }
  rt_->run(dloss ? "cross_entropy_fused_f16_vec4" : "cross_entropy" + sfx(logits) + (cols % 4 == 0 ? "_vec4" : ""),
           {dloss ? uint32_t(CE_FUSED_WG) : kCrossEntropyWG}, bind, pc, Runtime::grid(rows), (dloss ? 8.0 : 4.0) * double(logits.numel()));
  record_sum(row_loss, Runtime::buffer_of(out.loss), 1, uint32_t(rows), 1, static_cast<float>(1.0 / double(count)));
  return out;
}

Tensor VulkanBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                             double dloss, int64_t count, int64_t ignore_index) {
  if (!flt(logits) || !i32(targets) || lse.dtype() != DType::f64 || !rt_->accepts(lse) || count <= 0) return {};
  if (ignore_index < INT32_MIN || ignore_index > INT32_MAX) return {};
  const int64_t rows = logits.size(0), cols = logits.size(1);
  if (lse.numel() != rows || targets.numel() != rows) return {};
  const auto bx = rt_->input(logits), bt = rt_->input(targets), bl = rt_->input(lse);
  Tensor dx = rt_->output(logits.shape(), logits.dtype());
  const pc::CrossEntropyPC pc{uint32_t(rows), uint32_t(cols), int32_t(ignore_index),
                              static_cast<float>(dloss / double(count))};
  // f16 rows of a multiple of 4 logits: f16vec4 loads, two per invocation (same per-element math and bits).
  const bool v4 = logits.dtype() == DType::f16 && cols % 4 == 0;
  rt_->run("cross_entropy_bwd" + sfx(logits) + (v4 ? "_vec4" : ""), {256},
           {{bx, false}, {bt, false}, {bl, false}, {Runtime::buffer_of(dx), true}}, pc,
           Runtime::grid_for(v4 ? (uint64_t(logits.numel()) / 4 + 1) / 2 : uint64_t(logits.numel()), 256),
           4.0 * double(logits.numel()));  // vec4: two vectors per invocation
  return dx;
}

}  // namespace alpha::vk
