#include "loop/run_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/json_limits.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr const char* kParam = "param/";
constexpr const char* kExpAvg = "adamw.exp_avg/";
constexpr const char* kExpAvgSq = "adamw.exp_avg_sq/";

nlohmann::json rng_json(const RngState& s) { return {{"seed", s.seed}, {"position", s.position}}; }
RngState rng_from(const nlohmann::json& j) { return {json_u64(j.at("seed")), json_u64(j.at("position"))}; }
nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
double num_from(const nlohmann::json& j) { return j.is_null() ? NAN : j.get<double>(); }

void check_finite(const Tensor& t, const std::string& what, int64_t step) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    ALPHA_CHECK(std::isfinite(p[i]), CheckpointError,
                "[checkpoint] refusing to save step {}: {} holds a non-finite value ({} at index {})", step, what, p[i], i);
}

void copy_into(Tensor dst, const Tensor& src, const std::string& name) {
  ALPHA_CHECK(src.dtype() == DType::f32 && src.shape() == dst.shape(), CheckpointError,
              "[checkpoint] tensor \"{}\" is {}, the model needs f32{}", name, src.str(), shape_str(dst.shape()));
  std::memcpy(dst.mutable_data<float>(), src.data<float>(), static_cast<size_t>(src.numel()) * sizeof(float));
}

// Step parsed from "ckpt-<digits>.alph"; -1 for other names.
int64_t step_of(const std::string& name) {
  if (name.size() < 11 || name.rfind("ckpt-", 0) != 0 || name.substr(name.size() - 5) != ".alph") return -1;
  const std::string d = name.substr(5, name.size() - 10);
  if (d.empty() || d.size() > 18 || d.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(d);
}

// The header's model shape is what `alpha sample`, `eval` and `export` allocate before copying the weights in: it
// must be in the config's ranges, and the file must hold that many parameter values, so a hostile header can never
// make a small file allocate a huge model.
void check_model_header(const RunCheckpoint& ck, bool header_only) {
  const GPTConfig& g = ck.model;
  const bool in_range = g.n_layer >= 1 && g.n_layer <= 1000 && g.n_head >= 1 && g.n_head <= 1024 && g.n_embd >= 1 &&
                        g.n_embd <= 65536 && g.n_embd % g.n_head == 0 && g.block_size >= 1 &&
                        g.block_size <= (int64_t{1} << 20) && g.vocab_size >= 1 && g.vocab_size <= (int64_t{1} << 24) &&
                        std::isfinite(g.dropout) && g.dropout >= 0 && g.dropout < 1 &&
                        (g.arch == "gpt2" || g.arch == "llama") && g.n_kv_head >= 0 && g.n_kv_head <= g.n_head &&
                        g.n_head % g.kv_heads() == 0 && g.mlp_hidden >= 0 && g.mlp_hidden <= (int64_t{1} << 20) &&
                        std::isfinite(g.rope_base) && g.rope_base > 1 && (g.mlp_act == "swiglu" || g.mlp_act == "relu2") &&
                        (!g.llama() || ((g.n_embd / g.n_head) % 2 == 0 && !g.bias));
  ALPHA_CHECK(in_range, CheckpointError,
              "[checkpoint] \"{}\": header model (n_layer {}, n_head {}, n_embd {}, block_size {}, vocab_size {}, "
              "dropout {}) is out of range", ck.path, g.n_layer, g.n_head, g.n_embd, g.block_size, g.vocab_size, g.dropout);
  if (header_only) return;
  double held = 0;
  for (const auto& nt : ck.file.tensors)
    if (nt.first.rfind(kParam, 0) == 0) held += static_cast<double>(nt.second.numel());
  const double need = static_cast<double>(expected_parameters(g));  // in range: no overflow
  ALPHA_CHECK(held >= need, CheckpointError,
              "[checkpoint] \"{}\" holds {} parameter values, fewer than the {:.0f} its header's model needs", ck.path,
              held, need);
}

}  // namespace

GPTConfig gpt_config(const ModelConfig& m, int64_t vocab_size) {
  GPTConfig mc{m.n_layer, m.n_head, m.n_embd, m.block_size, vocab_size, m.dropout, m.bias};
  mc.fused_attention = m.attention == "fused";
  mc.f16 = m.precision == "f16";
  mc.arch = m.arch;
  mc.n_kv_head = m.n_kv_head;
  mc.mlp_hidden = m.mlp_hidden;
  mc.rope_base = m.rope_base;
  mc.tie_embeddings = m.tie_embeddings;
  mc.qk_norm = m.qk_norm;
  mc.mlp_act = m.mlp_act;
  return mc;
}

ScheduleOptions schedule_from_config(const Config& cfg) {
  return ScheduleOptions{parse_schedule(cfg.optim.schedule), cfg.optim.lr, cfg.optim.min_lr, cfg.optim.warmup_steps,
                         cfg.optim.decay_steps, cfg.optim.wsd_decay_fraction};
}

std::string checkpoint_file_name(int64_t step) { return fmt::format("ckpt-{:08d}.alph", step); }

std::string save_run_checkpoint(const Config& cfg, const Tokenizer& tok, const GPT& model, const AdamW& opt,
                                const TrainState& st) {
  NamedTensors tensors;
  const auto& named = model.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    check_finite(named[i].second, "parameter \"" + named[i].first + "\"", st.step);
    check_finite(const_cast<AdamW&>(opt).exp_avg()[i], "AdamW exp_avg of \"" + named[i].first + "\"", st.step);
    check_finite(const_cast<AdamW&>(opt).exp_avg_sq()[i], "AdamW exp_avg_sq of \"" + named[i].first + "\"", st.step);
  }
  for (size_t i = 0; i < named.size(); ++i) tensors.emplace_back(kParam + named[i].first, named[i].second);
  for (size_t i = 0; i < named.size(); ++i)
    tensors.emplace_back(kExpAvg + named[i].first, const_cast<AdamW&>(opt).exp_avg()[i]);
  for (size_t i = 0; i < named.size(); ++i)
    tensors.emplace_back(kExpAvgSq + named[i].first, const_cast<AdamW&>(opt).exp_avg_sq()[i]);

  const GPTConfig& mc = model.config();
  const ScheduleOptions sched = schedule_from_config(cfg);
  const AdamWOptions& ao = opt.options();
  nlohmann::json optimizer = {{"type", opt.name()}, {"beta1", ao.beta1}, {"beta2", ao.beta2}, {"eps", ao.eps},
                              {"weight_decay", ao.weight_decay}, {"step_count", opt.step_count()}};
  if (const MuonOptions* muon = opt.muon_options()) {  // its momentum buffers ride in the exp_avg slots
    const MuonOptions& mo = *muon;
    optimizer["muon"] = {{"lr", mo.lr}, {"momentum", mo.momentum}, {"weight_decay", mo.weight_decay},
                         {"nesterov", mo.nesterov}, {"ns_steps", mo.ns_steps}, {"ns_coefficients", mo.ns_coefficients},
                         {"ns_dtype", mo.ns_dtype == DType::f16 ? "f16" : "f32"}};
  }
  nlohmann::json meta = {
      {"format", "alpha.train_checkpoint"},
      {"alpha_version", ALPHA_VERSION},
      {"config", config_to_json(cfg)},
      {"model", {{"n_layer", mc.n_layer}, {"n_head", mc.n_head}, {"n_embd", mc.n_embd}, {"block_size", mc.block_size},
                 {"vocab_size", mc.vocab_size}, {"dropout", mc.dropout}, {"bias", mc.bias}, {"arch", mc.arch},
                 {"n_kv_head", mc.n_kv_head}, {"mlp_hidden", mc.mlp_hidden}, {"rope_base", mc.rope_base},
                 {"tie_embeddings", mc.tie_embeddings}, {"qk_norm", mc.qk_norm}, {"mlp_act", mc.mlp_act}}},
      {"tokenizer", tok.to_json()},
      {"step", st.step},
      {"tokens_seen", st.tokens_seen},
      {"schedule", {{"kind", cfg.optim.schedule}, {"next_step", st.step}, {"next_lr", lr_at(sched, st.step)}}},
      {"rng", {{"init", rng_json(st.init)}, {"data", rng_json(st.data)}, {"dropout", rng_json(st.dropout)},
               {"eval", rng_json(st.eval)}, {"sample", rng_json(st.sample)}}},
      {"data_cursor", {{"sampling", cfg.data.sampling}, {"rng", rng_json(st.data)}}},
      {"optimizer", optimizer},
      {"eval", {{"step", st.eval_step}, {"train_loss", num_or_null(st.train_loss)}, {"val_loss", num_or_null(st.val_loss)}}},
      {"guard", guard_state_json(st.guard)},
      {"loss_scale", {{"scale", st.loss_scale.scale}, {"good_steps", st.loss_scale.good_steps},
                      {"skipped", st.loss_scale.skipped}}},
  };
  fs::create_directories(cfg.out_dir);
  // Temp files of saves that were killed midway: never valid checkpoints, so they go before the next one.
  for (const auto& e : fs::directory_iterator(cfg.out_dir))
    if (e.path().extension() == ".tmp" && (step_of(e.path().stem().string()) >= 0 || e.path().stem() == "latest"))
      fs::remove(e.path());
  const std::string name = checkpoint_file_name(st.step);
  const std::string path = (fs::path(cfg.out_dir) / name).string();
  write_checkpoint(path, meta, tensors);
  write_file_atomic((fs::path(cfg.out_dir) / "latest").string(), name + "\n");
  apply_retention(cfg.out_dir, cfg.checkpoint.keep_last);
  return path;
}

RunCheckpoint load_run_checkpoint(const std::string& path, bool header_only) {
  RunCheckpoint ck;
  ck.path = path;
  ck.file = read_checkpoint(path, header_only);
  const nlohmann::json& m = ck.file.meta;
  try {
    ALPHA_CHECK(m.value("format", "") == "alpha.train_checkpoint", CheckpointError,
                "[checkpoint] \"{}\" is not a training checkpoint (format {})", path, m.value("format", "missing"));
    try {
      ck.config = parse_config(m.at("config"));
    } catch (const ConfigError& e) {
      throw CheckpointError(fmt::format("[checkpoint] \"{}\": stored config is invalid: {}", path, e.what()));
    }
    ck.tokenizer = m.at("tokenizer");
    const auto& mj = m.at("model");
    ck.model = GPTConfig{json_i64(mj.at("n_layer")), json_i64(mj.at("n_head")), json_i64(mj.at("n_embd")),
                         json_i64(mj.at("block_size")), json_i64(mj.at("vocab_size")),
                         mj.at("dropout").get<double>(), mj.at("bias").get<bool>()};
    // Llama keys (absent before arch "llama": GPT-2 defaults).
    ck.model.arch = mj.value("arch", std::string("gpt2"));
    ck.model.n_kv_head = mj.value("n_kv_head", int64_t{0});
    ck.model.mlp_hidden = mj.value("mlp_hidden", int64_t{0});
    ck.model.rope_base = mj.value("rope_base", 10000.0);
    ck.model.tie_embeddings = mj.value("tie_embeddings", true);
    ck.model.qk_norm = mj.value("qk_norm", false);
    ck.model.mlp_act = mj.value("mlp_act", std::string("swiglu"));
    TrainState& s = ck.state;
    s.step = json_i64(m.at("step"));
    s.tokens_seen = json_i64(m.at("tokens_seen"));
    const auto& r = m.at("rng");
    s.init = rng_from(r.at("init"));
    s.data = rng_from(r.at("data"));
    s.dropout = rng_from(r.at("dropout"));
    s.eval = rng_from(r.at("eval"));
    s.sample = rng_from(r.at("sample"));
    s.eval_step = json_i64(m.at("eval").at("step"));
    s.train_loss = num_from(m.at("eval").at("train_loss"));
    s.val_loss = num_from(m.at("eval").at("val_loss"));
    ck.optimizer_step = json_i64(m.at("optimizer").at("step_count"));
    ck.optimizer_type = m.at("optimizer").value("type", std::string("adamw"));
    if (m.contains("guard")) s.guard = guard_state_from_json(m.at("guard"));  // absent before issue 9
    if (m.contains("loss_scale")) {  // absent before f16 mode: the defaults
      const auto& ls = m.at("loss_scale");
      s.loss_scale = {ls.at("scale").get<double>(), json_i64(ls.at("good_steps")), json_i64(ls.at("skipped"))};
      ALPHA_CHECK(std::isfinite(s.loss_scale.scale) && s.loss_scale.scale > 0 && s.loss_scale.good_steps >= 0 &&
                      s.loss_scale.skipped >= 0,
                  CheckpointError, "[checkpoint] \"{}\": bad loss_scale {}", path, ls.dump());
    }
    ALPHA_CHECK(s.step >= 0 && ck.optimizer_step >= 0, CheckpointError, "[checkpoint] \"{}\": negative step", path);
    check_model_header(ck, header_only);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad header field: {}", path, e.what()));
  }
  return ck;
}

std::string find_resume_checkpoint(const std::string& out_dir, const std::string& arg) {
  if (!arg.empty() && arg != "latest") {
    ALPHA_CHECK(fs::is_regular_file(arg), CheckpointError, "[checkpoint] no checkpoint at \"{}\" to resume from", arg);
    return arg;
  }
  const fs::path latest = fs::path(out_dir) / "latest";
  std::ifstream f(latest);
  ALPHA_CHECK(f.good(), CheckpointError,
              "[checkpoint] nothing to resume: \"{}\" does not exist (no checkpoint was saved in out_dir \"{}\")",
              latest.string(), out_dir);
  std::string name;
  std::getline(f, name);
  ALPHA_CHECK(step_of(name) >= 0, CheckpointError, "[checkpoint] \"{}\" does not name a checkpoint (\"{}\")",
              latest.string(), name);
  const std::string path = (fs::path(out_dir) / name).string();
  ALPHA_CHECK(fs::is_regular_file(path), CheckpointError, "[checkpoint] \"{}\" names \"{}\", which does not exist",
              latest.string(), path);
  return path;
}

void check_compatible(const RunCheckpoint& ck, const GPTConfig& mc, const Tokenizer& tok, const std::string& what) {
  auto field = [&](const char* name, auto now, auto saved) {
    ALPHA_CHECK(now == saved, CheckpointError,
                "[checkpoint] cannot {} from \"{}\": {} is {} in the config but {} in the checkpoint (model shape, "
                "vocabulary and tokenizer must match)", what, ck.path, name, now, saved);
  };
  field("model.n_layer", mc.n_layer, ck.model.n_layer);
  field("model.n_head", mc.n_head, ck.model.n_head);
  field("model.n_embd", mc.n_embd, ck.model.n_embd);
  field("model.block_size", mc.block_size, ck.model.block_size);
  field("model.vocab_size", mc.vocab_size, ck.model.vocab_size);
  field("model.bias", mc.bias, ck.model.bias);
  field("model.arch", mc.arch, ck.model.arch);
  field("model.n_kv_head", mc.kv_heads(), ck.model.kv_heads());
  field("model.mlp_hidden", mc.mlp_width(), ck.model.mlp_width());
  field("model.tie_embeddings", mc.tie_embeddings, ck.model.tie_embeddings);
  field("model.qk_norm", mc.qk_norm, ck.model.qk_norm);
  field("model.mlp_act", mc.mlp_act, ck.model.mlp_act);
  field("model.rope_base", mc.rope_base, ck.model.rope_base);
  field("data.tokenizer", tok.kind(), ck.tokenizer.value("kind", std::string("?")));
  ALPHA_CHECK(tok.to_json() == ck.tokenizer, CheckpointError,
              "[checkpoint] cannot {} from \"{}\": the tokenizer vocabulary built from data.path differs from the "
              "checkpoint's (same model shape, but token ids would mean different text)", what, ck.path);
}

void restore_run(const RunCheckpoint& ck, GPT& model, AdamW* opt) {
  // Muon's momentum sits where AdamW keeps m: restoring one optimizer's state into the other would misread it.
  ALPHA_CHECK(!opt || ck.optimizer_type == opt->name(), CheckpointError,
              "[checkpoint] cannot resume from \"{}\": it holds {} state but the config's optim.name is \"{}\" (use "
              "init_from to start a new optimizer from its weights)", ck.path, ck.optimizer_type, opt ? opt->name() : "");
  const auto& named = model.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) {
    copy_into(named[i].second, ck.file.get(kParam + named[i].first), named[i].first);
    if (!opt) continue;
    copy_into(opt->exp_avg()[i], ck.file.get(kExpAvg + named[i].first), kExpAvg + named[i].first);
    copy_into(opt->exp_avg_sq()[i], ck.file.get(kExpAvgSq + named[i].first), kExpAvgSq + named[i].first);
  }
  if (opt) opt->set_step_count(ck.optimizer_step);
}

void apply_retention(const std::string& out_dir, int64_t keep_last) {
  std::vector<std::pair<int64_t, fs::path>> ckpts;
  for (const auto& e : fs::directory_iterator(out_dir)) {
    const int64_t s = step_of(e.path().filename().string());
    if (s >= 0 && e.is_regular_file()) ckpts.emplace_back(s, e.path());
  }
  std::sort(ckpts.begin(), ckpts.end());
  if (static_cast<int64_t>(ckpts.size()) <= keep_last) return;
  // Best: lowest val loss measured at the checkpoint's own step (ties: the newest).
  fs::path best;
  double best_loss = INFINITY;
  for (const auto& [step, p] : ckpts) {
    try {
      const RunCheckpoint ck = load_run_checkpoint(p.string(), /*header_only=*/true);
      if (ck.state.eval_step == step && std::isfinite(ck.state.val_loss) && ck.state.val_loss <= best_loss) {
        best_loss = ck.state.val_loss;
        best = p;
      }
    } catch (const CheckpointError&) {
      // An unreadable old checkpoint can never be the best one; it goes with the other old ones.
    }
  }
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < ckpts.size(); ++i)
    if (ckpts[i].second != best) fs::remove(ckpts[i].second);
}

}  // namespace alpha
