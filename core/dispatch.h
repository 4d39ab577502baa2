// The dispatcher's machinery, shared by core/ops.cpp and core/ops_llama.cpp (internal to core/): run an op on
// the active GPU backend when it wants and accepts it, else on the CPU kernels; the f16 storage rule; the checks
// every op applies to its inputs. Not part of core's interface: rooms above call core/ops.h.
#pragma once
#include <initializer_list>
#include <type_traits>

#include "core/backend.h"
#include "core/gpu_check.h"
#include "core/op_timing.h"
#include "core/ops.h"

namespace alpha::ops::detail {

using gpu_check::check_result;
using gpu_check::check_state;
using gpu_check::CheckState;
using gpu_check::corrupt;


template <class R> Tensor first_tensor(const R& r) {
  if constexpr (std::is_same_v<R, Tensor>) return r;
  else if constexpr (std::is_same_v<R, LayerNormOut>) return r.y;
  else if constexpr (std::is_same_v<R, LayerNormGrads>) return r.dx.defined() ? r.dx : r.dw.defined() ? r.dw : r.db;
  else if constexpr (std::is_same_v<R, AttentionOut>) return r.out;
  else if constexpr (std::is_same_v<R, AttentionGrads>) return r.dq;
  else if constexpr (std::is_same_v<R, RMSNormOut>) return r.y;
  else if constexpr (std::is_same_v<R, RMSNormGrads>) return r.dx;
  else if constexpr (std::is_same_v<R, SwiGLUGrads>) return r.dgate;
  else return r.loss;
}

// ---- f16 storage (core/ops.h): the CPU kernels see f32 copies of f16 inputs; outputs are rounded back ----
inline Tensor up(const Tensor& t) { return t.defined() && t.dtype() == DType::f16 ? t.to(DType::f32) : t; }
inline Tensor down(const Tensor& t) { return t.defined() && t.dtype() == DType::f32 ? t.to(DType::f16) : t; }
// The f16 output rule: some float input (f16/f32; f64 and i32 do not vote) is f16 and none is f32.
inline bool half_out(std::initializer_list<Tensor> ts) {
  bool h = false;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (t.dtype() == DType::f32) return false;
    h = h || t.dtype() == DType::f16;
  }
  return h;
}
// Which outputs become f16 (core/ops.h's exceptions stay f32).
inline void to_half(Tensor& r) { r = down(r); }
inline void to_half(LayerNormOut& r) { r.y = down(r.y); }
inline void to_half(LayerNormGrads& r) { r.dx = down(r.dx); }
inline void to_half(RMSNormOut& r) { r.y = down(r.y); }        // rstd stays f32
inline void to_half(RMSNormGrads& r) { r.dx = down(r.dx); }    // dw stays f32
inline void to_half(SwiGLUGrads& r) { r.dgate = down(r.dgate); r.dup = down(r.dup); }
inline void to_half(AttentionOut& r) {  // lse stays f32; out keeps its (B, T, H, D) storage order
  r.out = down(r.out.transpose(1, 2)).transpose(1, 2);
}
inline void to_half(AttentionGrads& r) {
  if (r.dqkv.defined()) {  // round dqkv once; dq/dk/dv are rebuilt as its head views (as vk/attention.cpp makes them)
    const int64_t B = r.dq.size(0), H = r.dq.size(1), T = r.dq.size(2), D = r.dq.size(3);
    r.dqkv = down(r.dqkv);
    const Tensor split = r.dqkv.view({B, T, 3, H, D});
    r.dq = split.narrow(2, 0, 1).squeeze(2).transpose(1, 2);
    r.dk = split.narrow(2, 1, 1).squeeze(2).transpose(1, 2);
    r.dv = split.narrow(2, 2, 1).squeeze(2).transpose(1, 2);
    return;
  }
  for (Tensor* t : {&r.dq, &r.dk, &r.dv}) *t = down(t->transpose(1, 2)).transpose(1, 2);
}
inline void to_half(CrossEntropyOut& r) {  // the loss stays f32
  if (r.dlogits.defined()) r.dlogits = down(r.dlogits);
}
template <class R> void to_half(R&) {}  // ops without an f16 rule
enum class Half { by_inputs, no, yes };

// Runs gpu(backend) when the backend wants the op and accepts it, else cpu(). R is Tensor or a struct whose
// first tensor tells whether the backend produced it. `op` and `inputs` name the op in ALPHA_VK_CHECK reports.
// CPU results are rounded to f16 per `half` (by default the f16 rule on `inputs`); cpu() must read its f16
// inputs through up().
template <class R, class G, class C>
R dispatch(const char* op, std::initializer_list<Tensor> inputs, OpClass cls, int64_t work, G&& gpu, C&& cpu_f32,
           Half half = Half::by_inputs) {
  const bool h = half == Half::yes || (half == Half::by_inputs && half_out(inputs));
  auto cpu = [&] {
    R r = cpu_f32();
    if (h) to_half(r);
    return r;
  };
  if (Backend* be = active_backend(); be && be->wants(cls, work)) {
    R r = gpu(*be);
    if (first_tensor(r).defined()) {
      ++dispatch_stats().gpu_ops;
      if (CheckState& st = check_state(); st.on) {
        if (st.corrupt_next) {
          st.corrupt_next = false;
          corrupt(first_tensor(r));
        }
        ++dispatch_stats().cpu_ops;
        check_result(op, cls, r, cpu(), inputs);
      }
      return r;
    }
  }
  ++dispatch_stats().cpu_ops;
  return timed_op(op, inputs, cpu);
}

inline void check_float(const Tensor& t, const char* op, const char* what) {
  ALPHA_CHECK(t.defined(), ValueError, "[{}] {} is undefined", op, what);
  ALPHA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, DTypeError,
              "[{}] {} must be f32 or f64, got {}", op, what, t.str());
}

// Ops with an f16 rule (core/ops.h) also take f16.
inline void check_float16(const Tensor& t, const char* op, const char* what) {
  ALPHA_CHECK(t.defined(), ValueError, "[{}] {} is undefined", op, what);
  ALPHA_CHECK(is_float(t.dtype()), DTypeError, "[{}] {} must be f32, f64 or f16, got {}", op, what, t.str());
}

// Same dtype, or f16 with f32 (computed and returned as f32).
inline void check_mixable(const Tensor& a, const Tensor& b, const char* op) {
  const bool mix = (a.dtype() == DType::f16 && b.dtype() == DType::f32) || (a.dtype() == DType::f32 && b.dtype() == DType::f16);
  ALPHA_CHECK(a.dtype() == b.dtype() || mix, DTypeError, "[{}] dtypes differ: {} and {}", op, a.str(), b.str());
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  ALPHA_CHECK(a.dtype() == b.dtype(), DTypeError, "[{}] dtypes differ: {} and {}", op, a.str(), b.str());
}

inline void check_index(const Tensor& t, const char* op, const char* what) {
  ALPHA_CHECK(t.defined(), ValueError, "[{}] {} is undefined", op, what);
  ALPHA_CHECK(t.dtype() == DType::i32, DTypeError, "[{}] {} must be i32, got {}", op, what, t.str());
}

inline int64_t wrap(int64_t d, int64_t nd, const char* op) {
  const int64_t w = d < 0 ? d + nd : d;
  ALPHA_CHECK(w >= 0 && w < nd, IndexError, "[{}] dim {} out of range for a {}-d tensor", op, d, nd);
  return w;
}

}  // namespace alpha::ops::detail
