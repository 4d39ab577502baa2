// Training data: a text file tokenized in memory, split train/val, and random (B, T) windows drawn with the
// seeded RNG exactly like nanoGPT's get_batch: x = data[i : i+T], y = data[i+1 : i+T+1].
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "train/tokenizer.h"

namespace alpha {

// Bad input data (missing, empty, too short): the CLI exits with code 3.
class DataError : public Error {
  using Error::Error;
};

class TextData {
 public:
  // Reads `path`, trains a `tokenizer_kind` tokenizer on it, splits off the last `val_fraction` for validation.
  // Both splits must hold at least block_size + 1 tokens.
  static TextData load(const std::string& path, const std::string& tokenizer_kind, double val_fraction,
                       int64_t block_size, const TokenizerOptions& tok = {});
  static TextData from_text(const std::string& text, const std::string& tokenizer_kind, double val_fraction,
                            int64_t block_size, const std::string& origin, const TokenizerOptions& tok = {});

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::vector<int32_t>& split(bool val) const { return val ? val_ : train_; }
  // x, y: i32 (B, T). Advances rng by B draws.
  std::pair<Tensor, Tensor> batch(bool val, int64_t B, int64_t T, Rng& rng) const;

 private:
  std::shared_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> train_, val_;
};

}  // namespace alpha
