// `alpha bench gpu`: GEMM TFLOP/s per matmul kernel (4096^3 and the GPT's shapes, every transpose the
// training step uses), GB/s of the memory-bound kernels, and the GPT training step (forward+backward and the
// optimizer timed apart; grad accumulation) with tokens/s and MFU. Kernel times are Vulkan timestamps, step
// times wall clock; warm-up first, medians reported.
// Dimension legend: B batch, T time, C channels, V vocabulary, BT = B*T rows, M/K/N matmul.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/ops.h"
#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "cli/bench.h"
#include "cli/bench_gpu.h"
#include "config/config.h"
#include "loop/device.h"
#include "loop/trainer.h"
#include "model/gpt.h"
#include "vk/adamw.h"
#include "vk/backend.h"

namespace alpha {

namespace bench_gpu {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double total_ns(const std::map<std::string, double>& m) {
  double s = 0;
  for (const auto& [k, v] : m) s += v;
  return s;
}

// Kernel-timestamp ms of fn (median of reps): warmup calls, then calls back to back for warm_s seconds. Timed calls
// sync one by one, a light load under which NVIDIA's driver lowers the clock; the full-load seconds before them
// bring it back up (an H200's GELU row read 5x the step's own kernel time without: docs/PERFORMANCE.md, session 35).
double gpu_ms(vk::VulkanBackend& be, const std::function<void()>& fn, int warmup, int reps, double warm_s) {
  for (int i = 0; i < warmup; ++i) fn();
  be.sync();
  for (const auto t0 = std::chrono::steady_clock::now();
       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < warm_s;) {
    for (int i = 0; i < 4; ++i) fn();
    be.sync();
  }
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const double before = total_ns(be.kernel_gpu_ns());
    fn();
    be.sync();
    t.push_back((total_ns(be.kernel_gpu_ns()) - before) / 1e6);
  }
  return median(t);
}

// Cheap f16 operands for the tile sweep (values in +-[1/8, 1/4), from a counter hash): randn of the head's
// (50304, 8192) operands on the CPU would take minutes.
Tensor fill_f16(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::empty(s, DType::f16);
  uint16_t* p = t.mutable_data<uint16_t>();
  uint32_t x = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = static_cast<uint16_t>(0x3000u | ((x >> 16) & 0x83ffu));
  }
  return t;
}

// Median wall ms per call of fn in bursts of back-to-back calls (as burst_ms), by the host clock around the calls
// and one sync: the GPU's span including the gaps at barriers and the overlap of independent kernels, which
// per-kernel timestamps (burst_ms) cannot show.
double burst_wall_ms(vk::VulkanBackend& be, const std::function<void()>& fn, double flops, int bursts) {
  const int n = bursts <= 1 ? 1 : std::max(4, static_cast<int>(2e12 / flops));
  for (int i = 0; i < n; ++i) fn();
  be.sync();
  std::vector<double> t;
  for (int r = 0; r < bursts; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) fn();
    be.sync();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n);
  }
  return median(t);
}

AttentionCase attention_case(const GPTConfig& mc, int64_t batch, Tensor qkv, Tensor dout) {
  const int64_t B = batch, T = mc.block_size, H = mc.n_head, C = mc.n_embd, D = C / H;
  AttentionCase a{std::move(qkv), std::move(dout), {}, {}, {}, {}};
  const Tensor split = a.qkv.view({B, T, 3, H, D});
  auto head = [&](int64_t i) { return split.narrow(2, i, 1).squeeze(2).transpose(1, 2); };
  a.q = head(0);
  a.k = head(1);
  a.v = head(2);
  a.ap.scale = 1.0 / std::sqrt(double(D));
  return a;
}

// Median GPU ms per call of fn in bursts of back-to-back calls (~10 ms of work each): a sync per call lets the
// GPU's clocks drop between short kernels and made single-call medians swing 3x on an H100.
double burst_ms(vk::VulkanBackend& be, const std::function<void()>& fn, double flops, int bursts) {
  const int n = bursts <= 1 ? 1 : std::max(4, static_cast<int>(2e12 / flops));  // bursts 1: a smoke run
  for (int i = 0; i < n; ++i) fn();
  be.sync();
  std::vector<double> t;
  for (int r = 0; r < bursts; ++r) {
    const double before = total_ns(be.kernel_gpu_ns());
    for (int i = 0; i < n; ++i) fn();
    be.sync();
    t.push_back((total_ns(be.kernel_gpu_ns()) - before) / 1e6 / n);
  }
  return median(t);
}

}  // namespace bench_gpu

namespace {

using bench_gpu::attention_case;
using bench_gpu::AttentionCase;
using bench_gpu::burst_ms;
using bench_gpu::burst_wall_ms;
using bench_gpu::GemmCase;
using bench_gpu::fill_f16;
using bench_gpu::gpu_ms;
using bench_gpu::median;
using bench_gpu::total_ns;

Tensor randn(const Shape& s, Rng& rng, double scale = 1.0) {
  Tensor t = Tensor::empty(s);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.normal() * scale);
  return t;
}

// Full-load seconds before each GEMM / kernel row: 0.5, none with --quick (no warm-up time).
double row_warm_s(const GpuBenchOptions& o) { return o.warmup_s > 0 ? 0.5 : 0.0; }

// The products of one linear layer y = x W^T (x: BT x in, W: out x in) in a training step.
void linear_cases(std::vector<GemmCase>& v, const std::string& name, int64_t BT, int64_t in, int64_t out) {
  v.push_back({name + " fwd x@W^T", BT, in, out, false, true});
  v.push_back({name + " dx dy@W", BT, out, in, false, false});
  v.push_back({name + " dW dy^T@x", out, BT, in, true, false});
}

struct Mode {
  std::string name;
  vk::MatmulMode mode;
  DType dtype;
};

// Causal fused attention forward and forward+backward at the model's shape (B, H, T, D = C / H), in the model's
// precision; q, k, v are the head views of one (B, T, 3C) projection, as in the GPT. Per layer, GPU timestamps.
nlohmann::json bench_attention(const GpuBenchOptions& o, vk::VulkanBackend& be, Rng& rng) {
  const GPTConfig& mc = o.model;
  const int64_t B = o.batch, T = mc.block_size, H = mc.n_head, C = mc.n_embd, D = C / H;
  const DType dt = mc.f16 ? DType::f16 : DType::f32;
  const AttentionCase ac =
      attention_case(mc, B, ops::cast(randn({B, T, 3 * C}, rng), dt), ops::cast(randn({B, H, T, D}, rng), dt));
  const Tensor &q = ac.q, &k = ac.k, &v = ac.v, &dout = ac.dout;
  const ops::AttentionParams& ap = ac.ap;
  const ops::AttentionOut fwd = ops::attention(q, k, v, ap);
  const double flops = 4.0 * double(B * H) * double(T) * double(T) * double(D) / 2;  // causal: half the pairs
  const int bursts = o.quick ? 1 : 7;
  const double fwd_ms = burst_ms(be, [&] { ops::attention(q, k, v, ap); }, flops, bursts);
  const double bwd_ms = burst_ms(be, [&] { ops::attention_backward(dout, q, k, v, fwd.out, fwd.lse, ap, true); },
                                 2.5 * flops, bursts);
  // Wall clock of whole forward+backward calls, as the PyTorch peer times SDPA (CUDA events around both).
  const double wall_ms = burst_wall_ms(be, [&] {
    const ops::AttentionOut f = ops::attention(q, k, v, ap);
    ops::attention_backward(dout, q, k, v, f.out, f.lse, ap, true);
  }, 3.5 * flops, bursts);
  nlohmann::json r = {{"B", B}, {"H", H}, {"T", T}, {"D", D}, {"kernel", be.attention_kernel(dt, D)},
                      {"fwd_ms", fwd_ms}, {"bwd_ms", bwd_ms}, {"fwd_bwd_ms", fwd_ms + bwd_ms},
                      {"fwd_bwd_wall_ms", wall_ms}, {"tflops", 3.5 * flops / ((fwd_ms + bwd_ms) * 1e9)},
                      {"kernel_ms", nlohmann::json::object()}};
  for (const auto& [name, ns] : be.kernel_gpu_ns())  // the whole run's per-kernel GPU time, for the split
    if (name.rfind("attention", 0) == 0) r["kernel_ms"][name] = double(ns) / 1e6;
  if (be.runtime().device().features().pipeline_stats)  // ALPHA_VK_PIPELINE_STATS=1: registers per kernel
    for (const char* k : {"_f16", "_dq_f16", "_dkdv_f16", "_dqs_dq_f16", "_dqs_dkdv_f16"})
      if (auto st = be.runtime().pipelines().executable_stats(r["kernel"].get<std::string>() + k); !st.empty())
        r["pipeline_stats"][r["kernel"].get<std::string>() + k] = st;
  return r;
}

// The training step as the trainer runs it: forward+backward (loss read once per step), then global-norm clip +
// AdamW on the GPU (optim.device gpu) or the CPU; f16 runs seed the backward with a loss scale.
nlohmann::json bench_train_step(const GpuBenchOptions& o, DeviceScope& scope, vk::VulkanBackend& be, Rng& rng) {
  const GPTConfig& mc = o.model;
  const int64_t BT = o.batch * mc.block_size, V = mc.vocab_size;
  scope.sync();
  GPT model(mc, rng);
  Tensor idx = Tensor::empty({o.batch, mc.block_size}, DType::i32), tgt = Tensor::empty({o.batch, mc.block_size}, DType::i32);
  for (Tensor* t : {&idx, &tgt}) {
    int32_t* p = t->mutable_data<int32_t>();
    for (int64_t i = 0; i < t->numel(); ++i) p[i] = static_cast<int32_t>(rng.next_u32() % uint32_t(V));
  }
  const bool gpu_opt = o.optim_device == "gpu", muon = o.optim.name == "muon";
  std::unique_ptr<AdamW> opt;
  if (muon) {  // Muon's lr is relative to optim.lr: the bench's fixed 1e-4 step gives it optim.muon.lr
    OptimConfig oc = o.optim;
    oc.lr = 1e-4;
    opt = make_muon(oc, model, AdamWOptions{}, gpu_opt ? &be : nullptr);
  } else {
    opt = gpu_opt ? std::make_unique<vk::GpuAdamW>(be, model.parameters(), AdamWOptions{})
                  : std::make_unique<AdamW>(model.parameters(), AdamWOptions{});
  }
  auto* gopt = dynamic_cast<vk::GpuAdamW*>(opt.get());
  const double loss_scale = mc.f16 ? 1024.0 : 1.0;  // a fixed scale: timing only (the trainer adapts it)
  // Wall-clock steps as `alpha train` runs them by default (metrics.profile off): no per-dispatch timestamps.
  const bool profiled = be.runtime().queue().profiling();
  be.set_profiling(false);
  ag::set_defer_leaf_grads(o.defer_weight_grads);
  auto& queue = be.runtime().queue();
  // One step as the trainer runs it with the GPU optimizer: no host wait between the backward and the update,
  // one read-back (loss and grad norm); with train.overlap_steps the read of a step's stats waits until the next
  // step's forward is recorded up to its loss (the trainer's f16 loss scale for that loss comes from it), so the GPU
  // is not drained between steps. --step-split adds a wait after the backward to time it apart (and reads each
  // step's stats at its end).
  const bool overlap = gopt && o.overlap_steps && !o.step_split;
  bool unread = false;  // overlap: the last step's stats, queued for read-back
  const auto one_step = [&](double* fwd_bwd_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int micro = 0; micro < o.grad_accum; ++micro) {
      const Tensor logits = model.forward(idx, true, rng);
      if (unread) (void)gopt->read_stats();  // the step before's loss and grad norm
      unread = false;
      const ag::ExpectSeed seed(loss_scale / o.grad_accum);  // cross-entropy's dlogits in its forward pass
      Tensor loss = model.loss_of(logits, tgt);
      if (gopt) gopt->add_loss(loss, micro == 0);
      ag::backward(loss, loss_scale / o.grad_accum);
    }
    if (o.step_split || !gopt) scope.sync();
    if (fwd_bwd_ms) *fwd_bwd_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (gopt) {
      gopt->clip_and_step(1e-4, 1.0, 1.0 / loss_scale);
      if (overlap) gopt->request_stats();
      else (void)gopt->read_stats();  // the step's one host read: loss and grad norm
      unread = overlap;
    } else {
      clip_grad_norm(opt->params(), 1.0 * loss_scale);
      opt->step(1e-4);
    }
    opt->zero_grad();
    if (!overlap) scope.sync();
  };
  const auto drain = [&] {  // the last overlapped step's stats, then nothing in flight
    if (unread) (void)gopt->read_stats();
    unread = false;
    scope.sync();
  };
  std::vector<double> fb, total, cpu, wait, restart, restart_first, recycle;
  // Warm-up: at least o.warmup steps, and o.warmup_s seconds after the first one. That first step builds the
  // pipelines (seconds with a cold shader cache), in which an H200 drops to 345 MHz; under load its clocks then
  // climb 345 -> 645 -> 1125 -> 1980 MHz in ~0.2 s stages, steps 4x slower at first (docs/PERFORMANCE.md, session 34).
  auto warm_start = std::chrono::steady_clock::now();
  int warm_steps = 0;
  for (bool warming = true; static_cast<int>(total.size()) < o.steps;) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();  // process CPU time, every thread: tells a host-bound step from a GPU-bound one
    const auto q0 = queue.stats();
    double fb_ms = 0;
    one_step(&fb_ms);
    const auto t2 = std::chrono::steady_clock::now();
    if (warming) {
      if (++warm_steps == 1) warm_start = t2;
      warming = warm_steps < o.warmup || std::chrono::duration<double>(t2 - warm_start).count() < o.warmup_s;
      continue;
    }
    fb.push_back(fb_ms);
    total.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    cpu.push_back(1e3 * double(std::clock() - c0) / CLOCKS_PER_SEC);
    const auto& q1 = queue.stats();
    wait.push_back(double(q1.wait_ns - q0.wait_ns) / 1e6);
    restart.push_back(double(q1.restart_ns - q0.restart_ns) / 1e6);
    restart_first.push_back(double(q1.restart_first_ns - q0.restart_first_ns) / 1e6);
    recycle.push_back(double(q1.recycle_ns - q0.recycle_ns) / 1e6);
  }
  // Then as many steps with a timestamp where each submission starts and ends: the GPU's busy ms per step and its
  // idle ms between submissions (the one at the step's start included), apart from the timed steps above.
  drain();
  std::vector<double> busy, gap, starved, edge_total;
  if (queue.set_edge_timing(true)) {
    for (int i = 0; i < o.steps; ++i) {
      const auto s0 = queue.stats();
      const auto t0 = std::chrono::steady_clock::now();
      one_step(nullptr);
      edge_total.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      const auto& s1 = queue.stats();
      busy.push_back(double(s1.gpu_busy_ns - s0.gpu_busy_ns) / 1e6);
      gap.push_back(double(s1.gpu_gap_ns - s0.gpu_gap_ns) / 1e6);
      starved.push_back(double(s1.starved_submissions - s0.starved_submissions));
    }
    drain();
    queue.set_edge_timing(false);
  }
  be.set_profiling(profiled);
  const double ms = median(total), tokens = double(BT) * o.grad_accum;
  nlohmann::json step = {{"steps", o.steps},         {"grad_accum", o.grad_accum},
                         {"optimizer", o.optim_device}, {"optimizer_name", opt->name()}, {"step_ms", ms},
                         {"tokens_per_s", tokens / (ms / 1e3)}, {"host_cpu_ms", median(cpu)},
                         // host ms from each wait that drained the GPU to the next submission; of the step's host ms,
                         // those recycling finished submissions' command and descriptor pools
                         {"host_restart_ms", median(restart)}, {"host_restart_first_ms", median(restart_first)},
                         {"host_recycle_ms", median(recycle)}, {"overlap_steps", overlap},
                         {"warmup_steps", warm_steps}};
  // Every timed step in order: a slow phase (clocks ramping, a busy host) shows as a run of slow steps.
  const auto each = [](const std::vector<double>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (double t : v) a.push_back(std::round(t * 1e3) / 1e3);
    return a;
  };
  if (o.step_split || !gopt) {  // a host wait after the backward: its ms and the update's apart
    step["fwd_bwd_ms"] = median(fb);
    std::vector<double> op(total.size());
    for (size_t i = 0; i < total.size(); ++i) op[i] = total[i] - fb[i];
    step["optimizer_ms"] = median(op);
  }
  if (!busy.empty()) {
    step["edge_step_ms"] = median(edge_total);  // against step_ms: what the edge timestamps cost
    step["gpu_busy_ms"] = median(busy);
    step["gpu_idle_ms"] = median(gap);
    step["starved_submissions"] = median(starved);
    step["gpu_idle_ms_each"] = each(gap);
  }
  step["step_ms_each"] = each(total);
  step["host_cpu_ms_each"] = each(cpu);
  step["host_wait_ms_each"] = each(wait);  // host time blocked on the GPU
  // Device memory in the allocator's slabs after the steps (slabs stay until a trim: the run's high-water mark).
  step["device_mb"] = static_cast<double>(be.runtime().pool().allocator().used_bytes()) / 1e6;
  if (o.peak_tflops > 0)
    step["mfu"] = model.flops_per_token(mc.block_size) * tokens / (ms / 1e3) / (o.peak_tflops * 1e12);
  if (be.runtime().device().features().pipeline_stats)  // ALPHA_VK_PIPELINE_STATS=1: row kernels' registers
    for (const char* k : {"cross_entropy_fused_f16_vec4", "layernorm_f16_vec4", "layernorm_bwd_dx_f16_vec4_acc"})
      if (auto st = be.runtime().pipelines().executable_stats(k); !st.empty()) step["pipeline_stats"][k] = st;
  return step;
}

// Each kernel family the device has, on every shape (f32 operands from randn; f16 cast on the GPU).
std::vector<Mode> gemm_modes(const vk::DeviceFeatures& feat) {
  std::vector<Mode> modes = {{"simt f32", vk::MatmulMode::simt, DType::f32}};
  if (feat.storage_16bit) modes.push_back({"simt f16", vk::MatmulMode::simt, DType::f16});
  if (feat.nv_coopmat_f16) {
    modes.push_back({"coopmat f32-in", vk::MatmulMode::coopmat, DType::f32});
    modes.push_back({"coopmat f16", vk::MatmulMode::coopmat, DType::f16});
  }
  return modes;
}

nlohmann::json bench_gemm_modes(vk::VulkanBackend& be, const std::vector<GemmCase>& cases, const std::vector<Mode>& modes,
                                Rng& rng, int warm, int reps, double warm_s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const GemmCase& c : cases) {
    Tensor a = randn(c.ta ? Shape{c.K, c.M} : Shape{c.M, c.K}, rng), b = randn(c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N}, rng);
    nlohmann::json row = {{"name", c.name}, {"M", c.M}, {"K", c.K}, {"N", c.N}, {"ta", c.ta}, {"tb", c.tb}};
    for (const Mode& m : modes) {
      be.set_matmul_mode(m.mode);
      const Tensor x = m.dtype == DType::f32 ? a : ops::cast(a, m.dtype), y = m.dtype == DType::f32 ? b : ops::cast(b, m.dtype);
      const double ms = gpu_ms(be, [&] { ops::matmul(x, y, c.ta, c.tb); }, warm, reps, warm_s);
      const std::string kernel = be.matmul_kernel(m.dtype, c.M, c.N, c.K, 1);
      const int64_t splits = be.matmul_splits(kernel, c.M, c.N, c.K, 1, 128, 128, m.dtype == DType::f32);
      row[m.name] = {{"kernel", kernel}, {"splits", splits}, {"ms", ms},
                     {"tflops", 2.0 * double(c.M) * double(c.K) * double(c.N) / (ms * 1e9)}};
    }
    rows.push_back(row);
  }
  be.set_matmul_mode(vk::matmul_mode_from_env());
  return rows;
}

// Memory-bound kernels: bytes read + written per GPU second (f32, and the f16 step's GELU pair).
nlohmann::json bench_kernels(const GpuBenchOptions& o, vk::VulkanBackend& be, Rng& rng, int warm, int reps) {
  const GPTConfig& mc = o.model;
  const int64_t BT = o.batch * mc.block_size, C = mc.n_embd, V = mc.vocab_size;
  nlohmann::json rows = nlohmann::json::array();
  auto bw = [&](const std::string& name, double bytes, const std::function<void()>& fn) {
    const double ms = gpu_ms(be, fn, warm, reps, row_warm_s(o));
    rows.push_back({{"name", name}, {"ms", ms}, {"gb_s", bytes / (ms * 1e6)}});
  };
  const Tensor x = randn({BT, C}, rng), y = randn({BT, C}, rng), h = randn({BT, 4 * C}, rng);
  const Tensor w = randn({C}, rng), bias = randn({C}, rng);
  const Tensor att = randn({o.batch * mc.n_head, mc.block_size, mc.block_size}, rng);
  const Tensor logits = randn({BT, V}, rng);
  Tensor tgt = Tensor::zeros({BT}, DType::i32);
  const double f = 4.0;  // bytes per f32
  bw("add (BT, C)", 3 * f * double(BT * C), [&] { ops::add(x, y); });
  bw("gelu (BT, 4C)", 2 * f * double(BT * 4 * C), [&] { ops::gelu(h); });
  bw("layernorm (BT, C)", 2 * f * double(BT * C), [&] { ops::layernorm(x, w, bias, 1e-5); });
  bw("softmax causal (B*H, T, T)", 2 * f * double(att.numel()), [&] { ops::softmax(att, true); });
  bw("cross_entropy (BT, V)", f * double(BT * V), [&] { ops::cross_entropy(logits, tgt, -1); });
  // f16, as the f16 step runs them: GELU's two kernels beside an add that moves the same bytes as its backward.
  const Tensor h16 = h.to(DType::f16), g16 = randn({BT, 4 * C}, rng).to(DType::f16);
  bw("add f16 (BT, 4C)", 3 * 2.0 * double(BT * 4 * C), [&] { ops::add(h16, g16); });
  bw("gelu f16 (BT, 4C)", 2 * 2.0 * double(BT * 4 * C), [&] { ops::gelu(h16); });
  bw("gelu backward f16 (BT, 4C)", 3 * 2.0 * double(BT * 4 * C), [&] { ops::gelu_backward(g16, h16); });
  return rows;
}

// --only: the sections to run (comma-separated gemm, kernels, attention, step; empty = all; overlap only if named).
bool want(const GpuBenchOptions& o, const std::string& section) {
  return o.only.empty() || ("," + o.only + ",").find("," + section + ",") != std::string::npos;
}

// The human-readable report (without --json).
void print_gpu_bench(const GpuBenchOptions& o, const nlohmann::json& out, const std::vector<Mode>& modes, int reps) {
  const GPTConfig& mc = o.model;
  std::printf("%s\n", out["device"].get<std::string>().c_str());
  if (out.contains("gemm")) {
    std::printf("GEMM (median of %d, GPU timestamps), TFLOP/s:\n  %-20s %6s %6s %6s", reps, "shape", "M", "K", "N");
    for (const Mode& m : modes) std::printf(" %15s", m.name.c_str());
    std::printf("\n");
    for (const auto& r : out["gemm"]) {
      std::printf("  %-20s %6lld %6lld %6lld", r["name"].get<std::string>().c_str(), static_cast<long long>(r["M"]),
                  static_cast<long long>(r["K"]), static_cast<long long>(r["N"]));
      for (const Mode& m : modes) std::printf(" %15.2f", r[m.name]["tflops"].get<double>());
      std::printf("\n");
    }
  }
  if (out.contains("kernels")) {
    std::printf("Memory-bound kernels (f32 unless named):\n");
    for (const auto& k : out["kernels"])
      std::printf("  %-28s %8.3f ms %8.1f GB/s\n", k["name"].get<std::string>().c_str(), k["ms"].get<double>(),
                  k["gb_s"].get<double>());
  }
  if (out.contains("overlap")) {
    std::printf("\noverlap: weight gradients beside the walk's kernels; half batches interleaved (wall ms per call):\n");
    for (const auto& r : out["overlap"])
      std::printf("  %-44s %8.4f\n", r["name"].get<std::string>().c_str(), r["wall_ms"].get<double>());
  }
  if (out.contains("attention")) {
    const auto& a = out["attention"];
    std::printf("Causal attention per layer (B=%lld, H=%lld, T=%lld, D=%lld, %s): forward %.3f ms, backward %.3f ms, %.1f TFLOP/s (kernel timestamps); fwd+bwd %.3f ms wall\n",
                static_cast<long long>(a["B"]), static_cast<long long>(a["H"]), static_cast<long long>(a["T"]),
                static_cast<long long>(a["D"]), a["kernel"].get<std::string>().c_str(), a["fwd_ms"].get<double>(),
                a["bwd_ms"].get<double>(), a["tflops"].get<double>(), a["fwd_bwd_wall_ms"].get<double>());
  }
  if (out.contains("step")) {
    const auto& s = out["step"];
    std::string parts = fmt::format("host CPU {:.2f}", s["host_cpu_ms"].get<double>());
    if (s.contains("fwd_bwd_ms"))
      parts = fmt::format("fwd+bwd {:.2f}, optimizer {:.2f}; {}", s["fwd_bwd_ms"].get<double>(),
                          s["optimizer_ms"].get<double>(), parts);
    if (s.contains("gpu_busy_ms"))
      parts += fmt::format("; GPU busy {:.2f}, idle {:.2f} in a step of {:.2f} with edge timestamps",
                           s["gpu_busy_ms"].get<double>(), s["gpu_idle_ms"].get<double>(), s["edge_step_ms"].get<double>());
    std::printf("Training step (B=%lld, T=%lld, grad_accum %d, %s %s, median of %d): %.2f ms (%s), %.0f tokens/s%s\n",
                static_cast<long long>(o.batch), static_cast<long long>(mc.block_size), o.grad_accum, o.optim_device.c_str(),
                s["optimizer_name"].get<std::string>().c_str(), o.steps, s["step_ms"].get<double>(), parts.c_str(),
                s["tokens_per_s"].get<double>(),
                s.contains("mfu") ? fmt::format(", MFU {:.1f}%", 100 * s["mfu"].get<double>()).c_str() : "");
  }
}

}  // namespace

void run_gpu_bench(const GpuBenchOptions& o) {
  // --gemm shapes are checked before the device starts (a usage error, exit 2).
  std::vector<GemmCase> custom;
  for (const std::string& g : o.gemm) {
    long long M = 0, K = 0, N = 0;
    int ta = 0, tb = 0;
    const int got = std::sscanf(g.c_str(), "%lld,%lld,%lld,%d,%d", &M, &K, &N, &ta, &tb);
    ALPHA_CHECK((got == 3 || got == 5) && M > 0 && K > 0 && N > 0 && M <= 65536 && K <= 65536 && N <= 65536,
                ConfigError, "[bench] --gemm \"{}\" is not M,K,N or M,K,N,ta,tb with sizes in [1, 65536]", g);
    custom.push_back({g, M, K, N, ta != 0, tb != 0});
  }
  DeviceScope scope(o.device, 0, 0, /*profile=*/true);
  auto* be = dynamic_cast<vk::VulkanBackend*>(scope.backend());
  ALPHA_CHECK(be != nullptr, ValueError, "[bench] device \"{}\" is not a Vulkan device", o.device);
  ALPHA_CHECK(scope.profiling(), ValueError, "[bench] {} has no compute-queue timestamps", scope.description());
  const auto& feat = be->runtime().device().features();
  const GPTConfig& mc = o.model;
  const int64_t BT = o.batch * mc.block_size, C = mc.n_embd, V = mc.vocab_size;
  nlohmann::json out = {{"device", scope.description()},
                        {"model", {{"n_layer", mc.n_layer}, {"n_head", mc.n_head}, {"n_embd", C},
                                   {"block_size", mc.block_size}, {"vocab_size", V}, {"batch", o.batch},
                                   {"precision", mc.f16 ? "f16" : "f32"}, {"arch", mc.arch},
                                   {"n_kv_head", mc.kv_heads()}}}};
  Rng rng(0);

  const int warm = o.quick ? 1 : 5, reps = o.quick ? 3 : 20;
  std::vector<GemmCase> cases;
  if (!o.quick) cases.push_back({"square 4096", 4096, 4096, 4096, false, false});
  linear_cases(cases, "qkv", BT, C, 3 * C);
  linear_cases(cases, "attn proj", BT, C, C);
  linear_cases(cases, "fc", BT, C, 4 * C);
  linear_cases(cases, "proj", BT, 4 * C, C);
  linear_cases(cases, "head", BT, C, V);
  if (!custom.empty()) cases = custom;
  std::vector<Mode> modes = gemm_modes(feat);
  if (o.tiles) {
    out["gemm"] = o.alternate.empty() ? bench_gpu::bench_gemm_tiles(*be, cases, o.quick, o.walks)
                                      : bench_gpu::bench_gemm_alternate(*be, cases, o.alternate, o.quick ? 1 : 5);
    for (bool f16 : {false, true})  // the accumulator's and the f16 operand's element layout, (row, col) per lane
      if (const auto probe = be->coopmat_layout_probe(f16); !probe.empty()) {
        nlohmann::json lanes = nlohmann::json::array();
        for (int l = 0; l < 32; ++l) {
          std::string s;
          for (int e = 0; e < int(probe[l * 17]); ++e)
            s += fmt::format("{}({},{})", e ? " " : "", probe[l * 17 + 1 + 2 * e], probe[l * 17 + 2 + 2 * e]);
          lanes.push_back(s);
        }
        out[f16 ? "layout_f16" : "layout_f32"] = lanes;
      }
    if (feat.pipeline_stats) {  // ALPHA_VK_PIPELINE_STATS=1: the driver's register and memory counts per tile
      {  // the bias epilogue's and the weight gradient's pipelines at GPT shapes, so they are built
        ops::linear(fill_f16({8192, C}, 5), fill_f16({4 * C, C}, 6), fill_f16({4 * C}, 7));
        ops::linear_weight_grads(fill_f16({8192, 4 * C}, 8), fill_f16({8192, C}, 9));  // fc dW, split K
        be->sync();
      }
      for (const std::span<const vk::CmTile> list : {vk::cm_tiles(), vk::cm_probes(), vk::cm_trials()})
        for (const vk::CmTile& t : list)
        for (const char* suffix : {"", "_f32out", "_bias", "_f32out_rowsum"}) {
          const std::string v = std::string("matmul_cm_f16_vec8_") + t.name + suffix;
          if (auto st = be->runtime().pipelines().executable_stats(v); !st.empty()) out["pipeline_stats"][v] = st;
        }
    }
    std::printf("%s\n", out.dump(o.json ? -1 : 1).c_str());
    return;
  }
  if (want(o, "gemm")) out["gemm"] = bench_gemm_modes(*be, cases, modes, rng, warm, reps, row_warm_s(o));
  if (!o.gemm.empty()) {
    std::printf("%s\n", out.dump(1).c_str());
    return;
  }
  if (want(o, "kernels")) out["kernels"] = bench_kernels(o, *be, rng, warm, reps);
  if (want(o, "attention")) out["attention"] = bench_attention(o, *be, rng);
  if (want(o, "step")) out["step"] = bench_train_step(o, scope, *be, rng);
  if (("," + o.only + ",").find(",overlap,") != std::string::npos) out["overlap"] = bench_gpu::bench_overlap(o, *be);

  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  print_gpu_bench(o, out, modes, reps);
}

}  // namespace alpha
