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
  if constexpr (std::is_arithmetic_v<T>) same = v.is_number() && v.get<double>() == static_cast<double>(want);
  ALPHA_CHECK(same, CheckpointError, "[checkpoint] init_from \"{}\": \"{}\" is {}, the model ({}) needs {}", p.string(),
              key, v.dump(), ours, nlohmann::json(want).dump());
}

}  // namespace

bool is_hf_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec) &&
         fs::is_regular_file(fs::path(path) / "model.safetensors", ec);
}

nlohmann::json hf_gpt2_config(const GPTConfig& mc, const Tokenizer* tok) {
  nlohmann::json eot = nullptr;  // GPT-2's <|endoftext|> doubles as bos and eos
  if (tok && tok->kind() == "gpt2") {
    const nlohmann::json enc = tok->to_json().at("encoder");
    if (enc.contains("<|endoftext|>")) eot = enc.at("<|endoftext|>");
  }
  return {{"architectures", {"GPT2LMHeadModel"}}, {"model_type", "gpt2"}, {"vocab_size", mc.vocab_size},
          {"n_positions", mc.block_size}, {"n_ctx", mc.block_size}, {"n_embd", mc.n_embd}, {"n_layer", mc.n_layer},
          {"n_head", mc.n_head}, {"n_inner", nullptr}, {"activation_function", "gelu_new"},
          {"resid_pdrop", mc.dropout}, {"embd_pdrop", mc.dropout}, {"attn_pdrop", mc.dropout},
          {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02}, {"scale_attn_weights", true},
          {"tie_word_embeddings", true}, {"use_cache", true}, {"bos_token_id", eot}, {"eos_token_id", eot},
          {"torch_dtype", "float32"}};
}

void export_hf(const std::string& dir, const GPT& model, const Tokenizer* tok) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ALPHA_CHECK(!ec, CheckpointError, "[checkpoint] cannot create \"{}\": {}", dir, ec.message());
  const fs::path d(dir);
  const GPTConfig& mc = model.config();
  write_safetensors((d / "model.safetensors").string(), gpt2_hf_tensors(model, /*lm_head_names=*/true),
                    alpha_safetensors_metadata(mc, tok));
  write_file_atomic((d / "config.json").string(), hf_gpt2_config(mc, tok).dump(2) + "\n");
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

void load_hf_into(GPT& model, const std::string& dir, const Tokenizer& tok) {
  const fs::path d(dir), cfg_path = d / "config.json";
  const nlohmann::json cfg = read_json(cfg_path);
  ALPHA_CHECK(cfg.is_object(), CheckpointError, "[checkpoint] init_from \"{}\" is not a JSON object", cfg_path.string());
  const GPTConfig& mc = model.config();
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
  if (tok.kind() == "gpt2" && fs::is_regular_file(d / "vocab.json"))
    ALPHA_CHECK(read_json(d / "vocab.json") == tok.to_json().at("encoder"), CheckpointError,
                "[checkpoint] init_from \"{}\": vocab.json differs from the gpt2 tokenizer of data.tokenizer_path",
                dir);
  load_gpt2_tensors_into(model, file, meta.is_object() ? meta : nlohmann::json::object(), st_path, tok);
}

}  // namespace alpha
