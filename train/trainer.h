// The training job behind `alpha train`: data -> model -> loop (forward, loss, backward, clip, AdamW,
// schedule) with periodic evaluation, JSONL metrics, a progress line, and a final sample.
#pragma once
#include <cstdint>
#include <string>

#include "train/config.h"

namespace alpha {

struct TrainOptions {
  bool json_stdout = false;  // also stream metrics to stdout (--json)
  bool quiet = false;        // no progress line
};

struct TrainResult {
  int64_t steps = 0;
  double train_loss = 0, val_loss = 0;  // last evaluation
  double seconds = 0;
  std::string sample;
};

TrainResult run_training(const Config& cfg, const TrainOptions& opt);

}  // namespace alpha
