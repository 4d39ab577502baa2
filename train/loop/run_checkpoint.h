// Training checkpoints on top of the ALPH container: what a run saves (model + AdamW state + every RNG stream,
// step, schedule position, last evaluation, config and tokenizer), where (OUT_DIR/ckpt-<step>.alph plus a
// `latest` pointer), what is kept (the last keep_last plus the best by val loss), and what resume checks.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "core/rng.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "optim/loss_scale.h"
#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "model/gpt.h"
#include "loop/guard.h"
#include "data/tokenizer.h"

namespace alpha {

struct TrainState {
  int64_t step = 0;          // optimizer steps done
  int64_t tokens_seen = 0;
  int64_t eval_step = 0;     // step of the last evaluation (0 = none yet)
  double train_loss = NAN, val_loss = NAN;  // that evaluation's losses
  RngState init, data, dropout, eval, sample;  // data doubles as the data-loader cursor (random sampling)
  GuardState guard;  // numerics guard counters (train/loop/guard.h); older checkpoints without them load as zeros
  LossScaleState loss_scale;  // f16 mode's dynamic loss scale (optim/loss_scale.h); defaults when absent
};

struct RunCheckpoint {
  std::string path;
  Config config;
  nlohmann::json tokenizer;
  GPTConfig model;  // vocab_size resolved
  TrainState state;
  int64_t optimizer_step = 0;
  CheckpointFile file;
};

// The model the config describes, with the vocabulary resolved (trainer, bench).
GPTConfig gpt_config(const ModelConfig& m, int64_t vocab_size);
ScheduleOptions schedule_from_config(const Config& cfg);
std::string checkpoint_file_name(int64_t step);  // "ckpt-00000012.alph"

// Refuses non-finite params, m or v (CheckpointError naming the tensor); removes stray *.tmp files in out_dir;
// writes OUT_DIR/ckpt-<step>.alph and the `latest` pointer crash-safely, then applies retention. Returns the path.
std::string save_run_checkpoint(const Config& cfg, const Tokenizer& tok, const GPT& model, const AdamW& opt,
                                const TrainState& st);
RunCheckpoint load_run_checkpoint(const std::string& path, bool header_only = false);

// `arg` empty or "latest": the checkpoint OUT_DIR/latest names; otherwise the path itself. Missing -> error.
std::string find_resume_checkpoint(const std::string& out_dir, const std::string& arg);

// Refuses (CheckpointError naming the field) a config whose model shape, vocabulary or tokenizer differs from
// the checkpoint's. Everything else (max_steps, lr and schedule, eval/log/checkpoint settings, batch size,
// grad_accum, dropout, device, out_dir, metrics path) may change. `what` is "resume" or "init_from".
void check_compatible(const RunCheckpoint& ck, const GPTConfig& model, const Tokenizer& tok, const std::string& what);

// Copies the checkpoint's params into `model` and, when `opt` is given, its m, v and step count.
void restore_run(const RunCheckpoint& ck, GPT& model, AdamW* opt);

// Keeps the newest keep_last ckpt-*.alph in out_dir plus the one with the lowest val loss among those saved
// at an evaluation step; deletes the rest. Runs only after a new checkpoint is committed.
void apply_retention(const std::string& out_dir, int64_t keep_last);

}  // namespace alpha
