// Vectorized f32 CPU kernels (Google Highway, dynamic dispatch: one binary runs the best of SSE4, AVX2, AVX-512
// or NEON that the CPU has). The plain loops in the op files stay the readable oracle; tests/test_cpu_simd.cpp
// compares every kernel here with them on every target Highway compiled. Pointers are contiguous, n elements.
//
// Determinism: lanes keep fixed partial sums combined in a fixed order, so the same target gives the same bits
// run to run and at any thread count; different targets (vector widths) may differ in the last bits.
// exp/log are Highway's polynomial approximations (<= 2 ulp); special values (NaN, +-inf, 0) follow std::.
#pragma once
#include <cstdint>
#include <string>

namespace alpha::cpu {

// On by default; ALPHA_CPU_SIMD=0 in the environment (read once) or set_simd_enabled(false) selects the oracles.
bool simd_enabled();
void set_simd_enabled(bool on);
std::string simd_target();  // Highway's name for the target dispatch picks on this CPU, e.g. "AVX3"

namespace simd {

// Element-wise (simd_map.cpp). op codes follow BinaryOp / UnaryOp: add sub mul div; neg exp log sqrt.
void binary(int op, const float* a, const float* b, float* out, int64_t n);
void unary(int op, const float* x, float* out, int64_t n);
void affine(const float* x, float* out, int64_t n, float mul, float add);  // x * mul + add
void axpy(float* dst, const float* src, int64_t n, float alpha);         // dst += alpha * src (mul, then add)
void gelu(const float* x, float* y, int64_t n);
void gelu_backward(const float* dy, const float* x, float* dx, int64_t n);
double sum(const float* x, int64_t n);                         // accumulates in double lanes
void sum_into(double* acc, const float* x, int64_t n);         // acc[i] += x[i], in double
float dot(const float* a, const float* b, int64_t n);
// One AdamW step over n elements: c = {decay, b1, 1-b1, b2, 1-b2, sqrt(bc2), eps, -lr/bc1} (optim/adamw.cpp).
void adamw(float* p, float* m, float* v, const float* g, int64_t n, const float* c, bool decay);
// Compute-peak probe for kernel_bench.cpp: 8 independent FMA chains, iters steps; *flops = flops done.
float fma_chains(int64_t iters, float seed, int64_t* flops);

// Row kernels (simd_rows.cpp). Legend: C channels, n visible entries of a row of Tk.
void layernorm_row(const float* x, const float* w, const float* b, float* y, int64_t C, double eps, float* mean,
                   float* rstd);  // w, b may be null
void layernorm_backward_row(const float* dy, const float* x, const float* w, float mean, float rstd, float* dx,
                            int64_t C);
// dw[c] = sum_n dy * (x - mean) * rstd, db[c] = sum_n dy over rows [0, N), channels [c0, c1) (either may be null).
void layernorm_param_grads(const float* dy, const float* x, const float* mean, const float* rstd, int64_t N,
                           int64_t C, int64_t c0, int64_t c1, float* dw, float* db);
// Softmax of the first n of Tk entries, zeros after; returns false (nothing written) if the row holds a NaN.
bool softmax_row(const float* x, float* y, int64_t n, int64_t Tk);
void softmax_backward_row(const float* dy, const float* y, float* dx, int64_t n);
// log(sum(exp(x))) over n entries, max-subtracted; false if the row holds a NaN or +-inf (use the oracle).
bool log_sum_exp(const float* x, int64_t n, double* lse);
void scaled_exp_shift(const float* x, float* out, int64_t n, double shift, float scale);  // scale * exp(x - shift)
// In place over the first n of Tk scores: p = exp(s - lse(s)), zeros after; returns lse, or NaN (row untouched)
// when the row holds a NaN or +-inf.
float attention_probs_row(float* s, int64_t n, int64_t Tk);
// In place: s <- p = exp(s - L), dp <- p * (dp - drow) * scale for the first n of Tk, zeros after.
void attention_grad_row(float* s, float* dp, int64_t n, int64_t Tk, float L, float drow, float scale);

}  // namespace simd
}  // namespace alpha::cpu
