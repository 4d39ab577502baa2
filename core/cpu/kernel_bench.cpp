#include "core/cpu/kernel_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

#include "core/cpu/attention.h"
#include "core/cpu/cross_entropy.h"
#include "core/cpu/elementwise.h"
#include "core/cpu/gelu.h"
#include "core/cpu/layernorm.h"
#include "core/cpu/matmul.h"
#include "core/cpu/simd.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace alpha::cpu {

namespace {

Tensor randn(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor t = Tensor::empty(s, DType::f32);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.normal());
  return t;
}

}  // namespace

double median_ms(int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();  // page faults, pool wake-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[static_cast<size_t>(reps / 2)];
}

CpuPeaks measure_peaks() {
  CpuPeaks pk;
  // Memory: a[i] = b[i] + 0.5 c[i] over 3 x 64 MiB (far past any cache), 12 bytes per element.
  const int64_t n = int64_t{16} << 20;
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n), 1.0f), c(static_cast<size_t>(n), 2.0f);
  const double mem_ms = median_ms(1, 5, [&] {
    parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) { simd::binary(0, b.data() + i0, c.data() + i0, a.data() + i0, i1 - i0); });
  });
  pk.mem_gbs = 12.0 * static_cast<double>(n) / (mem_ms * 1e6);
  // Compute: every pool thread runs independent FMA chains (registers only).
  const int threads = num_threads();
  std::vector<int64_t> flops(static_cast<size_t>(threads));
  std::vector<float> sink(static_cast<size_t>(threads));
  const double fma_ms = median_ms(1, 3, [&] {
    parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) sink[t] = simd::fma_chains(4'000'000, 1.0f + float(t), &flops[t]);
    });
  });
  double total = 0;
  for (int64_t f : flops) total += static_cast<double>(f);
  pk.fma_gflops = total / (fma_ms * 1e6);
  return pk;
}

std::vector<KernelRate> bench_kernels() {
  constexpr int64_t B = 4, T = 256, C = 768, H = 12, V = 50257;  // GPT-2 small at B4 T256
  const int64_t BT = B * T;
  const Tensor x = randn({BT, C}, 1), y = randn({BT, C}, 2), h = randn({BT, 4 * C}, 3), dh = randn({BT, 4 * C}, 4);
  const Tensor w = randn({C}, 5), q = randn({B, H, T, C / H}, 6), k = randn({B, H, T, C / H}, 7);
  const Tensor v = randn({B, H, T, C / H}, 8), wfc = randn({4 * C, C}, 9), logits = randn({BT, V}, 10);
  Tensor tgt = Tensor::zeros({BT}, DType::i32);
  const auto ln = cpu::layernorm(x, w, Tensor(), 1e-5);
  ops::AttentionParams ap;
  ap.scale = 1.0 / std::sqrt(double(C / H));
  const auto at = cpu::attention(q, k, v, ap);
  const auto ce = cpu::cross_entropy(logits, tgt, -100);
  const double f = 4.0;  // bytes per float
  struct Case {
    const char* name;
    std::string shape;
    double bytes, flops;
    std::function<void()> fn;
  };
  const double attn_flops = 2.0 * 2.0 * B * H * double(T) * T * (C / H);  // QK^T and PV, full (no causal skip)
  const std::vector<Case> cases = {
      {"add", "(1024, 768)", 3 * f * BT * C, 0, [&] { cpu::binary(BinaryOp::add, x, y); }},
      {"gelu", "(1024, 3072)", 2 * f * BT * 4 * C, 0, [&] { cpu::gelu(h); }},
      {"gelu_backward", "(1024, 3072)", 3 * f * BT * 4 * C, 0, [&] { cpu::gelu_backward(dh, h); }},
      {"layernorm", "(1024, 768)", 2 * f * BT * C, 0, [&] { cpu::layernorm(x, w, Tensor(), 1e-5); }},
      {"layernorm_backward", "(1024, 768)", 3 * f * BT * C, 0,
       [&] { cpu::layernorm_backward(y, x, w, ln.mean, ln.rstd, false); }},
      {"cross_entropy", "(1024, 50257)", f * BT * V, 0, [&] { cpu::cross_entropy(logits, tgt, -100); }},
      {"cross_entropy_backward", "(1024, 50257)", 2 * f * BT * V, 0,
       [&] { cpu::cross_entropy_backward(logits, tgt, ce.lse, 1.0, ce.count, -100); }},
      {"attention", "B4 H12 T256 D64", 4 * f * B * H * T * (C / H), attn_flops, [&] { cpu::attention(q, k, v, ap); }},
      {"attention_backward", "B4 H12 T256 D64", 8 * f * B * H * T * (C / H), 2.5 * attn_flops,
       [&] { cpu::attention_backward(y.view({B, T, H, C / H}).transpose(1, 2), q, k, v, at.out, at.lse, ap, false); }},
      {"matmul fc", "1024x768x3072", f * (BT * C + 4 * C * C + BT * 4 * C), 2.0 * BT * C * 4 * C,
       [&] { cpu::matmul(x, wfc, false, true); }},
  };
  std::vector<KernelRate> out;
  const bool was = simd_enabled();
  for (const Case& c : cases) {
    KernelRate r{c.name, c.shape};
    set_simd_enabled(true);
    r.ms = median_ms(1, 7, c.fn);
    set_simd_enabled(false);
    r.oracle_ms = median_ms(1, 3, c.fn);
    r.gbs = c.bytes / (r.ms * 1e6);
    r.gflops = c.flops / (r.ms * 1e6);
    out.push_back(r);
  }
  set_simd_enabled(was);
  // AdamW is in optim/ (above core): its kernel is timed here directly on 124M-parameter-sized state.
  {
    const int64_t n = int64_t{1} << 24;  // 16M params: 4 arrays x 64 MiB
    std::vector<float> p(static_cast<size_t>(n), 0.1f), m(static_cast<size_t>(n)), vv(static_cast<size_t>(n)),
        g(static_cast<size_t>(n), 0.01f);
    const float c[8] = {0.999f, 0.9f, 0.1f, 0.99f, 0.01f, 0.5f, 1e-8f, -1e-3f};
    KernelRate r{"adamw (simd kernel)", "16M params"};
    r.ms = median_ms(1, 5, [&] {
      parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
        simd::adamw(p.data() + i0, m.data() + i0, vv.data() + i0, g.data() + i0, i1 - i0, c, true);
      });
    });
    r.gbs = 7.0 * f * static_cast<double>(n) / (r.ms * 1e6);  // read p m v g, write p m v
    out.push_back(r);
  }
  return out;
}

}  // namespace alpha::cpu
