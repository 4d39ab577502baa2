#include "train/trainer.h"

#include <chrono>
#include <cmath>
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
#include "train/metrics.h"
#include "train/progress.h"
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
  ALPHA_CHECK(cfg.init_from.empty(), ConfigError, "[config] \"init_from\" is not supported yet (got \"{}\")", cfg.init_from);
  ALPHA_CHECK(cfg.data.tokenizer == "char", ConfigError,
              "[config] \"data.tokenizer\" \"{}\" is not available yet (supported: char)", cfg.data.tokenizer);
  ALPHA_CHECK(cfg.data.sampling == "random", ConfigError,
              "[config] \"data.sampling\" \"{}\" is not available yet (supported: random)", cfg.data.sampling);
}

}  // namespace

TrainResult run_training(const Config& cfg, const TrainOptions& opt) {
  refuse_unimplemented(cfg);
  const auto t0 = Clock::now();
  Progress progress(cfg.train.max_steps, opt.quiet);

  DeviceScope device(cfg.device);
  progress.message("device: " + device.description());
  TextData data = TextData::load(cfg.data.path, cfg.data.tokenizer, cfg.data.val_fraction, cfg.model.block_size);
  const int64_t V = cfg.model.vocab_size > 0 ? cfg.model.vocab_size : data.tokenizer().vocab_size();
  ALPHA_CHECK(V >= data.tokenizer().vocab_size(), DataError, "[data] model.vocab_size {} is smaller than the {}-token vocabulary",
              V, data.tokenizer().vocab_size());

  std::filesystem::create_directories(cfg.out_dir);
  {
    nlohmann::json resolved = config_to_json(cfg);
    std::ofstream(std::filesystem::path(cfg.out_dir) / "config.json") << resolved.dump(2) << "\n";
  }
  MetricsWriter metrics(resolve(cfg.out_dir, cfg.metrics.path), opt.json_stdout);

  // Separate streams (derived from the seed) so changing one use never shifts another.
  Rng init_rng(cfg.seed), data_rng(cfg.seed + 1), dropout_rng(cfg.seed + 2), eval_rng(cfg.seed + 3),
      sample_rng(cfg.seed + 4);
  GPTConfig mc{cfg.model.n_layer, cfg.model.n_head, cfg.model.n_embd, cfg.model.block_size, V, cfg.model.dropout,
               cfg.model.bias};
  GPT model(mc, init_rng);
  progress.message(fmt::format("model: {} layers, {} heads, {} wide, vocab {}: {:.2f}M parameters", mc.n_layer,
                               mc.n_head, mc.n_embd, V, static_cast<double>(model.num_parameters()) / 1e6));
  progress.message(fmt::format("data: {} train / {} val tokens from {}", data.split(false).size(),
                               data.split(true).size(), cfg.data.path));

  AdamW optimizer(model.parameters(), AdamWOptions{cfg.optim.beta1, cfg.optim.beta2, cfg.optim.eps, cfg.optim.weight_decay});
  ScheduleOptions sched{parse_schedule(cfg.optim.schedule), cfg.optim.lr, cfg.optim.min_lr, cfg.optim.warmup_steps,
                        cfg.optim.decay_steps, cfg.optim.wsd_decay_fraction};

  metrics.write("run", {{"schema", kMetricsSchemaVersion}, {"config", config_to_json(cfg)}, {"device", device.description()},
                        {"version", ALPHA_VERSION}, {"parameters", model.num_parameters()}});

  const int64_t tokens_per_step = cfg.train.batch_size * cfg.model.block_size * cfg.train.grad_accum;
  const double flops_per_step = model.flops_per_token(cfg.model.block_size) * static_cast<double>(tokens_per_step);
  TrainResult result;
  const std::vector<Tensor> params = model.parameters();
  for (int64_t step = 0; step < cfg.train.max_steps; ++step) {
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
    const double step_s = seconds_since(ts), elapsed = seconds_since(t0);
    const double loss_v = loss_sum / static_cast<double>(cfg.train.grad_accum);
    const double tps = static_cast<double>(tokens_per_step) / step_s;
    if (done % cfg.train.log_interval == 0 || done == cfg.train.max_steps) {
      metrics.write("step", {{"step", done}, {"loss", loss_v}, {"lr", lr}, {"grad_norm", grad_norm},
                             {"tokens_per_sec", tps}, {"step_ms", step_s * 1e3}, {"elapsed_s", elapsed},
                             {"tokens_seen", done * tokens_per_step}, {"flops_per_step", flops_per_step}});
    }
    progress.step(done, loss_v, lr, tps, elapsed);
    ALPHA_CHECK(std::isfinite(loss_v), Error, "[train] loss is {} at step {}: stopping", loss_v, done);

    if (done % cfg.train.eval_interval == 0 || done == cfg.train.max_steps) {
      result.train_loss = estimate_loss(model, data, false, cfg, eval_rng);
      result.val_loss = estimate_loss(model, data, true, cfg, eval_rng);
      metrics.write("eval", {{"step", done}, {"train_loss", result.train_loss}, {"val_loss", result.val_loss},
                             {"elapsed_s", seconds_since(t0)}});
      progress.eval(done, result.train_loss, result.val_loss);
    }
    result.steps = done;
  }
  progress.finish();
  result.seconds = seconds_since(t0);

  if (cfg.train.sample_tokens > 0) {
    SampleOptions so;
    so.max_new_tokens = cfg.train.sample_tokens;
    so.temperature = 0.8;
    so.top_k = 200;
    std::vector<int32_t> prompt = {data.split(true)[0]};
    std::vector<int32_t> out = generate(model, prompt, so, sample_rng);
    result.sample = data.tokenizer().decode(out);
    metrics.write("sample", {{"step", result.steps}, {"text", result.sample}});
  }
  metrics.write("end", {{"step", result.steps}, {"train_loss", result.train_loss}, {"val_loss", result.val_loss},
                        {"elapsed_s", result.seconds}});
  return result;
}

}  // namespace alpha
