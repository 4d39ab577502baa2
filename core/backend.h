// The GPU backend interface the dispatcher talks to. vk/ implements it; core never includes Vulkan.
// Every method may decline by returning an undefined Tensor (unsupported dtype, layout or size): the
// dispatcher then runs the CPU kernel. Signatures mirror core/ops.h; inputs are already validated.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/ops.h"

namespace alpha {

// Op classes the size-threshold dispatcher distinguishes (thresholds are per class).
enum class OpClass : uint8_t { elementwise, reduce, matmul, embedding, layernorm, gelu, softmax, cross_entropy, dropout };
const char* op_class_name(OpClass c);

// What a backend's queue has done since it was created (a GPU backend's lazy queue; zeros for others).
struct QueueCounters {
  int64_t submissions = 0;  // queue flushes that submitted work
  int64_t dispatches = 0;   // kernels recorded
  int64_t barriers = 0;
  int64_t syncs = 0;        // host waits for the GPU
  int64_t bytes_up = 0, bytes_down = 0;
  int64_t wait_ns = 0;      // host time spent in those waits
  int64_t host_reads = 0;   // GPU -> host read-backs (each one waits for the GPU)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Should an op of this class with `work` (≈ flops or elements) run here? The size-threshold policy.
  virtual bool wants(OpClass cls, int64_t work) const = 0;
  virtual QueueCounters queue_counters() const { return {}; }
  // GPU nanoseconds per kernel name since creation (timestamp profiling; empty when off or unsupported).
  virtual std::map<std::string, double> kernel_gpu_ns() const { return {}; }
  // While on, the products recorded run side by side with each other (ag's deferred weight gradients): each may
  // take a whole-K grid rather than splitting K to fill the device alone.
  virtual void set_concurrent(bool /*on*/) {}

  virtual Tensor add(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor sub(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor mul(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor div(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor unary(const char* /*op: neg exp log sqrt*/, const Tensor&) { return {}; }
  virtual Tensor scale(const Tensor&, double /*mul*/, double /*add*/) { return {}; }
  virtual Tensor sum(const Tensor&, int64_t /*dim*/, bool /*keepdim*/) { return {}; }
  virtual Tensor sum_f32(const Tensor&, int64_t /*dim*/) { return {}; }  // f32 result for f16 input too
  virtual Tensor matmul(const Tensor&, const Tensor&, bool, bool) { return {}; }
  virtual Tensor matmul_f32out(const Tensor&, const Tensor&, bool, bool) { return {}; }  // f16 operands, f32 product
  virtual Tensor embedding(const Tensor&, const Tensor&) { return {}; }
  // acc: see ops::embedding_backward; a backend returns acc itself when it added the gradient into it.
  virtual Tensor embedding_backward(const Tensor&, const Tensor&, int64_t, const Tensor& /*acc*/) { return {}; }
  virtual ops::LayerNormOut layernorm(const Tensor&, const Tensor&, const Tensor&, double) { return {}; }
  // acc: see ops::layernorm_backward; a backend that adds it in its dx kernel sets dx_has_acc, else ops adds it.
  virtual ops::LayerNormGrads layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                 const Tensor&, bool, ops::LnGrads, const Tensor&) { return {}; }
  virtual Tensor gelu(const Tensor&) { return {}; }
  virtual Tensor gelu_backward(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor linear(const Tensor&, const Tensor&, const Tensor&) { return {}; }  // 2-D x (rows, in), bias fused
  virtual ops::LinearWeightGrads linear_weight_grads(const Tensor&, const Tensor&) { return {}; }  // 2-D g, x
  virtual Tensor linear_residual(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return {}; }  // 2-D x, r
  virtual ops::RMSNormOut rmsnorm(const Tensor&, const Tensor&, double) { return {}; }
  virtual ops::RMSNormGrads rmsnorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return {}; }
  virtual Tensor rope(const Tensor&, const Tensor&, const Tensor&, int64_t /*pos0*/, bool /*inverse*/,
                      int64_t /*rot_heads*/) {
    return {};
  }
  virtual Tensor swiglu(const Tensor&, const Tensor&) { return {}; }
  virtual ops::SwiGLUGrads swiglu_backward(const Tensor&, const Tensor&, const Tensor&) { return {}; }
  virtual Tensor swiglu_packed(const Tensor&) { return {}; }
  virtual Tensor swiglu_packed_backward(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor relu2(const Tensor&) { return {}; }
  virtual Tensor relu2_backward(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor softmax(const Tensor&, bool) { return {}; }
  virtual Tensor softmax_backward(const Tensor&, const Tensor&) { return {}; }
  virtual ops::CrossEntropyOut cross_entropy(const Tensor&, const Tensor&, int64_t) { return {}; }
  virtual Tensor cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, int64_t, int64_t) {
    return {};
  }
  virtual ops::CrossEntropyOut cross_entropy_fused(const Tensor&, const Tensor&, int64_t, double) { return {}; }
  virtual Tensor dropout(const Tensor&, double, uint64_t, uint64_t) { return {}; }
  virtual ops::AttentionOut attention(const Tensor&, const Tensor&, const Tensor&, const ops::AttentionParams&) {
    return {};
  }
  virtual ops::AttentionGrads attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                 const Tensor&, const Tensor&, const ops::AttentionParams&,
                                                 bool /*packed*/) {
    return {};
  }
  // Strided copies (any strides/offset of the source view; same dtype): a contiguous copy, and narrow's
  // backward (zeros of `shape` with g at [start, start + g.size(dim)) along dim).
  virtual Tensor copy(const Tensor&) { return {}; }
  virtual Tensor narrow_backward(const Tensor&, const Shape&, int64_t /*dim*/, int64_t /*start*/) { return {}; }
  // ops::cat: the xs (same dtype, validated) joined along dim into a new contiguous tensor.
  virtual Tensor cat(const std::vector<Tensor>&, int64_t /*dim*/) { return {}; }
  // Dtype conversion of a contiguous tensor (f32 <-> f16 storage).
  virtual Tensor cast(const Tensor&, DType) { return {}; }
};

// The active GPU backend (nullptr = CPU only). Not owned; the caller keeps it alive while set.
Backend* active_backend();
void set_active_backend(Backend* b);

// Per-process counters the metrics stream reports (ops run on each side).
struct DispatchStats {
  int64_t cpu_ops = 0;
  int64_t gpu_ops = 0;
};
DispatchStats& dispatch_stats();

// One snapshot for the metrics stream: ops per side (process-wide) plus the active backend's queue counters
// (all zero and backend empty when no GPU backend is active). Counters only grow: report differences.
struct DeviceCounters {
  int64_t cpu_ops = 0, gpu_ops = 0;
  std::string backend;  // active backend's name, "" = CPU only
  QueueCounters queue;
};
DeviceCounters device_counters();

// ALPHA_VK_CHECK=1 debug mode: after each op the GPU ran, the dispatcher runs it again on the CPU (inputs are
// downloaded) and throws GpuCheckError naming the op, its input shapes and the first element that differs by
// more than the op class's tolerance (relative to the largest CPU value). Slow: for debugging only.
class GpuCheckError : public Error { using Error::Error; };
bool gpu_check_enabled();
void set_gpu_check(bool on);          // overrides ALPHA_VK_CHECK (tests)
void corrupt_next_gpu_result();       // test hook: the next GPU result is made wrong before it is checked

}  // namespace alpha
