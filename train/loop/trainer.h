// The training job behind `alpha train`: data -> model -> loop (forward, loss, backward, clip, AdamW,
// schedule) with periodic evaluation, JSONL metrics, a progress line, checkpoints (train/loop/run_checkpoint.h),
// exact resume, SIGINT/SIGTERM handling, and a final sample.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "config/config.h"

namespace alpha {

class AdamW;
class GPT;
struct AdamWOptions;
namespace vk { class VulkanBackend; }

struct TrainOptions {
  bool json_stdout = false;  // also stream metrics to stdout (--json)
  bool quiet = false;        // no progress line
  std::string resume;        // "" = fresh run; "latest" = OUT_DIR/latest; else a checkpoint path (--resume)
  std::function<void(int64_t step)> after_step;  // test hook, called after each finished step
};

struct TrainResult {
  int64_t steps = 0;
  double train_loss = 0, val_loss = 0;  // last evaluation
  double seconds = 0;
  std::string sample;
  bool interrupted = false;  // stopped by SIGINT/SIGTERM after saving `checkpoint`
  bool numerics_stop = false;  // stopped by the numerics guard (train/loop/guard.h); `checkpoint` is the last good one
  std::string checkpoint;    // the last checkpoint written ("" if none)
};

TrainResult run_training(const Config& cfg, const TrainOptions& opt);

// optim.name muon: Muon (optim.muon.*, its lr relative to optim.lr) for the model's block matrices, AdamW with
// `adamw` for the rest; its state on the host (optim/muon.h), or on the GPU when `gpu` is given (vk/muon.h).
std::unique_ptr<AdamW> make_muon(const OptimConfig& o, const GPT& model, const AdamWOptions& adamw,
                                 vk::VulkanBackend* gpu);

}  // namespace alpha
