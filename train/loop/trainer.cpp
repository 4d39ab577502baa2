#include "loop/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "autograd/check.h"
#include "autograd/tape.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/loss_scale.h"
#include "optim/muon.h"
#include "optim/schedule.h"
#include "data/data.h"
#include "dist/comm.h"
#include "dist/fault.h"
#include "loop/data_parallel.h"
#include "loop/device.h"
#include "model/gpt.h"
#include "loop/guard.h"
#include "inspect/train_inspector.h"
#include "metrics/metrics.h"
#include "metrics/progress.h"
#include "loop/run_checkpoint.h"
#include "loop/run_setup.h"
#include "model/sample.h"
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

// What one step produced, handed from the update phase to the guard and logging phases.
struct StepOutcome {
  Clock::time_point started;
  double lr = 0;
  double loss_sum = 0;   // summed over the micro-batches
  double grad_norm = 0;
  bool overflow = false;  // f16: the loss scale overflowed; the update was skipped (not a guard bad step)
  bool stop = false;      // a stop signal, agreed over the ranks (MPI) so that they all stop at this step
  GuardVerdict verdict;
  Clock::time_point ended{};  // an overlapped step: when the next one started (its duration's end)
};

// One training run after set-up: the model, optimizer, RNG streams and run state, and the phases of the loop.
// The environment (progress, device, data, metrics) outlives it. Phases are the seams where data-parallel
// training hooks in: next_batch (rank's shard), between forward_backward and update (gradient all-reduce),
// save_checkpoint and the metrics writes (rank 0 only).
class TrainingRun {
 public:
  TrainingRun(const Config& cfg, const TrainOptions& opt, Clock::time_point t0, Progress& progress,
              DeviceScope& device, TextData& data, MetricsWriter& metrics, int64_t vocab_size);

  void start(const std::string& resume_path);  // resume: a checkpoint, init_from weights, or a fresh start
  void train();                                // the loop, until max_steps, a numerics stop or a signal
  TrainResult finish();                        // the final sample and the "end" record

 private:
  Tensor next_batch_loss(Rng& data_rng, Rng& dropout_rng);
  // False when before_loss (run once, before the first micro-batch's loss) returned false: the step was abandoned.
  bool forward_backward(StepOutcome& s, const std::function<bool()>& before_loss = {});
  void update(StepOutcome& s, int64_t step);  // the CPU optimizer's whole update (update_record runs it)
  void update_record(StepOutcome& s, int64_t step, bool overlap);
  void update_finish(StepOutcome& s, int64_t step);
  // What the loop does after a step: the next one, the one at st_.step again (a rollback, or an overlapped step
  // abandoned), or stop. `stop`: whether a stop signal ends the run here; null: a signal seen (agreed over the ranks)
  // by the time the step's records are written.
  enum class Next { step, redo, stop };
  Next finish_step(StepOutcome& s, int64_t step, const Rng& data_before, const Rng& dropout_before,
                   const bool* stop = nullptr);
  // train.overlap_steps: whether this step's loss and grad norm can be read during the next step's forward.
  bool can_overlap(int64_t step) const;
  void handle_guard(StepOutcome& s, int64_t step, const Rng& data_before, const Rng& dropout_before);
  void log_step(const StepOutcome& s, int64_t done);
  void evaluate(int64_t done);
  void save_checkpoint();
  std::string find_origin(Rng d, Rng dr);
  int64_t rollback();
  // Over every micro-batch of the step, all ranks together (N x grad_accum).
  double mean_loss(const StepOutcome& s) const { return s.loss_sum / static_cast<double>(dp_->global_micro_steps()); }

  const Config& cfg_;
  const TrainOptions& opt_;
  const Clock::time_point t0_;
  Progress& progress_;
  DeviceScope& device_;
  TextData& data_;
  MetricsWriter& metrics_;
  // Separate streams (derived from the seed) so changing one use never shifts another.
  Rng init_rng_, data_rng_, dropout_rng_, eval_rng_, sample_rng_;
  GPTConfig mc_;
  std::optional<GPT> model_;
  std::unique_ptr<AdamW> optimizer_owner_;
  vk::GpuAdamW* gpu_optimizer_ = nullptr;
  std::unique_ptr<LossScaler> scaler_;  // f16 mode: dynamic loss scaling; its state rides in checkpoints
  ScheduleOptions sched_;
  TrainResult result_;
  TrainState st_;
  std::optional<NumericsGuard> guard_;
  GuardFaults faults_;
  int64_t tokens_per_step_ = 0;
  double flops_per_step_ = 0;
  std::vector<Tensor> params_;
  BackendCounters backend_prev_;
  std::optional<StopSignalScope> signals_;
  std::optional<DataParallel> dp_;  // mpirun: this rank's share of each step (loop/data_parallel.h)
  std::optional<TrainInspector> inspect_;  // metrics.inspect_interval: `inspect` records (train/inspect/)
  // train.overlap_steps: a step whose update is recorded and whose stats are not yet read.
  struct Pending {
    StepOutcome s;
    int64_t step;
    Rng data_before, dropout_before;
  };
  std::optional<Pending> pending_;
};

TrainingRun::TrainingRun(const Config& cfg, const TrainOptions& opt, Clock::time_point t0, Progress& progress,
                         DeviceScope& device, TextData& data, MetricsWriter& metrics, int64_t V)
    : cfg_(cfg), opt_(opt), t0_(t0), progress_(progress), device_(device), data_(data), metrics_(metrics),
      init_rng_(cfg.seed), data_rng_(cfg.seed + 1), dropout_rng_(cfg.seed + 2), eval_rng_(cfg.seed + 3),
      sample_rng_(cfg.seed + 4), mc_(gpt_config(cfg.model, V)) {
  model_.emplace(mc_, init_rng_);
  progress_.message(fmt::format("model: {} layers, {} heads, {} wide, vocab {}: {:.2f}M parameters", mc_.n_layer,
                                mc_.n_head, mc_.n_embd, V, static_cast<double>(model_->num_parameters()) / 1e6));
  progress_.message(fmt::format("data: {} train / {} val tokens from {}", data_.split_size(false),
                                data_.split_size(true), cfg.data.path));
  // optim.device: the CPU AdamW / Muon (the reference) or vk::GpuAdamW / vk::GpuMuon (same state, on the GPU).
  const AdamWOptions adamw_opts{cfg.optim.beta1, cfg.optim.beta2, cfg.optim.eps, cfg.optim.weight_decay};
  if (cfg.optim.name == "muon") {
    optimizer_owner_ = make_muon(cfg.optim, *model_, adamw_opts,
                                 cfg.optim.device == "gpu" ? dynamic_cast<vk::VulkanBackend*>(device_.backend()) : nullptr);
  } else {
    optimizer_owner_ =
        cfg.optim.device == "gpu"
            ? std::make_unique<vk::GpuAdamW>(*dynamic_cast<vk::VulkanBackend*>(device_.backend()),
                                             model_->parameters(), adamw_opts)
            : std::make_unique<AdamW>(model_->parameters(), adamw_opts);
  }
  gpu_optimizer_ = dynamic_cast<vk::GpuAdamW*>(optimizer_owner_.get());
  dp_.emplace(cfg, *model_);
  dp_->shard_optimizer(*optimizer_owner_);
  if (dp_->zero())
    progress_.message(fmt::format("optim.zero 1: AdamW state {:.1f} MB on this rank instead of {:.1f} MB",
                                  static_cast<double>(dp_->adamw_state_bytes()) / 1e6,
                                  static_cast<double>(dp_->adamw_state_bytes_unsharded()) / 1e6));
  if (dp_->active()) progress_.message(fmt::format("data parallel: {} ranks of {} micro-batches each", dp_->size(),
                                                   cfg.train.grad_accum));
  if (mc_.f16) scaler_ = std::make_unique<LossScaler>();
  ag::set_defer_leaf_grads(cfg.train.defer_weight_grads);
  sched_ = schedule_from_config(cfg);
  inspect_.emplace(*model_, cfg.metrics.inspect_interval, cfg.train.max_steps);
}

void TrainingRun::start(const std::string& resume_path) {
  nlohmann::json run_fields = {{"schema", kMetricsSchemaVersion}, {"config", config_to_json(cfg_)},
                               {"device", device_.description()}, {"version", ALPHA_VERSION},
                               {"parameters", model_->num_parameters()}};
  if (std::string(ALPHA_GIT_REVISION) != "") run_fields["git_revision"] = ALPHA_GIT_REVISION;
  if (!resume_path.empty()) {
    const RunCheckpoint ck = load_run_checkpoint(resume_path);
    check_compatible(ck, mc_, data_.tokenizer(), "resume");
    ALPHA_CHECK(ck.state.step < cfg_.train.max_steps, ConfigError,
                "[config] \"train.max_steps\" is {} but the checkpoint \"{}\" is already at step {}: nothing to resume",
                cfg_.train.max_steps, resume_path, ck.state.step);
    dp_->unshard_optimizer(*optimizer_owner_, /*for_save=*/false);
    restore_run(ck, *model_, optimizer_owner_.get());
    dp_->shard_optimizer(*optimizer_owner_);
    st_ = ck.state;
    for (auto [rng, s] : {std::pair{&init_rng_, st_.init}, {&data_rng_, st_.data}, {&dropout_rng_, st_.dropout},
                          {&eval_rng_, st_.eval}, {&sample_rng_, st_.sample}})
      rng->set_state(s);
    result_.train_loss = st_.train_loss;
    result_.val_loss = st_.val_loss;
    result_.steps = st_.step;
    result_.checkpoint = resume_path;
    run_fields["step"] = st_.step;
    run_fields["checkpoint"] = resume_path;
    metrics_.write("resume", run_fields);
    progress_.message(fmt::format("resumed from {} at step {}", resume_path, st_.step));
  } else {
    if (!cfg_.init_from.empty()) {
      init_weights_from(cfg_, *model_, data_.tokenizer());
      run_fields["init_from"] = cfg_.init_from;
      progress_.message("weights from " + cfg_.init_from);
    }
    metrics_.write("run", run_fields);
  }
  // Numerics guard (train/loop/guard.h, docs/reliability.md): counters come back with a resumed run.
  guard_.emplace(cfg_.guard, st_.guard);
  faults_ = GuardFaults::from_env();  // test hook: ALPHA_GUARD_INJECT
  if (scaler_ && !resume_path.empty()) scaler_->set_state(st_.loss_scale);
}

void TrainingRun::train() {
  signals_.emplace();
  tokens_per_step_ = cfg_.train.batch_size * cfg_.model.block_size * dp_->global_micro_steps();
  flops_per_step_ = model_->flops_per_token(cfg_.model.block_size) * static_cast<double>(tokens_per_step_);
  params_ = model_->parameters();
  backend_prev_ = backend_counters_now();
  for (int64_t step = st_.step; step < cfg_.train.max_steps; ++step) {
    StepOutcome s;
    s.started = Clock::now();
    s.lr = lr_at(sched_, step) * guard_->lr_scale();  // lowered by rollbacks (guard.rollback_lr_factor)
    faults_.begin_step(step + 1);
    dist::inject_fault_at_step(step + 1);  // test hook: ALPHA_DIST_INJECT
    const Rng data_before = data_rng_, dropout_before = dropout_rng_;  // for find_origin
    // train.overlap_steps: the step before is finished here, after this step's forward is recorded up to its first
    // loss (the GPU has it queued while the host reads), and before that loss, whose seed is the f16 loss scale the
    // step before decides. Anything but a plain step abandons this one's forward and takes the usual path.
    Next pending_next = Next::step;
    const auto finish_pending = [&] {
      if (!pending_) return true;
      Pending p = std::move(*pending_);
      pending_.reset();
      p.s.ended = s.started;
      update_finish(p.s, p.step);
      const bool stop = g_stop_signal != 0;
      const bool plain = p.s.verdict.action == GuardAction::apply && !stop;
      if (!plain) {  // this step as if it had not begun: no tape, the streams where they were
        ag::clear_tape();
        data_rng_ = data_before;
        dropout_rng_ = dropout_before;
      }
      pending_next = finish_step(p.s, p.step, p.data_before, p.dropout_before, &stop);
      return plain && pending_next == Next::step;
    };
    if (!forward_backward(s, finish_pending)) {
      if (pending_next == Next::stop) break;
      step = st_.step - 1;  // the loop's ++step takes the abandoned step again (or the one after a rollback)
      continue;
    }
    const bool overlap = can_overlap(step);
    update_record(s, step, overlap);
    if (overlap) {
      pending_ = Pending{s, step, data_before, dropout_before};
      continue;
    }
    update_finish(s, step);
    const Next next = finish_step(s, step, data_before, dropout_before);
    if (next == Next::stop) break;
    if (next == Next::redo) step = st_.step - 1;  // the loop's ++step continues right after the checkpoint
  }
  if (pending_) {  // can_overlap leaves none at the last step; a loop left early (an exception) has already unwound
    Pending p = std::move(*pending_);
    pending_.reset();
    update_finish(p.s, p.step);
    finish_step(p.s, p.step, p.data_before, p.dropout_before);
  }
  progress_.finish();
  result_.seconds = seconds_since(t0_);
}

bool TrainingRun::can_overlap(int64_t step) const {
  const int64_t done = step + 1;
  // Not where the step's end evaluates, checkpoints or is the last; not with the test hooks, MPI or inspection.
  return cfg_.train.overlap_steps && gpu_optimizer_ && !dp_->active() && faults_.empty() && !opt_.after_step &&
         cfg_.metrics.inspect_interval == 0 && done < cfg_.train.max_steps && done % cfg_.train.eval_interval != 0 &&
         done % cfg_.checkpoint.interval != 0 && g_stop_signal == 0;
}

// After the update: the guard's verdict and its handling, the step's records, evaluation and checkpoint.
TrainingRun::Next TrainingRun::finish_step(StepOutcome& s, int64_t step, const Rng& data_before,
                                           const Rng& dropout_before, const bool* stop_now) {
  if (s.verdict.action != GuardAction::apply) handle_guard(s, step, data_before, dropout_before);
  faults_.end_step();
  if (s.verdict.action == GuardAction::rollback) return Next::redo;
  if (s.verdict.action == GuardAction::stop) {
    result_.numerics_stop = true;
    result_.steps = st_.step;
    metrics_.write("end", {{"step", st_.step}, {"train_loss", result_.train_loss}, {"val_loss", result_.val_loss},
                           {"elapsed_s", seconds_since(t0_)}, {"status", "numerics_stop"}});
    return Next::stop;
  }
  if (!s.verdict.bad() && !s.overflow) guard_->commit_good(step + 1, mean_loss(s));
  if (nlohmann::json rec = inspect_->after_update(); !rec.empty()) metrics_.write("inspect", rec);

  const int64_t done = step + 1;
  st_.step = done;
  st_.tokens_seen += tokens_per_step_;
  log_step(s, done);
  if (done % cfg_.train.eval_interval == 0 || done == cfg_.train.max_steps) evaluate(done);
  result_.steps = done;
  if (opt_.after_step) opt_.after_step(done);
  const bool stop = stop_now ? *stop_now : dp_->active() ? s.stop : g_stop_signal != 0;
  // No interval checkpoint right after a skipped update: the streak may not be over.
  if ((done % cfg_.checkpoint.interval == 0 && !s.verdict.bad()) || done == cfg_.train.max_steps || stop)
    save_checkpoint();
  if (stop) {
    result_.interrupted = true;
    metrics_.write("interrupted", {{"step", done}, {"signal", static_cast<int>(g_stop_signal)},
                                   {"checkpoint", result_.checkpoint}, {"elapsed_s", seconds_since(t0_)}});
    return Next::stop;
  }
  return Next::step;
}

// One micro-batch of the training split through the model (with dropout); the loss, on the tape.
Tensor TrainingRun::next_batch_loss(Rng& data_rng, Rng& dropout_rng) {
  auto [x, y] = data_.batch(false, cfg_.train.batch_size, cfg_.model.block_size, data_rng);
  return model_->loss(x, y, /*training=*/true, dropout_rng);
}

// Forward and backward over grad_accum micro-batches: the parameters' grads hold the step's mean gradient.
// MPI: this rank's grad_accum micro-batches of the N x grad_accum, then the sum of the ranks' gradients.
bool TrainingRun::forward_backward(StepOutcome& s, const std::function<bool()>& before_loss) {
  dp_->begin_step(data_, data_rng_, dropout_rng_);
  inspect_->begin_forward(st_.step + 1);  // activation stats of the first micro-batch on an inspect step
  for (int64_t micro = 0; micro < cfg_.train.grad_accum; ++micro) {
    auto [x, y] = data_.batch(false, cfg_.train.batch_size, cfg_.model.block_size, data_rng_);
    const Tensor logits = model_->forward(x, /*training=*/true, dropout_rng_);
    if (micro == 0 && before_loss && !before_loss()) return false;
    // The seed of this micro-batch's backward (below), known before its loss: cross-entropy's dlogits come
    // from its forward pass (one read of the logits instead of two).
    const double seed = (scaler_ ? scaler_->scale() : 1.0) / static_cast<double>(dp_->global_micro_steps());
    const ag::ExpectSeed expect(seed);
    Tensor loss = model_->loss_of(logits, y);
    inspect_->end_forward();
    if (gpu_optimizer_) gpu_optimizer_->add_loss(loss, micro == 0);  // summed on the GPU, read once in update
    else s.loss_sum += loss.item();
    // The seed 1/grad_accum gives the grads of scale(loss, 1/grad_accum) without reading a GPU loss back.
    // f16: times the loss scale, so small f16 gradients stay representable.
    // MPI: the last backward hands finished gradient buckets to the all-reduce while it goes on.
    ag::backward(loss, seed,
                 micro + 1 == cfg_.train.grad_accum ? dp_->grad_hook() : ag::LeafReadyFn{});
  }
  dp_->end_step(data_, data_rng_, dropout_rng_);
  dp_->reduce_grads();
  s.stop = g_stop_signal != 0;
  s.loss_sum = dp_->reduce_loss(s.loss_sum, s.stop);
  return true;
}

// The GPU optimizer's update recorded, nothing read (overlap: its stats' read-back queued); the CPU's, whole.
void TrainingRun::update_record(StepOutcome& s, int64_t step, bool overlap) {
  if (!gpu_optimizer_) return update(s, step);
  // Per-parameter gradient norms (before clipping; the GPU AdamW unscales inside its step) and weights before it.
  inspect_->before_update(scaler_ ? scaler_->scale() : 1.0);
  gpu_optimizer_->clip_and_step(s.lr, cfg_.optim.grad_clip, scaler_ ? 1.0 / scaler_->scale() : 1.0);
  if (overlap) gpu_optimizer_->request_stats();
}

// The GPU optimizer's step read back (loss + grad norm): the loss scale's update and the guard's verdict.
void TrainingRun::update_finish(StepOutcome& s, int64_t step) {
  if (!gpu_optimizer_) return;
  const vk::GpuAdamW::Stats g = gpu_optimizer_->read_stats();  // the step's one host read: loss + grad norm
  bool no_stop = false;  // stopping was agreed in forward_backward; this sums the GPU-held losses of the ranks
  s.loss_sum = dp_->reduce_loss(g.loss, no_stop);
  s.grad_norm = g.grad_norm;
  if (scaler_) {  // the CPU branch's scaler logic, on the GPU's finite check of the unscaled grads
    const bool finite = std::isfinite(s.grad_norm);
    s.overflow = !finite && std::isfinite(s.loss_sum);
    if (finite || s.overflow) scaler_->update(finite);
    if (s.overflow) s.grad_norm = 0;
  }
  optimizer_owner_->zero_grad();
  // GPU AdamW vetoed a non-finite step on the GPU (so skip works); a finite one is applied: a spike only warns.
  if (!s.overflow)
    s.verdict = guard_->check_update(step + 1, mean_loss(s), s.grad_norm, !result_.checkpoint.empty(),
                                     /*vetoable=*/g.skipped);
}

// The CPU optimizer: unscale (f16), clip, AdamW, and the numerics guard's verdict on the step (s.verdict).
void TrainingRun::update(StepOutcome& s, int64_t step) {
  // f16 loss scaling: non-finite grads of a finite loss are an overflow of the scale, which the scaler
  // handles (update skipped, scale backed off): not a numerics-guard bad step. A non-finite loss still is.
  if (scaler_ && !gpu_optimizer_) {  // GPU AdamW unscales and checks on the GPU, the same way (below)
    const bool finite = scaler_->unscale(params_);
    s.overflow = !finite && std::isfinite(s.loss_sum);
    if (finite || s.overflow) scaler_->update(finite);
  }
  // Per-parameter gradient norms (before clipping) and weights before it.
  inspect_->before_update(1.0);
  AdamW& optimizer = *optimizer_owner_;
  const bool have_checkpoint = !result_.checkpoint.empty();
  if (s.overflow) {
    optimizer.zero_grad();  // skipped update; grad_norm reads 0 in the step record
  } else {
    s.grad_norm = clip_grad_norm(params_, cfg_.optim.grad_clip);
    // A non-finite loss or grad norm (or a spike with spike_action skip) vetoes the update.
    s.verdict = guard_->check_update(step + 1, mean_loss(s), s.grad_norm, have_checkpoint);
    if (!s.verdict.bad()) {
      dp_->before_step(params_);  // ZeRO-1: this rank updates the parameters it owns
      optimizer.step(s.lr);
      dp_->after_step(params_);   // ... and every owner broadcasts its own
      faults_.poison_params(step + 1, params_);  // test hook: a "bad update"
      GuardVerdict pv = guard_->check_params(step + 1, model_->named_parameters(), have_checkpoint);
      if (pv.bad()) s.verdict = pv;
    }
  }
  optimizer.zero_grad();
}

// A step the guard did not simply apply: name the first non-finite op if asked, roll back if decided, record it.
void TrainingRun::handle_guard(StepOutcome& s, int64_t step, const Rng& data_before, const Rng& dropout_before) {
  GuardVerdict& verdict = s.verdict;
  if (verdict.diagnose) verdict.detail = find_origin(data_before, dropout_before);
  if (verdict.action == GuardAction::rollback) guard_->on_rollback(step + 1);
  nlohmann::json rec = guard_->record(verdict);
  if (verdict.action == GuardAction::rollback) rec["to_step"] = rollback();
  metrics_.write("guard", rec);
  progress_.message(guard_->message(verdict));
}

void TrainingRun::log_step(const StepOutcome& s, int64_t done) {
  // An overlapped step ends where the next one began (its stats are read during that one's forward).
  const double step_s = s.ended != Clock::time_point{} ? std::chrono::duration<double>(s.ended - s.started).count()
                                                       : seconds_since(s.started);
  const double elapsed = seconds_since(t0_);
  const double loss_v = mean_loss(s);
  const double tps = static_cast<double>(tokens_per_step_) / step_s;
  if (done % cfg_.train.log_interval == 0 || done == cfg_.train.max_steps) {
    nlohmann::json rec = {{"step", done}, {"loss", loss_v}, {"lr", s.lr}, {"grad_norm", s.grad_norm},
                          {"tokens_per_sec", tps}, {"step_ms", step_s * 1e3}, {"elapsed_s", elapsed},
                          {"tokens_seen", st_.tokens_seen}, {"flops_per_step", flops_per_step_}};
    if (s.ended != Clock::time_point{}) rec["overlapped"] = true;  // train.overlap_steps: read during the next step
    if (cfg_.metrics.peak_tflops > 0) rec["mfu"] = flops_per_step_ / step_s / (cfg_.metrics.peak_tflops * 1e12);
    if (scaler_) {  // f16 mode: the scale after this step and the overflow-skipped updates so far
      rec["loss_scale"] = scaler_->scale();
      rec["loss_scale_skips"] = scaler_->state().skipped;
    }
    const BackendCounters now = backend_counters_now();
    rec.update(backend_view_fields(now - backend_prev_));  // ops per device, flushes, bytes since last record
    rec.update(dp_->rank_fields(step_s * 1e3));  // MPI: every rank's step and all-reduce figures (collective)
    backend_prev_ = now;
    metrics_.write("step", rec);
  }
  progress_.step(done, loss_v, s.lr, tps, elapsed);
}

// Train and val loss every eval_interval steps and at the last step.
void TrainingRun::evaluate(int64_t done) {
  const bool eval_due = done % cfg_.train.eval_interval == 0;
  // The extra final evaluation draws from a copy, so the eval stream (and a resumed run) is as if it had not run.
  Rng final_eval_rng = eval_rng_;
  Rng& er = eval_due ? eval_rng_ : final_eval_rng;
  result_.train_loss = estimate_loss(*model_, data_, false, cfg_, er);
  result_.val_loss = estimate_loss(*model_, data_, true, cfg_, er);
  st_.eval_step = done;
  st_.train_loss = result_.train_loss;
  st_.val_loss = result_.val_loss;
  metrics_.write("eval", {{"step", done}, {"train_loss", result_.train_loss}, {"val_loss", result_.val_loss},
                          {"elapsed_s", seconds_since(t0_)}});
  progress_.eval(done, result_.train_loss, result_.val_loss);
}

void TrainingRun::save_checkpoint() {
  if (scaler_) st_.loss_scale = scaler_->state();
  st_.guard = guard_->state();
  st_.init = init_rng_.state();
  st_.data = data_rng_.state();
  st_.dropout = dropout_rng_.state();
  st_.eval = eval_rng_.state();
  st_.sample = sample_rng_.state();
  std::string path;
  dp_->unshard_optimizer(*optimizer_owner_, /*for_save=*/true);  // ZeRO-1: rank 0 gathers m, v
  if (dp_->leader()) path = save_run_checkpoint(cfg_, data_.tokenizer(), *model_, *optimizer_owner_, st_);
  dp_->shard_optimizer(*optimizer_owner_);
  result_.checkpoint = dp_->share_checkpoint(path);  // the other ranks wait until the file is complete
  metrics_.write("checkpoint", {{"step", st_.step}, {"path", result_.checkpoint}});
}

// Re-runs a bad step's forward and backward from its starting data/dropout streams in check mode
// (autograd/check.h) to name the first op that produced a non-finite value. The streams are copies.
std::string TrainingRun::find_origin(Rng d, Rng dr) {
  ag::CheckFinite check;
  for (int64_t micro = 0; micro < cfg_.train.grad_accum && !check.first(); ++micro) {
    Tensor loss = next_batch_loss(d, dr);
    ag::backward(loss, 1.0 / static_cast<double>(cfg_.train.grad_accum));
  }
  optimizer_owner_->zero_grad();
  return check.first() ? check.first()->str() : "none on a re-run of the step (a transient fault)";
}

// Rollback: model, AdamW and step from the last checkpoint; the data and dropout streams go on from where
// they are, so the batches since that checkpoint (the offending one included) are skipped. Returns its step.
int64_t TrainingRun::rollback() {
  const RunCheckpoint ck = load_run_checkpoint(result_.checkpoint);
  dp_->unshard_optimizer(*optimizer_owner_, /*for_save=*/false);
  restore_run(ck, *model_, optimizer_owner_.get());
  dp_->shard_optimizer(*optimizer_owner_);
  st_ = ck.state;
  for (auto [rng, s] : {std::pair{&init_rng_, st_.init}, {&eval_rng_, st_.eval}, {&sample_rng_, st_.sample}})
    rng->set_state(s);
  return st_.step;
}

TrainResult TrainingRun::finish() {
  if (result_.interrupted || result_.numerics_stop) return result_;
  if (cfg_.train.sample_tokens > 0 && dp_->leader()) {
    SampleOptions so;
    so.max_new_tokens = cfg_.train.sample_tokens;
    so.temperature = 0.8;
    so.top_k = 200;
    std::vector<int32_t> prompt = {data_.token(true, 0)};
    std::vector<int32_t> out = generate(*model_, prompt, so, sample_rng_);
    result_.sample = data_.tokenizer().decode(out);
    metrics_.write("sample", {{"step", result_.steps}, {"text", result_.sample}});
  }
  metrics_.write("end", {{"step", result_.steps}, {"train_loss", result_.train_loss}, {"val_loss", result_.val_loss},
                         {"elapsed_s", result_.seconds}});
  return result_;
}

}  // namespace

// The phases, in order: set-up (device, data, out_dir, metrics; then the model and optimizer), resume, the
// loop (forward_backward, update, guard, log, evaluate, checkpoint per step), finish (sample, "end").
TrainResult run_training(const Config& cfg, const TrainOptions& opt) {
  refuse_unimplemented(cfg);
  const auto t0 = Clock::now();
  const bool leader = dist::World::rank() == 0;  // MPI: rank 0 alone writes files and prints
  Progress progress(cfg.train.max_steps, opt.quiet || !leader);
  DeviceScope device(cfg.device, cfg.dispatch.threshold, cfg.dispatch.matmul_threshold, cfg.metrics.profile,
                     cfg.dispatch.profile);
  check_device(cfg, device, progress);
  TextData data = load_data(cfg);
  const int64_t V = model_vocab_size(cfg, data);
  const std::string resume_path = prepare_out_dir(cfg, opt, leader);
  auto metrics_owner = leader ? std::make_unique<MetricsWriter>(resolve(cfg.out_dir, cfg.metrics.path), opt.json_stdout)
                              : std::make_unique<MetricsWriter>();  // writes nowhere
  MetricsWriter& metrics = *metrics_owner;
  if (leader) attach_http_sink(cfg, metrics);

  TrainingRun run(cfg, opt, t0, progress, device, data, metrics, V);
  run.start(resume_path);
  run.train();
  return run.finish();
}

}  // namespace alpha
