// config_to_json: a Config as JSON, every key — the schema parse_config checks keys against (config.cpp), the
// config a run directory records, and the key list of the round-trip test.
#include <nlohmann/json.hpp>

#include "config/config.h"

namespace alpha {

using json = nlohmann::json;

namespace {
json threshold_json(int64_t t) { return t == kAutoThreshold ? json("auto") : json(t); }
}  // namespace

json config_to_json(const Config& c) {
  const auto& m = c.model;
  const auto& o = c.optim;
  const auto& t = c.train;
  return json{
      {"out_dir", c.out_dir},
      {"seed", c.seed},
      {"device", c.device},
      {"init_from", c.init_from},
      {"model",
       {{"n_layer", m.n_layer}, {"n_head", m.n_head}, {"n_embd", m.n_embd}, {"block_size", m.block_size},
        {"vocab_size", m.vocab_size}, {"dropout", m.dropout}, {"bias", m.bias},
        {"attention", m.attention}, {"precision", m.precision}, {"arch", m.arch}, {"n_kv_head", m.n_kv_head},
        {"mlp_hidden", m.mlp_hidden}, {"rope_base", m.rope_base}, {"tie_embeddings", m.tie_embeddings},
        {"qk_norm", m.qk_norm}, {"mlp_act", m.mlp_act}}},
      {"data",
       {{"path", c.data.path}, {"tokenizer", c.data.tokenizer}, {"val_fraction", c.data.val_fraction},
        {"sampling", c.data.sampling}, {"vocab_size", c.data.vocab_size}, {"tokenizer_path", c.data.tokenizer_path}}},
      {"train",
       {{"batch_size", t.batch_size}, {"grad_accum", t.grad_accum}, {"max_steps", t.max_steps},
        {"eval_interval", t.eval_interval}, {"eval_iters", t.eval_iters}, {"log_interval", t.log_interval},
        {"sample_tokens", t.sample_tokens}, {"defer_weight_grads", t.defer_weight_grads},
        {"overlap_steps", t.overlap_steps}}},
      {"optim",
       {{"lr", o.lr}, {"min_lr", o.min_lr}, {"warmup_steps", o.warmup_steps}, {"schedule", o.schedule},
        {"decay_steps", o.decay_steps}, {"wsd_decay_fraction", o.wsd_decay_fraction},
        {"weight_decay", o.weight_decay}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps},
        {"grad_clip", o.grad_clip}, {"device", o.device}, {"zero", o.zero}, {"name", o.name},
        {"muon", {{"lr", o.muon.lr}, {"momentum", o.muon.momentum}, {"weight_decay", o.muon.weight_decay},
                  {"nesterov", o.muon.nesterov}, {"ns_steps", o.muon.ns_steps},
                  {"ns_coefficients", o.muon.ns_coefficients}, {"ns_dtype", o.muon.ns_dtype}}}}},
      {"checkpoint", {{"interval", c.checkpoint.interval}, {"keep_last", c.checkpoint.keep_last}}},
      {"metrics", {{"path", c.metrics.path}, {"profile", c.metrics.profile}, {"peak_tflops", c.metrics.peak_tflops},
                   {"inspect_interval", c.metrics.inspect_interval},
                   {"http", {{"url", c.metrics.http.url}, {"token_env", c.metrics.http.token_env},
                             {"queue_lines", c.metrics.http.queue_lines}, {"batch_lines", c.metrics.http.batch_lines},
                             {"max_retries", c.metrics.http.max_retries}, {"timeout_s", c.metrics.http.timeout_s},
                             {"close_timeout_s", c.metrics.http.close_timeout_s}}}}},
      {"dispatch", {{"threshold", threshold_json(c.dispatch.threshold)},
                    {"matmul_threshold", threshold_json(c.dispatch.matmul_threshold)},
                    {"profile", c.dispatch.profile}}},
      {"guard", {{"policy", c.guard.policy}, {"max_bad_steps", c.guard.max_bad_steps},
                 {"rollback_lr_factor", c.guard.rollback_lr_factor}, {"spike_window", c.guard.spike_window},
                 {"spike_zscore", c.guard.spike_zscore}, {"spike_action", c.guard.spike_action},
                 {"param_check_interval", c.guard.param_check_interval}}},
  };
}

}  // namespace alpha
