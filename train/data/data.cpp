#include "data/data.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/json_limits.h"
#include "data/token_file.h"

namespace alpha {

TextData TextData::load(const std::string& path, const std::string& tokenizer_kind, double val_fraction,
                        int64_t block_size, const TokenizerOptions& tok) {
  ALPHA_CHECK(!path.empty(), DataError, "[data] no data file: set \"data.path\" in the config");
  std::ifstream f(path, std::ios::binary);
  ALPHA_CHECK(f.good(), DataError, "[data] cannot open \"{}\": {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  ALPHA_CHECK(!f.bad(), DataError, "[data] error reading \"{}\"", path);
  return from_text(ss.str(), tokenizer_kind, val_fraction, block_size, path, tok);
}

TextData TextData::from_text(const std::string& text, const std::string& tokenizer_kind, double val_fraction,
                             int64_t block_size, const std::string& origin, const TokenizerOptions& tok) {
  ALPHA_CHECK(!text.empty(), DataError, "[data] \"{}\" is empty", origin);
  TextData d;
  d.tokenizer_ = train_tokenizer(tokenizer_kind, text, tok);
  std::vector<int32_t> ids = d.tokenizer_->encode(text);
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t n_train = static_cast<int64_t>(static_cast<double>(n) * (1.0 - val_fraction));
  const int64_t need = block_size + 1;
  ALPHA_CHECK(n_train >= need && n - n_train >= need, DataError,
              "[data] \"{}\" has {} tokens: the train ({}) and val ({}) splits each need at least block_size + 1 = {}",
              origin, n, n_train, n - n_train, need);
  d.train_.assign(ids.begin(), ids.begin() + n_train);
  d.val_.assign(ids.begin() + n_train, ids.end());
  return d;
}

namespace fs = std::filesystem;

bool TextData::is_token_path(const std::string& path) {
  if (fs::is_directory(path)) return fs::exists(fs::path(path) / "train.bin");
  return fs::path(path).extension() == ".bin";
}

TextData TextData::load_tokens(const std::string& path, double val_fraction, int64_t block_size, int64_t model_vocab,
                               const std::string& tok_kind, const TokenizerOptions& tok) {
  const bool dir = fs::is_directory(path);
  const fs::path folder = dir ? fs::path(path) : fs::path(path).parent_path();
  TextData d;
  const fs::path tok_json = folder / "tokenizer.json";
  if (fs::exists(tok_json)) {
    std::ifstream f(tok_json, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    nlohmann::json j;
    try {
      ALPHA_CHECK(json_nesting_depth(text) <= kMaxJsonDepth, ValueError, "JSON nested deeper than {} levels",
                  kMaxJsonDepth);
      j = nlohmann::json::parse(text);
      d.tokenizer_ = tokenizer_from_json(j);
    } catch (const std::exception& e) {
      throw DataError(fmt::format("[data] \"{}\": bad tokenizer: {}", tok_json.string(), e.what()));
    }
  } else if (tok_kind == "gpt2" && !tok.path.empty()) {
    d.tokenizer_ = train_tokenizer("gpt2", "", tok);
  }
  ALPHA_CHECK(d.tokenizer_ != nullptr, DataError,
              "[data] \"{}\": no tokenizer.json beside the token files (or set data.tokenizer gpt2 with data.tokenizer_path)",
              path);
  const int64_t tv = d.tokenizer_->vocab_size();
  ALPHA_CHECK(model_vocab <= 0 || model_vocab >= tv, DataError,
              "[data] model.vocab_size {} is smaller than the {}-token vocabulary", model_vocab, tv);
  const int64_t vocab = model_vocab > 0 ? model_vocab : tv;
  const int64_t need = block_size + 1;
  if (dir) {
    for (int s = 0; s < 2; ++s) {
      const fs::path p = folder / (s ? "val.bin" : "train.bin");
      ALPHA_CHECK(fs::exists(p), DataError, "[data] \"{}\" is missing", p.string());
      d.file_[s] = TokenFile::open(p.string(), vocab, need);
      d.size_[s] = d.file_[s]->size();
    }
  } else {
    auto f = TokenFile::open(path, vocab, need);
    const int64_t n = f->size();
    const int64_t n_train = static_cast<int64_t>(static_cast<double>(n) * (1.0 - val_fraction));
    ALPHA_CHECK(n_train >= need && n - n_train >= need, DataError,
                "[data] \"{}\" has {} tokens: the train ({}) and val ({}) splits each need at least block_size + 1 = {}",
                path, n, n_train, n - n_train, need);
    d.file_[0] = d.file_[1] = f;
    d.size_[0] = n_train;
    d.offset_[1] = n_train;
    d.size_[1] = n - n_train;
  }
  return d;
}

int64_t TextData::split_size(bool val) const {
  return file_[val] ? size_[val] : static_cast<int64_t>(split(val).size());
}

int32_t TextData::token(bool val, int64_t i) const {
  return file_[val] ? file_[val]->at(offset_[val] + i) : split(val)[static_cast<size_t>(i)];
}

std::pair<Tensor, Tensor> TextData::batch(bool val, int64_t B, int64_t T, Rng& rng) const {
  const std::vector<int32_t>& data = split(val);
  const TokenFile* file = file_[val].get();
  const int64_t n = split_size(val);
  ALPHA_CHECK(n >= T + 1, DataError, "[data] split of {} tokens is shorter than block_size + 1 = {}", n, T + 1);
  Tensor x = Tensor::empty({B, T}, DType::i32), y = Tensor::empty({B, T}, DType::i32);
  int32_t* px = x.mutable_data<int32_t>();
  int32_t* py = y.mutable_data<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    const auto i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - T)));
    if (file) {
      file->copy(offset_[val] + i, T, px + b * T);
      file->copy(offset_[val] + i + 1, T, py + b * T);
      continue;
    }
    std::memcpy(px + b * T, data.data() + i, static_cast<size_t>(T) * sizeof(int32_t));
    std::memcpy(py + b * T, data.data() + i + 1, static_cast<size_t>(T) * sizeof(int32_t));
  }
  return {x, y};
}

void TextData::skip(bool val, int64_t B, int64_t T, Rng& rng, int64_t count) const {
  const int64_t n = split_size(val);
  ALPHA_CHECK(n >= T + 1, DataError, "[data] split of {} tokens is shorter than block_size + 1 = {}", n, T + 1);
  for (int64_t i = 0; i < count * B; ++i) rng.below(static_cast<uint64_t>(n - T));
}

}  // namespace alpha
