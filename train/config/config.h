// The training configuration: a JSON file (configs/*.json) plus "a.b=value" overrides, parsed into plain
// structs and validated in one place, so the trainer can trust every field. Every key, its default and its
// allowed range are documented in docs/config.md; a test keeps that document in sync with the code.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace alpha {

// Bad config file, key, type, value or override. Messages start with "[config]" and name the full dotted key.
// The CLI maps it to exit code 2.
class ConfigError : public Error { using Error::Error; };

struct ModelConfig {
  int64_t n_layer = 6, n_head = 6, n_embd = 384, block_size = 256;
  int64_t vocab_size = 0;  // 0 = take it from the tokenizer
  double dropout = 0.2;
  bool bias = false;
  std::string attention = "fused";  // fused | unfused (the reference composition of ops)
  std::string precision = "f32";    // f32 | f16 (f16 storage of activations and weight copies, f32 math and master weights)
  // Llama-style blocks (train/model/llama.cpp); the keys below need arch "llama" (docs/config.md).
  std::string arch = "gpt2";        // gpt2 | llama
  int64_t n_kv_head = 0;            // 0 = n_head; must divide n_head
  int64_t mlp_hidden = 0;           // 0 = default (swiglu: 8C/3 rounded up to 64; relu2: 4C)
  double rope_base = 10000.0;
  bool tie_embeddings = true;
  bool qk_norm = false;
  std::string mlp_act = "swiglu";   // swiglu | relu2
  bool operator==(const ModelConfig&) const = default;
};

struct DataConfig {
  std::string path = "";           // text file; empty is allowed here, the trainer refuses to run without data
  std::string tokenizer = "char";  // char | word | bpe | gpt2
  double val_fraction = 0.1;       // tail fraction of the tokens held out for validation
  std::string sampling = "random"; // random | sequential
  int64_t vocab_size = 0;          // bpe: target vocabulary (0 = 512); word: vocabulary cap (0 = 4096)
  std::string tokenizer_path = ""; // gpt2: folder holding encoder.json and vocab.bpe
  bool operator==(const DataConfig&) const = default;
};

struct TrainConfig {
  int64_t batch_size = 64, grad_accum = 1, max_steps = 5000, eval_interval = 250, eval_iters = 200,
          log_interval = 1;
  int64_t sample_tokens = 200;  // tokens generated at the end of training (0 = none)
  // Weight gradients computed side by side after the rest of backward (GPU; same bits); false holds less memory.
  bool defer_weight_grads = true;
  // GPU optimizer: the next step's forward is recorded before this step's loss and grad norm are read (same bits).
  bool overlap_steps = true;
  bool operator==(const TrainConfig&) const = default;
};

// optim.muon: Muon for the blocks' 2-D matrices when optim.name is "muon" (optim/muon.h).
struct MuonConfig {
  double lr = 0.02, momentum = 0.95, weight_decay = 0.0;  // lr: Muon's peak; the schedule scales it like optim.lr
  bool nesterov = true;
  int64_t ns_steps = 5;
  std::vector<double> ns_coefficients{3.4445, -4.7750, 2.0315};  // (a, b, c) of the Newton-Schulz quintic
  std::string ns_dtype = "f32";  // f32 | f16 (the iteration's matmuls on f16 operands: tensor cores on the GPU)
  bool operator==(const MuonConfig&) const = default;
};

struct OptimConfig {
  std::string name = "adamw";  // adamw | muon (Muon for block matrices, AdamW for the rest)
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup_steps = 100;
  std::string schedule = "cosine";  // constant | cosine | linear | wsd
  int64_t decay_steps = 5000;
  double wsd_decay_fraction = 0.2, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, eps = 1e-8;
  double grad_clip = 1.0;  // max global gradient norm; 0 = off
  std::string device = "cpu";  // where AdamW runs: cpu (the reference) | gpu (vk::GpuAdamW; needs a GPU device)
  int64_t zero = 0;  // 1: ZeRO-1, the AdamW state sharded over MPI ranks (loop/data_parallel.h)
  MuonConfig muon;
  bool operator==(const OptimConfig&) const = default;
};

struct CheckpointConfig {
  int64_t interval = 250, keep_last = 3;
  bool operator==(const CheckpointConfig&) const = default;
};

struct MetricsHttpConfig {
  std::string url = "";        // POST endpoint for JSONL batches; empty = no HTTP sink
  std::string token_env = "";  // environment variable holding a bearer token; empty = no auth
  int64_t queue_lines = 10000, batch_lines = 500, max_retries = 5;
  double timeout_s = 5, close_timeout_s = 5;
  bool operator==(const MetricsHttpConfig&) const = default;
};
struct MetricsConfig {
  std::string path = "metrics.jsonl";  // relative paths are inside out_dir
  bool profile = false;                // per-kernel GPU time from Vulkan timestamps
  double peak_tflops = 0;              // the device's peak FLOP/s (in TFLOP/s) for MFU; 0 = unknown, no MFU
  int64_t inspect_interval = 100;      // `inspect` records (grad/weight/update norms, activation stats); 0 = off
  MetricsHttpConfig http;
  bool operator==(const MetricsConfig&) const = default;
};

// Size-threshold dispatcher (issue 4): ops at least this big run on the GPU when one is in use.
// kAutoThreshold ("auto" in JSON): chosen by the device (train/loop/device.h): 0 on a hardware GPU, where a CPU op
// costs a GPU round trip; 2^20 elements / 2^24 flops on a CPU-type device such as lavapipe.
constexpr int64_t kAutoThreshold = -1;
struct DispatchConfig {
  int64_t threshold = kAutoThreshold;         // elements, for element-wise/row ops
  int64_t matmul_threshold = kAutoThreshold;  // flops (2*M*N*K)
  std::string profile;  // "" | "auto" | path: per-class thresholds from `alpha calibrate` (train/loop/calibrate.h)
  bool operator==(const DispatchConfig&) const = default;
};

// Numerics guard (issue 9, train/loop/guard.h, docs/reliability.md): what a step with a non-finite loss, gradient
// or parameter (or a loss spike) does.
struct GuardConfig {
  std::string policy = "skip";         // skip | rollback | stop
  int64_t max_bad_steps = 5;           // bad steps in a row that end the run with exit code 5 (every policy)
  double rollback_lr_factor = 1.0;     // the LR is multiplied by this after each rollback, in (0, 1]
  int64_t spike_window = 100;          // finite losses the spike detector keeps
  double spike_zscore = 6.0;           // a loss this many std devs above the window mean is a spike; 0 = off
  std::string spike_action = "warn";   // warn | skip
  int64_t param_check_interval = 1;    // check params for non-finite values every N updates; 0 = never
  bool operator==(const GuardConfig&) const = default;
};

struct Config {
  std::string out_dir = "runs/default";
  uint64_t seed = 1337;
  std::string device = "auto";  // auto | cpu | vulkan | vulkan:N
  std::string init_from = "";   // empty = train from scratch
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  CheckpointConfig checkpoint;
  MetricsConfig metrics;
  DispatchConfig dispatch;
  GuardConfig guard;
  bool operator==(const Config&) const = default;
};

// Validates everything (unknown keys with did-you-mean, types, ranges, cross-field rules); missing keys take
// the defaults above. Throws ConfigError.
Config parse_config(const nlohmann::json& j);

// Reads the file at `path` (the error names the path if it is missing, unreadable or not JSON, with the
// parse error's line:column), applies `overrides` ("a.b=value", in order; value parsed as JSON if it
// parses, else taken as a string; an unknown key is an error with did-you-mean), then parse_config.
Config load_config(const std::string& path, const std::vector<std::string>& overrides);
// Same, from text; `origin` names the source in error messages (e.g. the file path or "<string>").
Config load_config_text(const std::string& json_text, const std::vector<std::string>& overrides,
                        const std::string& origin);

// Refuses (ConfigError naming the keys) a run whose parameters, gradients, AdamW moments and logits cannot fit in
// host memory (`host_bytes`; 0 = this machine's physical RAM). The trainer calls it once the vocabulary is known,
// before allocating the model, so an oversized config exits 2 instead of being killed for memory.
void check_host_memory(const Config& c, int64_t vocab_size, double host_bytes = 0);

// The resolved config with every key; parse_config(config_to_json(c)) == c.
nlohmann::json config_to_json(const Config& c);

}  // namespace alpha
