// `alpha bench gpu --only overlap`: does a weight gradient hide the backward walk's memory-bound kernels when both
// run in one epoch (no barrier between them)? Wall ms of whole calls, no per-dispatch timestamps (they serialize
// dispatches). The deferred weight gradients run after the walk (autograd/tape.h); this measures what moving them
// into the walk could gain; and two half batches' chains interleaved one kernel apart against the whole batch's
// (docs/PERFORMANCE.md, session 36).
// Dimension legend: B batch, T time, C channels, V vocabulary, BT = B*T rows.
#include <functional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/bench_gpu.h"
#include "core/ops.h"
#include "vk/backend.h"

namespace alpha::bench_gpu {

// Named only (not in the default sections). Rows: each kernel alone, then together in the backend's concurrent mode
// (as the deferred phase runs its products): a dW first, then the memory-bound kernels, or the reverse.
nlohmann::json bench_overlap(const GpuBenchOptions& o, vk::VulkanBackend& be) {
  const GPTConfig& mc = o.model;
  const int64_t BT = o.batch * mc.block_size, C = mc.n_embd;
  // The walk's operands: h the MLP's hidden (BT, 4C) and g its gradient, dy a C-wide output's gradient, x a
  // C-wide input, dq the qkv product's gradient (BT, 3C), w LayerNorm's weight (C).
  const Tensor h = fill_f16({BT, 4 * C}, 11), g = fill_f16({BT, 4 * C}, 12), dy = fill_f16({BT, C}, 13);
  const Tensor x = fill_f16({BT, C}, 14), dq = fill_f16({BT, 3 * C}, 15), w = fill_f16({C}, 16);
  const ops::LayerNormOut ln = ops::layernorm(x, w, w, 1e-5);
  const int64_t B = o.batch, T = mc.block_size, H = mc.n_head, D = C / H;
  const AttentionCase ac = attention_case(mc, B, fill_f16({B, T, 3 * C}, 17), fill_f16({B, H, T, D}, 18));
  const ops::AttentionOut att = ops::attention(ac.q, ac.k, ac.v, ac.ap);
  const Tensor dl = fill_f16({BT, mc.vocab_size}, 19);  // the LM head's dlogits
  auto together = [&be](std::function<void()> fn) {
    return [&be, fn] {
      be.set_concurrent(true);
      fn();
      be.set_concurrent(false);
    };
  };
  // proj's dW; a block's four (proj, fc, qkv, attn proj) are 1 + 1 + 3/4 + 1/4 of its flops.
  const double f_proj = 2.0 * double(BT) * double(C) * double(4 * C), f_layer = 3.0 * f_proj;
  auto dw_proj = [&] { ops::linear_weight_grads(dy, h); };  // (C, 4C) over K = BT, with the bias's sums
  // A block's four weight gradients (with their biases' sums) over the rows of the operands given.
  auto dw_four = [](const Tensor& dy_, const Tensor& h_, const Tensor& g_, const Tensor& x_, const Tensor& dq_) {
    ops::linear_weight_grads(dy_, h_);  // proj (C, 4C)
    ops::linear_weight_grads(g_, x_);   // fc (4C, C)
    ops::linear_weight_grads(dq_, x_);  // qkv (3C, C)
    ops::linear_weight_grads(dy_, x_);  // attn proj (C, C)
  };
  auto dw_layer = [&] { dw_four(dy, h, g, x, dq); };
  auto dw_head = [&] { ops::matmul_f32(dl, x, true, false); };  // (V, C) over K = BT
  auto gelu_b = [&] { ops::gelu_backward(g, h); };
  auto ln_b = [&] { ops::layernorm_backward(dy, x, w, ln.mean, ln.rstd, true, ops::LnGrads::dx); };
  auto att_b = [&] { ops::attention_backward(ac.dout, ac.q, ac.k, ac.v, att.out, att.lse, ac.ap, true); };
  const int bursts = o.quick ? 1 : 7;
  nlohmann::json rows = nlohmann::json::array();
  // flops: the row's weight-gradient work (0: none; its bursts then hold 200 calls).
  auto row = [&](const std::string& name, double flops, const std::function<void()>& fn) {
    const double ms = burst_wall_ms(be, fn, flops > 0 ? flops : 1e10, bursts);
    rows.push_back({{"name", name}, {"wall_ms", ms}, {"dw_gflop", flops > 0 ? flops / 1e9 : 0.0}});
  };
  // No per-dispatch timestamps (as `alpha train` runs): they serialize the dispatches this section overlaps.
  const bool profiled = be.runtime().queue().profiling();
  be.set_profiling(false);
  // Full clock first: the GPU idles while the host fills the operands (session 34).
  gpu_ms(be, together([&] { dw_head(); dw_layer(); }), 2, 1, o.quick ? 0.0 : 1.5);
  row("gelu bwd (BT, 4C)", 0, gelu_b);
  row("layernorm bwd (BT, C)", 0, ln_b);
  row("dW proj", f_proj, together(dw_proj));
  row("dW proj, then gelu bwd", f_proj, together([&] { dw_proj(); gelu_b(); }));
  row("gelu bwd, then dW proj", f_proj, together([&] { gelu_b(); dw_proj(); }));
  row("dW proj, then layernorm bwd", f_proj, together([&] { dw_proj(); ln_b(); }));
  row("dW layer", f_layer, together(dw_layer));
  row("dW layer, then gelu bwd", f_layer, together([&] { dw_layer(); gelu_b(); }));
  row("dW layer, then gelu + 2 layernorm bwd", f_layer, together([&] { dw_layer(); gelu_b(); ln_b(); ln_b(); }));
  for (int64_t parts : {4, 8}) {  // the layer's four over a K slice: what a chunked (split-K) schedule would pair
    const int64_t r = BT / parts;
    auto dw_slice = [&, r] {
      dw_four(dy.narrow(0, 0, r), h.narrow(0, 0, r), g.narrow(0, 0, r), x.narrow(0, 0, r), dq.narrow(0, 0, r));
    };
    const std::string k = fmt::format("dW layer over K/{}", parts);
    row(k, f_layer / double(parts), together(dw_slice));
    row(k + ", then gelu + 2 layernorm bwd", f_layer / double(parts), together([&] {
          dw_slice();
          gelu_b();
          ln_b();
          ln_b();
        }));
  }
  // Two half batches' chains interleaved one kernel apart: each epoch then holds one chain's GEMM and the other's
  // memory-bound pass (the queue's hazards place the barriers), against the whole batch's chain. The chain: the MLP
  // half of a block forward, fc (+bias) -> GELU -> proj (+bias) -> LayerNorm, n_layer times.
  {
    const Tensor wfc = fill_f16({4 * C, C}, 20), bfc = fill_f16({4 * C}, 21), wpr = fill_f16({C, 4 * C}, 22);
    const Tensor bpr = fill_f16({C}, 23);
    using Step = std::function<Tensor(const Tensor&)>;
    const std::vector<Step> steps = {
        [&](const Tensor& t) { return ops::linear(t, wfc, bfc); },  // (R, C) -> (R, 4C)
        [&](const Tensor& t) { return ops::gelu(t); },
        [&](const Tensor& t) { return ops::linear(t, wpr, bpr); },  // (R, 4C) -> (R, C)
        [&](const Tensor& t) { return ops::layernorm(t, w, w, 1e-5).y; }};
    const int64_t n = int64_t(steps.size()) * mc.n_layer;
    const double f_chain = 2.0 * f_proj * double(mc.n_layer);
    row("MLP chain, whole batch", f_chain, [&] {
      Tensor t = x;
      for (int64_t i = 0; i < n; ++i) t = steps[size_t(i % 4)](t);
    });
    const Tensor xa = fill_f16({BT / 2, C}, 24), xb = fill_f16({BT / 2, C}, 25);
    row("MLP chain, two half batches one kernel apart", f_chain, [&] {
      Tensor a = xa, b = xb;
      for (int64_t i = 0; i <= n; ++i) {
        if (i < n) a = steps[size_t(i % 4)](a);
        if (i > 0) b = steps[size_t((i - 1) % 4)](b);
      }
    });
  }
  row("attention bwd", 0, att_b);
  row("dW layer, then attention bwd", f_layer, together([&] { dw_layer(); att_b(); }));
  row("attention bwd, then dW layer", f_layer, together([&] { att_b(); dw_layer(); }));
  const double f_head = 2.0 * double(BT) * double(C) * double(mc.vocab_size);
  const double f_step = f_layer * double(mc.n_layer) + f_head;
  row("dW head", f_head, together(dw_head));
  row("dW step: layers, then head", f_step, together([&] {
        for (int l = 0; l < mc.n_layer; ++l) dw_layer();
        dw_head();
      }));
  row("dW step: head, then layers", f_step, together([&] {
        dw_head();
        for (int l = 0; l < mc.n_layer; ++l) dw_layer();
      }));
  be.set_profiling(profiled);
  return rows;
}

}  // namespace alpha::bench_gpu
