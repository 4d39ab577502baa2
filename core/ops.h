// Backend-neutral tensor ops (no autograd). Each function validates its inputs once, then the dispatcher
// (ops.cpp) runs it on the CPU kernels (core/cpu/*) or, when one is active and the op is big enough, on a
// GPU backend (vk/). The differentiable versions built on these live in autograd/ops.h.
//
// Dimension legend: B batch, T time, C channels, H heads, V vocabulary, N rows (= B*T), M/K/N matmul.
//
// f16 storage: every float op also takes f16 tensors and computes in f32. When all of an op's float inputs
// are f16 its float outputs are f16; mixing f16 with f32 computes and returns f32 (f64 never mixes).
// Exceptions that stay f32: cross_entropy's loss, layernorm's mean/rstd and dw/db, attention's lse (forward
// output, backward input), embedding_backward's weight gradient (sums over many rows: parameter gradients keep f32 precision). The CPU runs f16 ops by
// upcasting the inputs to f32 and rounding the outputs (one place: the dispatcher); the GPU has f16-storage
// kernel variants.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace alpha::ops {

// ---- layout ----
// contiguous(x): x when already contiguous, else a contiguous copy (any dtype). The copy runs on the GPU when
// the backend wants the size or x's data lives only on the GPU (copying it on the CPU would download it).
Tensor contiguous(const Tensor& x);
Tensor reshape(const Tensor& x, const Shape& shape);  // a view when x is contiguous, else contiguous(x).view
// Narrow's backward: zeros of `shape` with g placed at [start, start + g.size(dim)) along dim.
Tensor narrow_backward(const Tensor& g, const Shape& shape, int64_t dim, int64_t start);
// The xs joined along dim (every other size equal, one dtype; any views): a new contiguous tensor, never a view
// of an input, so cat({x.narrow(...)}, dim) is a fresh offset-0 copy of a slice (what GPU kernels read).
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
// x converted to `dtype` (float <-> float; round to nearest even, inf/NaN kept); x itself when it already is.
Tensor cast(const Tensor& x, DType dtype);
// cast of an f32 weight to f16, kept beside the weight's storage and reused while the weight is unwritten (its
// storage version); GpuAdamW writes it in the update. Other casts (views, other dtypes) are plain casts.
Tensor cast_cached(const Tensor& x, DType dtype);

// ---- element-wise (NumPy broadcasting; float dtypes; result dtype = inputs' dtype, f16 + f32 -> f32) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor scale(const Tensor& x, double s);       // x * s
Tensor add_scalar(const Tensor& x, double s);  // x + s
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);  // dst += alpha * src (src broadcasts)

// ---- reductions over one dim (negative dims count from the end) ----
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
// sum over dim with an f32 result for f16 x too (f32 accumulation, no f16 rounding): an f32 master bias's gradient.
Tensor sum_f32(const Tensor& x, int64_t dim);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // values, i32 argmax
Tensor sum_all(const Tensor& x);                         // 0-d
Tensor sum_to(const Tensor& x, const Shape& shape);      // undo broadcasting: sum x down to `shape`

// ---- matmul ----
// a: (..., M, K) [(..., K, M) if trans_a], b: (..., K, N) [(..., N, K) if trans_b] -> (..., M, N).
// Batch dims broadcast (a 2-D weight against a batch is the common case). f32 and f64.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// The same product returned in f32 whatever the operands (f16 ones are not rounded back to f16): weight gradients
// of f16 training, which go to f32 master weights.
Tensor matmul_f32(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// ---- embedding ----
Tensor embedding(const Tensor& weight, const Tensor& idx);                         // (V,C), i32 (...) -> (..., C)
// acc ((V, C), optional): the weight's gradient so far; returns add(acc, the gradient), written into acc's storage
// where acc is f32, a backend can and no other tensor holds acc (Tensor::exclusive).
Tensor embedding_backward(const Tensor& dout, const Tensor& idx, int64_t vocab,
                          const Tensor& acc = {});  // (..., C) -> (V, C)

// ---- LayerNorm over the last dim; w and b are (C) or undefined ----
struct LayerNormOut {
  Tensor y;     // (..., C)
  Tensor mean;  // (...) f32/f64 like x (f32 for f16 x)
  Tensor rstd;  // (...)
};
LayerNormOut layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
struct LayerNormGrads {
  Tensor dx, dw, db;  // dw/db undefined when w/b are
  bool dx_has_acc = false;  // (backends) dx already holds acc + dx, added in the dx kernel
};
// Which gradients to compute: all, dx alone, or dw/db alone (ag defers the parameters' to after the walk).
enum class LnGrads { all, dx, params };
// acc (x's shape and dtype, not with LnGrads::params): dx = acc + dx, dx rounded to x's dtype first, as a separate
// add of the two would give (the gradient accumulation of ag::take_grad; vk adds it in the dx kernel).
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean,
                                  const Tensor& rstd, bool has_bias, LnGrads which = LnGrads::all,
                                  const Tensor& acc = Tensor());

// ---- GELU, tanh approximation (GPT-2's) ----
Tensor gelu(const Tensor& x);
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

// ---- Linear layer with its bias in the GEMM's epilogue where the backend has one (vk: the f16 coopmat tiles), else
// matmul then add (core/ops_linear.cpp) ----
// y = x @ w^T + b: x (..., in), w (out, in), b (out) or undefined -> (..., out)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// The weight and bias gradients of a linear layer, both f32: dw = g^T x (out, in), db = g summed over its rows (out),
// from g (R, out) and x (R, in). One GEMM where the backend sums the bias into it (vk: the f16 coopmat tiles),
// else matmul_f32 and sum_f32.
struct LinearWeightGrads {
  Tensor dw, db;
};
LinearWeightGrads linear_weight_grads(const Tensor& g, const Tensor& x);
// r + (x @ w^T + b): a linear layer's output added to the residual stream r (..., out), in the GEMM's epilogue where
// the backend has one (vk: the f16 coopmat tiles), else linear then add, with the same roundings.
Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r);

// ---- Llama-style ops (core/ops_llama.cpp; kernels core/cpu/{rmsnorm,rope,swiglu}.cpp, vk/ alike) ----
// RMSNorm over the last dim: y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps); w (C) or undefined.
struct RMSNormOut {
  Tensor y;     // (..., C)
  Tensor rstd;  // (...) f32/f64 like x (f32 for f16 x)
};
RMSNormOut rmsnorm(const Tensor& x, const Tensor& w, double eps);
struct RMSNormGrads {
  Tensor dx, dw;  // dw (C) f32/f64 (f32 for f16 x); undefined when w is
};
RMSNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd);

// Rotary position embedding, rotate-half convention (GPT-NeoX / Hugging Face Llama): x (B, T, H, D), D even;
// cos, sin (P, D/2) f32 or f64 tables, P >= pos0 + T, (p, i) = cos/sin(p * base^(-2i/D)). Row t is at position
// pos0 + t: y[i] = x[i] cos - x[i + D/2] sin, y[i + D/2] = x[i + D/2] cos + x[i] sin, i < D/2. inverse: the
// opposite rotation (sin -> -sin), which is the backward. Output (B, T, H, D) contiguous, x's dtype.
// rot_heads >= 0: only heads [0, rot_heads) rotate, the rest are copied (x = a fused (B, T, H + 2Hkv, D) qkv
// projection with rot_heads = H + Hkv: q and k rotate, v passes through, in one pass); -1: every head.
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0, bool inverse = false,
            int64_t rot_heads = -1);
// The (P, D/2) cos and sin tables for rope (computed in f64, stored as `dtype`).
std::pair<Tensor, Tensor> rope_tables(int64_t P, int64_t D, double base, DType dtype = DType::f32);

// MLP activations of Llama-style blocks. swiglu: silu(gate) * up (same shapes); relu2: max(x, 0)^2.
Tensor swiglu(const Tensor& gate, const Tensor& up);
struct SwiGLUGrads {
  Tensor dgate, dup;
};
SwiGLUGrads swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up);
// SwiGLU of the halves of one tensor gu (..., 2F) = [gate | up] (a fused gate/up projection) -> (..., F); the
// backward returns d(gu) (..., 2F) as one tensor. Neither direction splits or assembles the halves on the GPU.
Tensor swiglu_packed(const Tensor& gu);
Tensor swiglu_packed_backward(const Tensor& dy, const Tensor& gu);
Tensor relu2(const Tensor& x);
Tensor relu2_backward(const Tensor& dy, const Tensor& x);

// ---- softmax over the last dim ----
// causal: x is (..., Tq, Tk); row i may see columns j <= i + (Tk - Tq) (the rest get probability 0).
Tensor softmax(const Tensor& x, bool causal);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);  // y = softmax output

// ---- cross-entropy on integer targets: fused log-softmax + NLL, mean over non-ignored rows ----
struct CrossEntropyOut {
  Tensor loss;    // 0-d, dtype of logits
  Tensor lse;     // (N) f64 row log-sum-exp, saved for backward
  int64_t count;  // rows that were not ignored
  Tensor dlogits;  // cross_entropy_fused only: cross_entropy_backward's result for its dloss
};
CrossEntropyOut cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -1);
// dlogits = dloss * (softmax(logits) - onehot(target)) / count; ignored rows get 0.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, double dloss,
                              int64_t count, int64_t ignore_index = -1);
// The forward and the backward for a seed known before the forward (the trainer's loss scale): what
// cross_entropy, then cross_entropy_backward(..., dloss, ...) return, with dlogits filled; the GPU reads the
// logits once instead of twice.
CrossEntropyOut cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double dloss);

// ---- dropout ----
// Element at row-major flat index i is kept iff u32_to_unit(philox_at(seed, offset + i)) >= p, and kept
// values are scaled by 1/(1-p). The same call on dy is the backward. p in [0, 1).
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

// ---- fused attention (flash-attention style: the (B, H, Tq, Tk) scores are never stored) ----
// q (B, H, Tq, D), k and v (B, H, Tk, D), same float dtype (f16 too), any strides (e.g. head views of a qkv projection).
// out = dropout(softmax(q k^T * scale [+ causal mask])) v: row i sees keys j <= i + (Tk - Tq) when causal
// (Tk >= Tq). Dropout drops probability (b, h, i, j) iff u32_to_unit(philox_at(seed, offset +
// ((b*H + h)*Tq + i)*Tk + j)) < p: the mask ops::dropout draws on the unfused (B, H, Tq, Tk) probabilities.
// out is a (B, H, Tq, D) view of a contiguous (B, Tq, H, D) tensor (out.transpose(1, 2) is contiguous);
// lse (B, H, Tq) is each row's log-sum-exp of the scaled, masked scores (before dropout); f32 for f16 q.
struct AttentionOut {
  Tensor out, lse;
};
struct AttentionParams {
  double scale = 1.0;
  bool causal = true;
  double p = 0.0;  // dropout on the probabilities, in [0, 1)
  uint64_t seed = 0, offset = 0;
};
AttentionOut attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& ap);
// Gradients for dout (B, H, Tq, D); q, k, v, out, lse as the forward saw/made them (P is recomputed). dout,
// out and the gradients (dqkv too) have q's dtype; lse is f32 for f16 q.
// dq, dk, dv are laid out like out (views of contiguous (B, T, H, D) tensors). packed (needs Tq == Tk): they
// are instead the head views of one fresh dqkv (B, T, 3*H*D), laid out as GPT's qkv projection output
// (q, k, v at channel offsets 0, H*D, 2*H*D), so that gradient needs no assembling.
struct AttentionGrads {
  Tensor dq, dk, dv;
  Tensor dqkv;  // packed only
};
AttentionGrads attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const AttentionParams& ap,
                                  bool packed = false);

}  // namespace alpha::ops
