#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "train/data.h"
#include "train/device.h"
#include "train/gpt.h"
#include "train/http_sink.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/run_checkpoint.h"
#include "train/safetensors.h"
#include "train/sample.h"

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

  DeviceScope device(cfg.device, cfg.dispatch.threshold, cfg.dispatch.matmul_threshold, cfg.metrics.profile);
  progress.message("device: " + device.description());
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
  GPT model(mc, init_rng);
  progress.message(fmt::format("model: {} layers, {} heads, {} wide, vocab {}: {:.2f}M parameters", mc.n_layer,
                               mc.n_head, mc.n_embd, V, static_cast<double>(model.num_parameters()) / 1e6));
  progress.message(fmt::format("data: {} train / {} val tokens from {}", data.split_size(false),
                               data.split_size(true), cfg.data.path));

  AdamW optimizer(model.parameters(), AdamWOptions{cfg.optim.beta1, cfg.optim.beta2, cfg.optim.eps, cfg.optim.weight_decay});
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
  auto save = [&]() {
    st.init = init_rng.state();
    st.data = data_rng.state();
    st.dropout = dropout_rng.state();
    st.eval = eval_rng.state();
    st.sample = sample_rng.state();
    result.checkpoint = save_run_checkpoint(cfg, data.tokenizer(), model, optimizer, st);
    metrics.write("checkpoint", {{"step", st.step}, {"path", result.checkpoint}});
  };
  StopSignalScope signals;

  const int64_t tokens_per_step = cfg.train.batch_size * cfg.model.block_size * cfg.train.grad_accum;
  const double flops_per_step = model.flops_per_token(cfg.model.block_size) * static_cast<double>(tokens_per_step);
  const std::vector<Tensor> params = model.parameters();
  BackendCounters backend_prev = backend_counters_now();
  for (int64_t step = st.step; step < cfg.train.max_steps; ++step) {
    const auto ts = Clock::now();
    const double lr = lr_at(sched, step);
    double loss_sum = 0;
    for (int64_t micro = 0; micro < cfg.train.grad_accum; ++micro) {
      auto [x, y] = data.batch(false, cfg.train.batch_size, cfg.model.block_size, data_rng);
      Tensor loss = model.loss(x, y, /*training=*/true, dropout_rng);
      loss_sum += loss.item();
      ag::backward(cfg.train.grad_accum > 1 ? ag::scale(loss, 1.0 / static_cast<double>(cfg.train.grad_accum)) : loss);
    }
    const double grad_norm = clip_grad_norm(params, cfg.optim.grad_clip);
    optimizer.step(lr);
    optimizer.zero_grad();

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
      const BackendCounters now = backend_counters_now();
      rec.update(backend_view_fields(now - backend_prev));  // ops per device, flushes, bytes since last record
      backend_prev = now;
      metrics.write("step", rec);
    }
    progress.step(done, loss_v, lr, tps, elapsed);
    ALPHA_CHECK(std::isfinite(loss_v), Error, "[train] loss is {} at step {}: stopping", loss_v, done);

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
    if (done % cfg.checkpoint.interval == 0 || done == cfg.train.max_steps || stop) save();
    if (stop) {
      result.interrupted = true;
      metrics.write("interrupted", {{"step", done}, {"signal", static_cast<int>(g_stop_signal)},
                                    {"checkpoint", result.checkpoint}, {"elapsed_s", seconds_since(t0)}});
      break;
    }
  }
  progress.finish();
  result.seconds = seconds_since(t0);
  if (result.interrupted) return result;

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
