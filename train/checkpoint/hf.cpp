#include "checkpoint/hf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>

#include "checkpoint/safetensors.h"
#include "config/json_limits.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxSideFileBytes = uint64_t{64} << 20;  // config.json, vocab.json: GPT-2's vocab.json is 1 MB

std::string read_text(const fs::path& p) {
  std::error_code ec;
  const uint64_t size = fs::file_size(p, ec);
  ALPHA_CHECK(!ec, CheckpointError, "[checkpoint] cannot read \"{}\": {}", p.string(), ec.message());
  ALPHA_CHECK(size <= kMaxSideFileBytes, CheckpointError, "[checkpoint] \"{}\" is {} bytes, more than a {} expects",
              p.string(), size, p.filename().string());
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  ALPHA_CHECK(f.good() || f.eof(), CheckpointError, "[checkpoint] error reading \"{}\"", p.string());
  return ss.str();
}

nlohmann::json read_json(const fs::path& p) {
  const std::string text = read_text(p);
  ALPHA_CHECK(json_nesting_depth(text) <= kMaxJsonDepth, CheckpointError,
              "[checkpoint] \"{}\": JSON nested deeper than {} levels", p.string(), kMaxJsonDepth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\" is not valid JSON: {}", p.string(), e.what()));
  }
}

// vocab.json ({token: id}) and merges.txt lines ("left right") in GPT-2's byte alphabet, or nothing (char, word).
bool hf_tokenizer_files(const Tokenizer& tok, nlohmann::json& vocab, std::vector<std::string>& merges) {
  const nlohmann::json j = tok.to_json();
  if (tok.kind() == "gpt2") {
    vocab = j.at("encoder");
    merges = j.at("merges").get<std::vector<std::string>>();
    return true;
  }
  if (tok.kind() != "bpe") return false;
  // Byte-level BPE: ids 0..255 are the bytes, 256 + k the concatenation of merge k's pair.
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  vocab = nlohmann::json::object();
  for (const auto& m : j.at("merges")) {
    const auto a = m.at(0).get<size_t>(), b = m.at(1).get<size_t>();
    merges.push_back(gpt2_alphabet(tokens.at(a)) + " " + gpt2_alphabet(tokens.at(b)));
    tokens.push_back(tokens.at(a) + tokens.at(b));
  }
  for (size_t id = 0; id < tokens.size(); ++id) vocab[gpt2_alphabet(tokens[id])] = id;
  return true;
}

template <typename T>
void expect_key(const nlohmann::json& cfg, const fs::path& p, const char* key, const T& want, const char* ours) {
  ALPHA_CHECK(cfg.contains(key), CheckpointError, "[checkpoint] init_from \"{}\": no \"{}\"", p.string(), key);
  const nlohmann::json& v = cfg.at(key);
  bool same = v == nlohmann::json(want);
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>)
    same = v.is_number() && v.get<double>() == static_cast<double>(want);
  ALPHA_CHECK(same, CheckpointError, "[checkpoint] init_from \"{}\": \"{}\" is {}, the model ({}) needs {}", p.string(),
              key, v.dump(), ours, nlohmann::json(want).dump());
}

// A gpt2 run's tokenizer must be the directory's vocab.json, when it has one.
void check_vocab_json(const fs::path& d, const Tokenizer& tok) {
  if (tok.kind() == "gpt2" && fs::is_regular_file(d / "vocab.json"))
    ALPHA_CHECK(read_json(d / "vocab.json") == tok.to_json().at("encoder"), CheckpointError,
                "[checkpoint] init_from \"{}\": vocab.json differs from the gpt2 tokenizer of data.tokenizer_path",
                d.string());
}

// The tokenizer Alpha's export recorded (alpha.tokenizer metadata), if any, must be the run's.
void check_alpha_tokenizer(const nlohmann::json& meta, const std::string& path, const Tokenizer& tok) {
  if (!meta.is_object() || !meta.contains("alpha.tokenizer") || !meta.at("alpha.tokenizer").is_string()) return;
  const std::string text = meta.at("alpha.tokenizer").get<std::string>();
  ALPHA_CHECK(json_nesting_depth(text) <= kMaxJsonDepth, CheckpointError,
              "[checkpoint] \"{}\": alpha.tokenizer metadata nested deeper than {} levels", path, kMaxJsonDepth);
  nlohmann::json tj;
  try {
    tj = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad alpha.tokenizer metadata: {}", path, e.what()));
  }
  ALPHA_CHECK(tj == tok.to_json(), CheckpointError,
              "[checkpoint] init_from \"{}\": its tokenizer differs from the one built from data.path", path);
}

// Tokenizer files shared by both architectures' exports.
void write_tokenizer_files(const fs::path& d, const GPTConfig& mc, const Tokenizer* tok) {
  nlohmann::json vocab;
  std::vector<std::string> merges;
  if (!tok || !hf_tokenizer_files(*tok, vocab, merges)) return;
  write_file_atomic((d / "vocab.json").string(), vocab.dump() + "\n");
  std::string m = "#version: 0.2\n";
  for (const auto& line : merges) m += line + "\n";
  write_file_atomic((d / "merges.txt").string(), m);
  const bool gpt2 = tok->kind() == "gpt2";
  const nlohmann::json special = gpt2 ? nlohmann::json("<|endoftext|>") : nlohmann::json(nullptr);
  const nlohmann::json tc = {{"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", mc.block_size},
                             {"add_prefix_space", false}, {"bos_token", special}, {"eos_token", special},
                             {"unk_token", special}};
  write_file_atomic((d / "tokenizer_config.json").string(), tc.dump(2) + "\n");
}

// <|endoftext|> of a gpt2 tokenizer (bos and eos of GPT-2), else null.
nlohmann::json eot_id(const Tokenizer* tok) {
  if (!tok || tok->kind() != "gpt2") return nullptr;
  const nlohmann::json enc = tok->to_json().at("encoder");
  return enc.contains("<|endoftext|>") ? enc.at("<|endoftext|>") : nlohmann::json(nullptr);
}

// Llama: the parameter names are LlamaForCausalLM's already (train/model/llama.cpp), in nn.Linear's (out, in).
std::vector<SafetensorEntry> llama_hf_tensors(const GPT& model) {
  std::vector<SafetensorEntry> out;
  for (const auto& [name, t] : model.named_parameters()) {
    const Tensor c = t.contiguous();
    const float* p = c.data<float>();
    out.push_back({name, c.shape(), std::vector<float>(p, p + c.numel())});
  }
  return out;
}

void check_llama_exportable(const GPTConfig& mc, const std::string& dir) {
  ALPHA_CHECK(mc.mlp_act == "swiglu", CheckpointError,
              "[checkpoint] \"{}\": model.mlp_act \"{}\" has no LlamaForCausalLM equivalent (its MLP is SwiGLU)", dir,
              mc.mlp_act);
  ALPHA_CHECK(!mc.qk_norm, CheckpointError,
              "[checkpoint] \"{}\": model.qk_norm has no LlamaForCausalLM equivalent (no q_norm / k_norm)", dir);
}

// Llama's config.json must describe `mc` (LlamaConfig's defaults where a key is absent).
void check_llama_config(const nlohmann::json& cfg, const fs::path& p, const GPTConfig& mc) {
  expect_key(cfg, p, "hidden_size", mc.n_embd, "model.n_embd");
  expect_key(cfg, p, "num_hidden_layers", mc.n_layer, "model.n_layer");
  expect_key(cfg, p, "num_attention_heads", mc.n_head, "model.n_head");
  expect_key(cfg, p, "vocab_size", mc.vocab_size, "model.vocab_size, or the tokenizer's");
  expect_key(cfg, p, "intermediate_size", mc.mlp_width(), "model.mlp_hidden");
  nlohmann::json c = cfg;
  auto fill = [&](const char* k, const nlohmann::json& v) {
    if (!c.contains(k) || c.at(k).is_null()) c[k] = v;
  };
  fill("num_key_value_heads", mc.n_head);
  fill("head_dim", mc.n_embd / mc.n_head);
  fill("rope_theta", 10000.0);
  fill("rms_norm_eps", 1e-6);
  fill("hidden_act", "silu");
  fill("tie_word_embeddings", false);
  fill("attention_bias", false);
  fill("mlp_bias", false);
  expect_key(c, p, "num_key_value_heads", mc.kv_heads(), "model.n_kv_head");
  expect_key(c, p, "head_dim", mc.n_embd / mc.n_head, "model.n_embd / model.n_head");
  expect_key(c, p, "rope_theta", mc.rope_base, "model.rope_base");
  expect_key(c, p, "rms_norm_eps", mc.norm_eps, "model.norm_eps");
  expect_key(c, p, "hidden_act", std::string("silu"), "model.mlp_act swiglu");
  expect_key(c, p, "tie_word_embeddings", mc.tie_embeddings, "model.tie_embeddings");
  expect_key(c, p, "attention_bias", false, "no biases");
  expect_key(c, p, "mlp_bias", false, "no biases");
  ALPHA_CHECK(!c.contains("rope_scaling") || c.at("rope_scaling").is_null(), CheckpointError,
              "[checkpoint] init_from \"{}\": \"rope_scaling\" is {}; Alpha's RoPE is unscaled", p.string(),
              c.at("rope_scaling").dump());
  ALPHA_CHECK(!mc.qk_norm && mc.mlp_act == "swiglu", CheckpointError,
              "[checkpoint] init_from \"{}\": a LlamaForCausalLM directory cannot fill a model with model.qk_norm or "
              "model.mlp_act relu2", p.string());
}

// Every Llama parameter from the file, same name and shape; a tied model takes no lm_head.weight unless it
// equals the embedding.
void load_llama_tensors(GPT& model, const NamedTensors& file, const std::string& path) {
  auto find_t = [&](const std::string& n) -> const Tensor* {
    for (const auto& [fn, t] : file)
      if (fn == n) return &t;
    return nullptr;
  };
  for (const auto& [name, dst0] : model.named_parameters()) {
    const Tensor* src = find_t(name);
    ALPHA_CHECK(src != nullptr, CheckpointError, "[checkpoint] init_from \"{}\": missing tensor \"{}\"", path, name);
    ALPHA_CHECK(src->shape() == dst0.shape(), CheckpointError,
                "[checkpoint] init_from \"{}\": tensor \"{}\" is {}, the model (config model.*) needs {}", path, name,
                shape_str(src->shape()), shape_str(dst0.shape()));
    Tensor dst = dst0;
    std::memcpy(dst.mutable_data<float>(), src->data<float>(), dst.nbytes());
  }
  const Tensor* head = find_t("lm_head.weight");
  if (model.config().tie_embeddings && head) {
    const Tensor emb = model.parameter("model.embed_tokens.weight");
    ALPHA_CHECK(head->shape() == emb.shape() && std::memcmp(head->data<float>(), emb.data<float>(), emb.nbytes()) == 0,
                CheckpointError, "[checkpoint] init_from \"{}\": lm_head.weight differs from model.embed_tokens.weight "
                "but model.tie_embeddings is true", path);
  }
}

}  // namespace

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec) &&
         fs::is_regular_file(fs::path(path) / "model.safetensors", ec);
}

nlohmann::json hf_gpt2_config(const GPTConfig& mc, const Tokenizer* tok) {
  const nlohmann::json eot = eot_id(tok);  // GPT-2's <|endoftext|> doubles as bos and eos
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", mc.vocab_size},
          {"n_positions", mc.block_size}, {"n_ctx", mc.block_size}, {"n_embd", mc.n_embd}, {"n_layer", mc.n_layer},
          {"n_head", mc.n_head}, {"n_inner", nullptr}, {"activation_function", "gelu_new"},
          {"resid_pdrop", mc.dropout}, {"embd_pdrop", mc.dropout}, {"attn_pdrop", mc.dropout},
          {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02}, {"scale_attn_weights", true},
          {"tie_word_embeddings", true}, {"use_cache", true}, {"bos_token_id", eot}, {"eos_token_id", eot},
          {"torch_dtype", "float32"}};
}

nlohmann::json hf_llama_config(const GPTConfig& mc, const Tokenizer* tok) {
  const nlohmann::json eot = eot_id(tok);
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", mc.vocab_size},
          {"hidden_size", mc.n_embd}, {"intermediate_size", mc.mlp_width()}, {"num_hidden_layers", mc.n_layer},
          {"num_attention_heads", mc.n_head}, {"num_key_value_heads", mc.kv_heads()},
          {"head_dim", mc.n_embd / mc.n_head}, {"max_position_embeddings", mc.block_size},
          {"rope_theta", mc.rope_base}, {"rope_scaling", nullptr}, {"rms_norm_eps", mc.norm_eps},
          {"hidden_act", "silu"}, {"attention_bias", false}, {"mlp_bias", false},
          {"attention_dropout", mc.dropout}, {"tie_word_embeddings", mc.tie_embeddings},
          {"initializer_range", 0.02}, {"pretraining_tp", 1}, {"use_cache", true}, {"bos_token_id", eot},
          {"eos_token_id", eot}, {"torch_dtype", "float32"}};
}

void export_hf(const std::string& dir, const GPT& model, const Tokenizer* tok) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ALPHA_CHECK(!ec, CheckpointError, "[checkpoint] cannot create \"{}\": {}", dir, ec.message());
  const fs::path d(dir);
  const GPTConfig& mc = model.config();
  if (mc.llama()) {
    check_llama_exportable(mc, dir);
    nlohmann::json meta = alpha_safetensors_metadata(mc, tok);
    meta.erase("alpha.model");  // its GPT-2 keys would not describe this model; config.json does
    write_safetensors((d / "model.safetensors").string(), llama_hf_tensors(model), meta);
    write_file_atomic((d / "config.json").string(), hf_llama_config(mc, tok).dump(2) + "\n");
  } else {
    write_safetensors((d / "model.safetensors").string(), gpt2_hf_tensors(model, /*lm_head_names=*/true),
                      alpha_safetensors_metadata(mc, tok));
    write_file_atomic((d / "config.json").string(), hf_gpt2_config(mc, tok).dump(2) + "\n");
  }
  write_tokenizer_files(d, mc, tok);
}

namespace {

void load_hf(GPT& model, const std::string& dir, const Tokenizer& tok) {
  const fs::path d(dir), cfg_path = d / "config.json";
  const nlohmann::json cfg = read_json(cfg_path);
  ALPHA_CHECK(cfg.is_object(), CheckpointError, "[checkpoint] init_from \"{}\" is not a JSON object", cfg_path.string());
  const GPTConfig& mc = model.config();
  if (mc.llama()) {
    expect_key(cfg, cfg_path, "model_type", std::string("llama"), "model.arch llama");
    check_llama_config(cfg, cfg_path, mc);
    check_vocab_json(d, tok);
    nlohmann::json meta;
    const std::string st_path = (d / "model.safetensors").string();
    const NamedTensors file = read_safetensors(st_path, &meta);
    check_alpha_tokenizer(meta, st_path, tok);
    return load_llama_tensors(model, file, st_path);
  }
  expect_key(cfg, cfg_path, "model_type", std::string("gpt2"), "model.arch gpt2");
  expect_key(cfg, cfg_path, "n_embd", mc.n_embd, "model.n_embd");
  expect_key(cfg, cfg_path, "n_layer", mc.n_layer, "model.n_layer");
  expect_key(cfg, cfg_path, "n_head", mc.n_head, "model.n_head");
  expect_key(cfg, cfg_path, "vocab_size", mc.vocab_size, "model.vocab_size, or the tokenizer's");
  const nlohmann::json np = cfg.value("n_positions", nlohmann::json(1024));  // GPT2Config's defaults
  ALPHA_CHECK(np.is_number_integer() && np.get<int64_t>() >= mc.block_size, CheckpointError,
              "[checkpoint] init_from \"{}\": \"n_positions\" is {}, less than model.block_size {}", cfg_path.string(),
              np.dump(), mc.block_size);
  const nlohmann::json eps = cfg.value("layer_norm_epsilon", nlohmann::json(1e-5));
  ALPHA_CHECK(eps.is_number() && eps.get<double>() == 1e-5, CheckpointError,
              "[checkpoint] init_from \"{}\": \"layer_norm_epsilon\" is {}; Alpha's LayerNorm uses 1e-5",
              cfg_path.string(), eps.dump());
  const std::string act = cfg.value("activation_function", std::string("gelu_new"));
  ALPHA_CHECK(act == "gelu_new" || act == "gelu_pytorch_tanh", CheckpointError,
              "[checkpoint] init_from \"{}\": \"activation_function\" is \"{}\"; Alpha's GELU is the tanh one "
              "(gelu_new)", cfg_path.string(), act);
  ALPHA_CHECK(cfg.value("tie_word_embeddings", true) == true, CheckpointError,
              "[checkpoint] init_from \"{}\": \"tie_word_embeddings\" is false; the GPT-2 block ties its LM head",
              cfg_path.string());
  const std::string st_path = (d / "model.safetensors").string();
  nlohmann::json meta;
  NamedTensors file = read_safetensors(st_path, &meta);
  const Tensor* wte = nullptr;
  const Tensor* head = nullptr;
  for (const auto& [n, t] : file) {
    if (n == "transformer.wte.weight" || n == "wte.weight") wte = &t;
    if (n == "lm_head.weight") head = &t;
  }
  ALPHA_CHECK(!head || (wte && head->shape() == wte->shape() &&
                        std::memcmp(head->data<float>(), wte->data<float>(), wte->nbytes()) == 0),
              CheckpointError, "[checkpoint] init_from \"{}\": lm_head.weight differs from wte.weight (untied head)",
              st_path);
  check_vocab_json(d, tok);
  load_gpt2_tensors_into(model, file, meta.is_object() ? meta : nlohmann::json::object(), st_path, tok);
}

}  // namespace

void load_hf_into(GPT& model, const std::string& dir, const Tokenizer& tok) {
  try {
    load_hf(model, dir, tok);
  } catch (const nlohmann::json::exception& e) {  // a key of the wrong JSON type
    throw CheckpointError(fmt::format("[checkpoint] init_from \"{}\": bad config.json or metadata: {}", dir, e.what()));
  }
}

}  // namespace alpha
