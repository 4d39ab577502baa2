#include "train/data.h"

#include <cstring>
#include <fstream>
#include <sstream>

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

std::pair<Tensor, Tensor> TextData::batch(bool val, int64_t B, int64_t T, Rng& rng) const {
  const std::vector<int32_t>& data = split(val);
  const auto n = static_cast<int64_t>(data.size());
  ALPHA_CHECK(n >= T + 1, DataError, "[data] split of {} tokens is shorter than block_size + 1 = {}", n, T + 1);
  Tensor x = Tensor::empty({B, T}, DType::i32), y = Tensor::empty({B, T}, DType::i32);
  int32_t* px = x.mutable_data<int32_t>();
  int32_t* py = y.mutable_data<int32_t>();
  for (int64_t b = 0; b < B; ++b) {
    const auto i = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - T)));
    std::memcpy(px + b * T, data.data() + i, static_cast<size_t>(T) * sizeof(int32_t));
    std::memcpy(py + b * T, data.data() + i + 1, static_cast<size_t>(T) * sizeof(int32_t));
  }
  return {x, y};
}

}  // namespace alpha
