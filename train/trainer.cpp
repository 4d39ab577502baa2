#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/check.h"
#include "autograd/tape.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/loss_scale.h"
#include "optim/schedule.h"
#include "train/data.h"
#include "train/device.h"
#include "train/gpt.h"
#include "train/guard.h"
#include "train/http_sink.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/run_checkpoint.h"
#include "train/safetensors.h"
#include "train/sample.h"
#include "vk/adamw.h"

namespace alpha {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Mean loss over `iters` batches of a split, without gradients or dropout (nanoGPT's estimate_loss).
double estimate_loss(const GPT& model, const TextData& data, bool val, const Config& cfg, Rng& rng) {
  ag::NoGrad no_grad;
  Rng unused(0);
  double total = 0;
  for (int64_t i = 0; i < cfg.train.eval_iters; ++i) {
    auto [x, y] = data.batch(val, cfg.train.batch_size, cfg.model.block_size, rng);
    total += model.loss(x, y, /*training=*/false, unused).item();
  }
  return total / static_cast<double>(cfg.train.eval_iters);
}

std::string resolve(const std::string& out_dir, const std::string& p) {
  return std::filesystem::path(p).is_absolute() ? p : (std::filesystem::path(out_dir) / p).string();
}


// Options the config accepts whose implementation lands with a later issue: refused, never silently ignored.
void refuse_unimplemented(const Config& cfg) {
  ALPHA_CHECK(cfg.data.sampling == "random", ConfigError,
              "[config] \"data.sampling\" \"{}\" is not available yet (supported: random)", cfg.data.sampling);
}

// SIGINT/SIGTERM: the first asks the loop to finish its step, save and stop; a second one kills the process at
// once with the default action (a save in flight leaves only a *.tmp file, removed by the next save).
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stop_signal != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
}

struct StopSignalScope {
  struct sigaction old_int {}, old_term {};
  StopSignalScope() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;  // writes in flight continue rather than fail with EINTR
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~StopSignalScope() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    g_stop_signal = 0;
  }
};

// "init_from": weights from a safetensors file (GPT-2 names) or an ALPH checkpoint (params only; the
// optimizer, step and RNG streams start fresh).
void init_weights_from(const Config& cfg, GPT& model, const Tokenizer& tok) {
  ALPHA_CHECK(std::filesystem::is_regular_file(cfg.init_from), CheckpointError,
              "[checkpoint] init_from \"{}\" does not exist", cfg.init_from);
  const std::string& p = cfg.init_from;
  if (p.size() >= 12 && p.substr(p.size() - 12) == ".safetensors") {
    load_safetensors_into(model, p, tok);
  } else {
    const RunCheckpoint ck = load_run_checkpoint(p);
    check_compatible(ck, model.config(), tok, "init_from");
    restore_run(ck, model, nullptr);
  }
}

}  // namespace

TrainResult run_training(const Config& cfg, const TrainOptions& opt) {
  refuse_unimplemented(cfg);
  const auto t0 = Clock::now();
  Progress progress(cfg.train.max_steps, opt.quiet);

  DeviceScope device(cfg.device, cfg.dispatch.threshold, cfg.dispatch.matmul_threshold, cfg.metrics.profile,
                     cfg.dispatch.profile);
  progress.message("device: " + device.description());
  ALPHA_CHECK(cfg.optim.device != "gpu" || dynamic_cast<vk::VulkanBackend*>(device.backend()) != nullptr, ConfigError,
              "[config] \"optim.device\" is \"gpu\" but the run's device is {}: use a GPU device or optim.device cpu",
              device.description());
  if (cfg.metrics.profile && !device.profiling())
    progress.message("metrics.profile: no GPU timestamps on this device, gpu_ms stays absent");
  const TokenizerOptions tok_opt{cfg.data.vocab_size, cfg.data.tokenizer_path};
  TextData data = TextData::is_token_path(cfg.data.path)  // pre-tokenized files are memory-mapped
                      ? TextData::load_tokens(cfg.data.path, cfg.data.val_fraction, cfg.model.block_size,
                                              cfg.model.vocab_size, cfg.data.tokenizer, tok_opt)
                      : TextData::load(cfg.data.path, cfg.data.tokenizer, cfg.data.val_fraction, cfg.model.block_size,
                                       tok_opt);
  const int64_t V = cfg.model.vocab_size > 0 ? cfg.model.vocab_size : data.tokenizer().vocab_size();
  ALPHA_CHECK(V >= data.tokenizer().vocab_size(), DataError, "[data] model.vocab_size {} is smaller than the {}-token vocabulary",
              V, data.tokenizer().vocab_size());
  check_host_memory(cfg, V);  // before the model exists: an oversized run exits 2 instead of being killed

  // A resume target must exist before anything is written to out_dir: never a silent fresh start.
  const std::string resume_path = opt.resume.empty() ? "" : find_resume_checkpoint(cfg.out_dir, opt.resume);
  std::filesystem::create_directories(cfg.out_dir);
  {
    nlohmann::json resolved = config_to_json(cfg);
    std::ofstream(std::filesystem::path(cfg.out_dir) / "config.json") << resolved.dump(2) << "\n";
  }
  MetricsWriter metrics(resolve(cfg.out_dir, cfg.metrics.path), opt.json_stdout);
  {
    HttpSinkOptions http;
    const MetricsHttpConfig& h = cfg.metrics.http;
    http.url = h.url;
    http.token_env = h.token_env;
    http.queue_lines = h.queue_lines;
    http.batch_lines = h.batch_lines;
    http.timeout_s = h.timeout_s;
    http.max_retries = static_cast<int>(h.max_retries);
    http.close_timeout_s = h.close_timeout_s;
    metrics.attach_http(http);  // no-op when the url is empty
  }

  // Separate streams (derived from the seed) so changing one use never shifts another.
  Rng init_rng(cfg.seed), data_rng(cfg.seed + 1), dropout_rng(cfg.seed + 2), eval_rng(cfg.seed + 3),
      sample_rng(cfg.seed + 4);
  GPTConfig mc{cfg.model.n_layer, cfg.model.n_head, cfg.model.n_embd, cfg.model.block_size, V, cfg.model.dropout,
               cfg.model.bias};
  mc.fused_attention = cfg.model.attention == "fused";
  mc.f16 = cfg.model.precision == "f16";
  GPT model(mc, init_rng);
  progress.message(fmt::format("model: {} layers, {} heads, {} wide, vocab {}: {:.2f}M parameters", mc.n_layer,
                               mc.n_head, mc.n_embd, V, static_cast<double>(model.num_parameters()) / 1e6));
  progress.message(fmt::format("data: {} train / {} val tokens from {}", data.split_size(false),
                               data.split_size(true), cfg.data.path));

  // optim.device: the CPU AdamW (the reference) or vk::GpuAdamW (same state, kept on the GPU).
  const AdamWOptions adamw_opts{cfg.optim.beta1, cfg.optim.beta2, cfg.optim.eps, cfg.optim.weight_decay};
  std::unique_ptr<AdamW> optimizer_owner =
      cfg.optim.device == "gpu"
          ? std::make_unique<vk::GpuAdamW>(*dynamic_cast<vk::VulkanBackend*>(device.backend()), model.parameters(),
                                           adamw_opts)
          : std::make_unique<AdamW>(model.parameters(), adamw_opts);
  AdamW& optimizer = *optimizer_owner;
  auto* gpu_optimizer = dynamic_cast<vk::GpuAdamW*>(&optimizer);
  // f16 mode: dynamic loss scaling (optim/loss_scale.h); its state rides in checkpoints (TrainState).
  std::unique_ptr<LossScaler> scaler = mc.f16 ? std::make_unique<LossScaler>() : nullptr;
  const ScheduleOptions sched = schedule_from_config(cfg);

  TrainResult result;
  TrainState st;
  nlohmann::json run_fields = {{"schema", kMetricsSchemaVersion}, {"config", config_to_json(cfg)},
                               {"device", device.description()}, {"version", ALPHA_VERSION},
                               {"parameters", model.num_parameters()}};
  if (std::string(ALPHA_GIT_REVISION) != "") run_fields["git_revision"] = ALPHA_GIT_REVISION;
  if (!resume_path.empty()) {
    const RunCheckpoint ck = load_run_checkpoint(resume_path);
    check_compatible(ck, mc, data.tokenizer(), "resume");
    ALPHA_CHECK(ck.state.step < cfg.train.max_steps, ConfigError,
                "[config] \"train.max_steps\" is {} but the checkpoint \"{}\" is already at step {}: nothing to resume",
                cfg.train.max_steps, resume_path, ck.state.step);
    restore_run(ck, model, &optimizer);
    st = ck.state;
    for (auto [rng, s] : {std::pair{&init_rng, st.init}, {&data_rng, st.data}, {&dropout_rng, st.dropout},
                          {&eval_rng, st.eval}, {&sample_rng, st.sample}})
      rng->set_state(s);
    result.train_loss = st.train_loss;
    result.val_loss = st.val_loss;
    result.steps = st.step;
    result.checkpoint = resume_path;
    run_fields["step"] = st.step;
    run_fields["checkpoint"] = resume_path;
    metrics.write("resume", run_fields);
    progress.message(fmt::format("resumed from {} at step {}", resume_path, st.step));
  } else {
    if (!cfg.init_from.empty()) {
      init_weights_from(cfg, model, data.tokenizer());
      run_fields["init_from"] = cfg.init_from;
      progress.message("weights from " + cfg.init_from);
    }
    metrics.write("run", run_fields);
  }
  // Numerics guard (train/guard.h, docs/reliability.md): counters come back with a resumed run.
  NumericsGuard guard(cfg.guard, st.guard);
  GuardFaults faults = GuardFaults::from_env();  // test hook: ALPHA_GUARD_INJECT
  if (scaler && !resume_path.empty()) scaler->set_state(st.loss_scale);
  auto save = [&]() {
    if (scaler) st.loss_scale = scaler->state();
    st.guard = guard.state();
    st.init = init_rng.state();
    st.data = data_rng.state();
    st.dropout = dropout_rng.state();
    st.eval = eval_rng.state();
    st.sample = sample_rng.state();
    result.checkpoint = save_run_checkpoint(cfg, data.tokenizer(), model, optimizer, st);
    metrics.write("checkpoint", {{"step", st.step}, {"path", result.checkpoint}});
  };
  // Re-runs a bad step's forward and backward from its starting data/dropout streams in check mode
  // (autograd/check.h) to name the first op that produced a non-finite value. The streams are copies.
  auto find_origin = [&](Rng d, Rng dr) -> std::string {
    ag::CheckFinite check;
    for (int64_t micro = 0; micro < cfg.train.grad_accum && !check.first(); ++micro) {
      auto [x, y] = data.batch(false, cfg.train.batch_size, cfg.model.block_size, d);
      Tensor loss = model.loss(x, y, /*training=*/true, dr);
      ag::backward(loss, 1.0 / static_cast<double>(cfg.train.grad_accum));
    }
    optimizer.zero_grad();
    return check.first() ? check.first()->str() : "none on a re-run of the step (a transient fault)";
  };
  // Rollback: model, AdamW and step from the last checkpoint; the data and dropout streams go on from where
  // they are, so the batches since that checkpoint (the offending one included) are skipped. Returns its step.
  auto rollback = [&]() -> int64_t {
    const RunCheckpoint ck = load_run_checkpoint(result.checkpoint);
    restore_run(ck, model, &optimizer);
    st = ck.state;
    for (auto [rng, s] : {std::pair{&init_rng, st.init}, {&eval_rng, st.eval}, {&sample_rng, st.sample}}) rng->set_state(s);
    return st.step;
  };
  StopSignalScope signals;

  const int64_t tokens_per_step = cfg.train.batch_size * cfg.model.block_size * cfg.train.grad_accum;
  const double flops_per_step = model.flops_per_token(cfg.model.block_size) * static_cast<double>(tokens_per_step);
  const std::vector<Tensor> params = model.parameters();
  BackendCounters backend_prev = backend_counters_now();
  for (int64_t step = st.step; step < cfg.train.max_steps; ++step) {
    const auto ts = Clock::now();
    const double lr = lr_at(sched, step) * guard.lr_scale();  // lowered by rollbacks (guard.rollback_lr_factor)
    faults.begin_step(step + 1);
    const Rng data_before = data_rng, dropout_before = dropout_rng;  // for find_origin
    GuardVerdict verdict;
    double loss_sum = 0;
    for (int64_t micro = 0; micro < cfg.train.grad_accum; ++micro) {
      auto [x, y] = data.batch(false, cfg.train.batch_size, cfg.model.block_size, data_rng);
      Tensor loss = model.loss(x, y, /*training=*/true, dropout_rng);
      if (gpu_optimizer) gpu_optimizer->add_loss(loss, micro == 0);  // summed on the GPU, read once below
      else loss_sum += loss.item();
      // The seed 1/grad_accum gives the grads of scale(loss, 1/grad_accum) without reading a GPU loss back.
      // f16: times the loss scale, so small f16 gradients stay representable.
      ag::backward(loss, (scaler ? scaler->scale() : 1.0) / static_cast<double>(cfg.train.grad_accum));
    }
    // f16 loss scaling: non-finite grads of a finite loss are an overflow of the scale, which the scaler
    // handles (update skipped, scale backed off): not a numerics-guard bad step. A non-finite loss still is.
    bool overflow = false;
    if (scaler && !gpu_optimizer) {  // GPU AdamW unscales and checks on the GPU, the same way (below)
      const bool finite = scaler->unscale(params);
      overflow = !finite && std::isfinite(loss_sum);
      if (finite || overflow) scaler->update(finite);
    }
    double grad_norm = 0;
    bool gpu_vetoed = false;  // GPU AdamW skipped the update itself (non-finite grad norm or loss)
    if (overflow) {
      optimizer.zero_grad();  // skipped update; grad_norm reads 0 in the step record
    } else if (gpu_optimizer) {
      gpu_optimizer->clip_and_step(lr, cfg.optim.grad_clip, scaler ? 1.0 / scaler->scale() : 1.0);
      const vk::GpuAdamW::Stats s = gpu_optimizer->read_stats();  // the step's one host read: loss + grad norm
      loss_sum = s.loss;
      grad_norm = s.grad_norm;
      gpu_vetoed = s.skipped;
      if (scaler) {  // the CPU branch's scaler logic, on the GPU's finite check of the unscaled grads
        const bool finite = std::isfinite(grad_norm);
        overflow = !finite && std::isfinite(loss_sum);
        if (finite || overflow) scaler->update(finite);
        if (overflow) grad_norm = 0;
      }
    } else {
      grad_norm = clip_grad_norm(params, cfg.optim.grad_clip);
      // A non-finite loss or grad norm (or a spike with spike_action skip) vetoes the update.
      verdict = guard.check_update(step + 1, loss_sum / static_cast<double>(cfg.train.grad_accum), grad_norm,
                                   !result.checkpoint.empty());
      if (!verdict.bad()) {
        optimizer.step(lr);
        faults.poison_params(step + 1, params);  // test hook: a "bad update"
        GuardVerdict pv = guard.check_params(step + 1, model.named_parameters(), !result.checkpoint.empty());
        if (pv.bad()) verdict = pv;
      }
    }
    optimizer.zero_grad();
    // GPU AdamW vetoed a non-finite step on the GPU (so skip works); a finite one is applied: a spike only warns.
    if (gpu_optimizer && !overflow)
      verdict = guard.check_update(step + 1, loss_sum / static_cast<double>(cfg.train.grad_accum), grad_norm,
                                   !result.checkpoint.empty(), /*vetoable=*/gpu_vetoed);
    if (verdict.action != GuardAction::apply) {
      if (verdict.diagnose) verdict.detail = find_origin(data_before, dropout_before);
      if (verdict.action == GuardAction::rollback) guard.on_rollback(step + 1);
      nlohmann::json rec = guard.record(verdict);
      if (verdict.action == GuardAction::rollback) rec["to_step"] = rollback();
      metrics.write("guard", rec);
      progress.message(guard.message(verdict));
    }
    faults.end_step();
    if (verdict.action == GuardAction::rollback) {
      step = st.step - 1;  // the loop's ++step continues right after the checkpoint
      continue;
    }
    if (verdict.action == GuardAction::stop) {
      result.numerics_stop = true;
      result.steps = st.step;
      metrics.write("end", {{"step", st.step}, {"train_loss", result.train_loss}, {"val_loss", result.val_loss},
                            {"elapsed_s", seconds_since(t0)}, {"status", "numerics_stop"}});
      break;
    }
    if (!verdict.bad() && !overflow) guard.commit_good(step + 1, loss_sum / static_cast<double>(cfg.train.grad_accum));

    const int64_t done = step + 1;
    st.step = done;
    st.tokens_seen += tokens_per_step;
    const double step_s = seconds_since(ts), elapsed = seconds_since(t0);
    const double loss_v = loss_sum / static_cast<double>(cfg.train.grad_accum);
    const double tps = static_cast<double>(tokens_per_step) / step_s;
    if (done % cfg.train.log_interval == 0 || done == cfg.train.max_steps) {
      nlohmann::json rec = {{"step", done}, {"loss", loss_v}, {"lr", lr}, {"grad_norm", grad_norm},
                            {"tokens_per_sec", tps}, {"step_ms", step_s * 1e3}, {"elapsed_s", elapsed},
                            {"tokens_seen", st.tokens_seen}, {"flops_per_step", flops_per_step}};
      if (cfg.metrics.peak_tflops > 0) rec["mfu"] = flops_per_step / step_s / (cfg.metrics.peak_tflops * 1e12);
      if (scaler) {  // f16 mode: the scale after this step and the overflow-skipped updates so far
        rec["loss_scale"] = scaler->scale();
        rec["loss_scale_skips"] = scaler->state().skipped;
      }
      const BackendCounters now = backend_counters_now();
      rec.update(backend_view_fields(now - backend_prev));  // ops per device, flushes, bytes since last record
      backend_prev = now;
      metrics.write("step", rec);
    }
    progress.step(done, loss_v, lr, tps, elapsed);

    const bool eval_due = done % cfg.train.eval_interval == 0;
    if (eval_due || done == cfg.train.max_steps) {
      // The extra final evaluation draws from a copy, so the eval stream (and a resumed run) is as if it had not run.
      Rng final_eval_rng = eval_rng;
      Rng& er = eval_due ? eval_rng : final_eval_rng;
      result.train_loss = estimate_loss(model, data, false, cfg, er);
      result.val_loss = estimate_loss(model, data, true, cfg, er);
      st.eval_step = done;
      st.train_loss = result.train_loss;
      st.val_loss = result.val_loss;
      metrics.write("eval", {{"step", done}, {"train_loss", result.train_loss}, {"val_loss", result.val_loss},
                             {"elapsed_s", seconds_since(t0)}});
      progress.eval(done, result.train_loss, result.val_loss);
    }
    result.steps = done;
    if (opt.after_step) opt.after_step(done);
    const bool stop = g_stop_signal != 0;
    // No interval checkpoint right after a skipped update: the streak may not be over.
    if ((done % cfg.checkpoint.interval == 0 && !verdict.bad()) || done == cfg.train.max_steps || stop) save();
    if (stop) {
      result.interrupted = true;
      metrics.write("interrupted", {{"step", done}, {"signal", static_cast<int>(g_stop_signal)},
                                    {"checkpoint", result.checkpoint}, {"elapsed_s", seconds_since(t0)}});
      break;
    }
  }
  progress.finish();
  result.seconds = seconds_since(t0);
  if (result.interrupted || result.numerics_stop) return result;

  if (cfg.train.sample_tokens > 0) {
    SampleOptions so;
    so.max_new_tokens = cfg.train.sample_tokens;
    so.temperature = 0.8;
    so.top_k = 200;
    std::vector<int32_t> prompt = {data.token(true, 0)};
    std::vector<int32_t> out = generate(model, prompt, so, sample_rng);
    result.sample = data.tokenizer().decode(out);
    metrics.write("sample", {{"step", result.steps}, {"text", result.sample}});
  }
  metrics.write("end", {{"step", result.steps}, {"train_loss", result.train_loss}, {"val_loss", result.val_loss},
                        {"elapsed_s", result.seconds}});
  return result;
}

}  // namespace alpha
