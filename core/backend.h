// The GPU backend interface the dispatcher talks to. vk/ implements it; core never includes Vulkan.
// Every method may decline by returning an undefined Tensor (unsupported dtype, layout or size): the
// dispatcher then runs the CPU kernel. Signatures mirror core/ops.h; inputs are already validated.
#pragma once
#include <cstdint>
#include <string>

#include "core/ops.h"

namespace alpha {

// Op classes the size-threshold dispatcher distinguishes (thresholds are per class).
enum class OpClass : uint8_t { elementwise, reduce, matmul, embedding, layernorm, gelu, softmax, cross_entropy, dropout };
const char* op_class_name(OpClass c);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Should an op of this class with `work` (≈ flops or elements) run here? The size-threshold policy.
  virtual bool wants(OpClass cls, int64_t work) const = 0;

  virtual Tensor add(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor sub(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor mul(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor div(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor unary(const char* /*op: neg exp log sqrt*/, const Tensor&) { return {}; }
  virtual Tensor scale(const Tensor&, double /*mul*/, double /*add*/) { return {}; }
  virtual Tensor sum(const Tensor&, int64_t /*dim*/, bool /*keepdim*/) { return {}; }
  virtual Tensor matmul(const Tensor&, const Tensor&, bool, bool) { return {}; }
  virtual Tensor embedding(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor embedding_backward(const Tensor&, const Tensor&, int64_t) { return {}; }
  virtual ops::LayerNormOut layernorm(const Tensor&, const Tensor&, const Tensor&, double) { return {}; }
  virtual ops::LayerNormGrads layernorm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                                 const Tensor&, bool) { return {}; }
  virtual Tensor gelu(const Tensor&) { return {}; }
  virtual Tensor gelu_backward(const Tensor&, const Tensor&) { return {}; }
  virtual Tensor softmax(const Tensor&, bool) { return {}; }
  virtual Tensor softmax_backward(const Tensor&, const Tensor&) { return {}; }
  virtual ops::CrossEntropyOut cross_entropy(const Tensor&, const Tensor&, int64_t) { return {}; }
  virtual Tensor cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, int64_t, int64_t) {
    return {};
  }
  virtual Tensor dropout(const Tensor&, double, uint64_t, uint64_t) { return {}; }
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

}  // namespace alpha
