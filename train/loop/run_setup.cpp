#include "loop/run_setup.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "loop/run_checkpoint.h"
#include "metrics/http_sink.h"
#include "optim/muon.h"
#include "vk/backend.h"
#include "vk/muon.h"

namespace alpha {

void init_weights_from(const Config& cfg, GPT& model, const Tokenizer& tok) {
  const std::string& p = cfg.init_from;
  if (is_hf_dir(p)) return load_hf_into(model, p, tok);
  const bool dir = std::filesystem::is_directory(p);
  ALPHA_CHECK(std::filesystem::is_regular_file(p), CheckpointError, "[checkpoint] init_from \"{}\" does not exist{}", p,
              dir ? " as a file, and the directory holds no config.json + model.safetensors" : "");
  if (p.size() >= 12 && p.substr(p.size() - 12) == ".safetensors") {
    load_safetensors_into(model, p, tok);
  } else {
    const RunCheckpoint ck = load_run_checkpoint(p);
    check_compatible(ck, model.config(), tok, "init_from");
    restore_run(ck, model, nullptr);
  }
}


void check_device(const Config& cfg, DeviceScope& device, Progress& progress) {
  progress.message("device: " + device.description());
  ALPHA_CHECK(cfg.optim.device != "gpu" || dynamic_cast<vk::VulkanBackend*>(device.backend()) != nullptr, ConfigError,
              "[config] \"optim.device\" is \"gpu\" but the run's device is {}: use a GPU device or optim.device cpu",
              device.description());
  if (cfg.metrics.profile && !device.profiling())
    progress.message("metrics.profile: no GPU timestamps on this device, gpu_ms stays absent");
}

TextData load_data(const Config& cfg) {
  const TokenizerOptions tok_opt{cfg.data.vocab_size, cfg.data.tokenizer_path};
  return TextData::is_token_path(cfg.data.path)  // pre-tokenized files are memory-mapped
             ? TextData::load_tokens(cfg.data.path, cfg.data.val_fraction, cfg.model.block_size, cfg.model.vocab_size,
                                     cfg.data.tokenizer, tok_opt)
             : TextData::load(cfg.data.path, cfg.data.tokenizer, cfg.data.val_fraction, cfg.model.block_size, tok_opt);
}

int64_t model_vocab_size(const Config& cfg, const TextData& data) {
  const int64_t V = cfg.model.vocab_size > 0 ? cfg.model.vocab_size : data.tokenizer().vocab_size();
  ALPHA_CHECK(V >= data.tokenizer().vocab_size(), DataError, "[data] model.vocab_size {} is smaller than the {}-token vocabulary",
              V, data.tokenizer().vocab_size());
  check_host_memory(cfg, V);  // before the model exists: an oversized run exits 2 instead of being killed
  return V;
}

std::string prepare_out_dir(const Config& cfg, const TrainOptions& opt, bool leader) {
  const std::string resume_path = opt.resume.empty() ? "" : find_resume_checkpoint(cfg.out_dir, opt.resume);
  if (!leader) return resume_path;  // MPI: rank 0 alone writes into out_dir
  std::filesystem::create_directories(cfg.out_dir);
  nlohmann::json resolved = config_to_json(cfg);
  std::ofstream(std::filesystem::path(cfg.out_dir) / "config.json") << resolved.dump(2) << "\n";
  return resume_path;
}

void attach_http_sink(const Config& cfg, MetricsWriter& metrics) {
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

std::unique_ptr<AdamW> make_muon(const OptimConfig& o, const GPT& model, const AdamWOptions& adamw,
                                 vk::VulkanBackend* gpu) {
  std::vector<bool> mask;
  for (const auto& [name, p] : model.named_parameters()) mask.push_back(muon_eligible(name, p));
  MuonOptions mo;
  mo.lr = o.muon.lr;
  mo.base_lr = o.lr;
  mo.momentum = o.muon.momentum;
  mo.weight_decay = o.muon.weight_decay;
  mo.nesterov = o.muon.nesterov;
  mo.ns_steps = o.muon.ns_steps;
  mo.ns_dtype = o.muon.ns_dtype == "f16" ? DType::f16 : DType::f32;
  std::copy(o.muon.ns_coefficients.begin(), o.muon.ns_coefficients.end(), mo.ns_coefficients.begin());
  if (gpu) return std::make_unique<vk::GpuMuon>(*gpu, model.parameters(), std::move(mask), adamw, mo);
  return std::make_unique<Muon>(model.parameters(), std::move(mask), adamw, mo);
}

}  // namespace alpha
