// Differentiable ops: each runs its forward through core/ops.h (the dispatcher) and records a backward
// closure on the tape (autograd/tape.h). The closure for each op sits right under its forward in
// autograd/<family>.cpp and captures only what the backward needs.
//
// Dimension legend: B batch, T time, C channels, H heads, D head size, V vocabulary, N = B*T rows.
#pragma once
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace alpha::ag {

// ---- element-wise (broadcasting) — autograd/elementwise.cpp ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor scale(const Tensor& x, double s);
Tensor add_scalar(const Tensor& x, double s);

// ---- reductions — autograd/reduce.cpp ----
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);  // grad flows to the first argmax
Tensor sum_all(const Tensor& x);
Tensor mean_all(const Tensor& x);

// ---- views and copies — autograd/view.cpp ----
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// xs joined along dim (a new tensor); the backward hands each input a fresh contiguous copy of its slice of
// the gradient (e.g. the q/k/v weights concatenated per forward for one fused GEMM keep their own grads).
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor contiguous(const Tensor& x);
// x converted to another float dtype (f32 <-> f16 storage); the gradient is cast back to x's dtype, so f32
// master weights cast to f16 get f32 gradients — autograd/cast.cpp.
Tensor cast(const Tensor& x, DType dtype);

// ---- matmul — autograd/matmul.cpp ----
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// y = x @ w^T + b: x (..., in), w (out, in), b (out) or undefined -> (..., out)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);
// f16 training: x f16, w the f32 master weight, b f32 (master), f16 or undefined. The forward runs on f16 copies of w
// and an f32 b; w's gradient comes back in f32 straight from the GEMM (ops::matmul_f32) and an f32 b's from the
// column sum (ops::sum_f32), never rounded to f16 and cast back.
Tensor linear_master(const Tensor& x, const Tensor& w, const Tensor& b);
// r + linear_master(x, w, b) in one node: the residual stream's add in the GEMM's epilogue where the backend has one
// (ops::linear_residual), else a separate add; the same values either way. r (..., out) f16.
Tensor linear_master_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r);

// ---- NN ops, one file each in autograd/ ----
Tensor embedding(const Tensor& weight, const Tensor& idx);                   // (V,C), i32 (...) -> (..., C)
// embedding(cast(weight, dtype), idx) in one node (f16 training: the gather reads the f16 copy, the gradient goes
// to the f32 weight itself, so a tied head's gradient can take it in place: contribute_fused).
Tensor embedding_cast(const Tensor& weight, const Tensor& idx, DType dtype);
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
// f16 training: x f16, w and b the f32 master parameters (leaves). The forward reads f16 copies, as ag::cast would
// give; dw and db come back in f32 straight from the kernels, deferred beside the linears' weight gradients.
Tensor layernorm_master(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
Tensor gelu(const Tensor& x);
// Llama-style ops (core/ops.h states the math): RMSNorm over the last dim (w (C) or undefined); rotary
// embedding of x (B, T, H, D) at positions pos0.. from (P, D/2) cos/sin tables (constants), heads [0,
// rot_heads) only when rot_heads >= 0 (the rest copied: a fused qkv's v); SwiGLU silu(gate) * up, or of the
// halves of one (..., 2F) gate/up projection (swiglu_packed: the backward writes one (..., 2F) gradient);
// ReLU² max(x, 0)^2; repeat_kv (B, T, Hkv, D) -> (B, T, Hkv * rep, D) for grouped-query attention
// (autograd/view.cpp; the backward sums each group).
Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps = 1e-5);
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t pos0 = 0, int64_t rot_heads = -1);
Tensor swiglu(const Tensor& gate, const Tensor& up);
Tensor swiglu_packed(const Tensor& gu);
Tensor relu2(const Tensor& x);
Tensor repeat_kv(const Tensor& x, int64_t rep);
Tensor softmax(const Tensor& x, bool causal = false);
// Draws its mask offset from rng (advancing it by numel) so the backward replays the same mask.
// Identity (returns x, no RNG use) when p == 0 or training is false.
Tensor dropout(const Tensor& x, double p, Rng& rng, bool training = true);
// logits (N, V), targets i32 (N) -> 0-d mean loss over rows whose target != ignore_index.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -1);
// Fused attention (autograd/attention.cpp): q (B, H, Tq, D), k, v (B, H, Tk, D) -> (B, H, Tq, D), equal to
// dropout(softmax(q k^T / sqrt(D), causal), p, rng, training) @ v including the dropout mask (it reserves the
// same B*H*Tq*Tk RNG positions). The result is a view whose transpose(1, 2) is contiguous (B, Tq, H, D).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double p, Rng& rng,
                 bool training = true);
// The same on GPT's qkv projection output (B, T, 3C) with C = n_head * D (q, k, v at channel offsets 0, C, 2C):
// returns the heads' outputs side by side, (B, T, C). The heads are read in place and the backward writes dqkv
// as one tensor, so neither direction copies or assembles the (B, H, T, D) head tensors.
Tensor attention_qkv(const Tensor& qkv, int64_t n_head, bool causal, double p, Rng& rng, bool training = true);

}  // namespace alpha::ag
