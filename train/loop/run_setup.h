// The set-up of a training run (train/loop/trainer.cpp's run_training), one concern each, in the order it calls them:
// the device check, the data, the model's vocabulary, out_dir and its config.json, the metrics' HTTP sink, and
// init_from weights.
#pragma once
#include <cstdint>
#include <string>

#include "config/config.h"
#include "data/data.h"
#include "loop/device.h"
#include "loop/trainer.h"
#include "metrics/metrics.h"
#include "metrics/progress.h"
#include "model/gpt.h"

namespace alpha {

// "init_from": weights from a Hugging Face directory (checkpoint/hf.h), a safetensors file (GPT-2 names) or an
// ALPH checkpoint (params only; the optimizer, step and RNG streams start fresh).
void init_weights_from(const Config& cfg, GPT& model, const Tokenizer& tok);
// The run's device, named in the progress; refuses optim.device gpu on a CPU device (ConfigError).
void check_device(const Config& cfg, DeviceScope& device, Progress& progress);
TextData load_data(const Config& cfg);
// The model's vocabulary: the config's, or the tokenizer's; refused before the model exists if it cannot fit.
int64_t model_vocab_size(const Config& cfg, const TextData& data);
// Finds the resume checkpoint (if any), then creates out_dir and writes the resolved config.json. A resume
// target must exist before anything is written to out_dir: never a silent fresh start.
std::string prepare_out_dir(const Config& cfg, const TrainOptions& opt, bool leader);
void attach_http_sink(const Config& cfg, MetricsWriter& metrics);

}  // namespace alpha
