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
#include "data/tokenizer.h"

namespace alpha { class TokenFile; }

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

  // Pre-tokenized data (docs/data-format.md), memory-mapped: `path` is a folder holding train.bin and val.bin, or
  // one .bin file whose tail val_fraction is the val split. The tokenizer is tokenizer.json beside the files,
  // else (nanoGPT / llm.c files) the `tok_kind` tokenizer when it needs no text (gpt2). model_vocab > 0 bounds
  // the ids (and is the vocabulary of header-less files without a tokenizer).
  static TextData load_tokens(const std::string& path, double val_fraction, int64_t block_size, int64_t model_vocab,
                              const std::string& tok_kind, const TokenizerOptions& tok = {});
  // True when `path` names token files (a folder with train.bin, or a .bin file) rather than text.
  static bool is_token_path(const std::string& path);

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  // The in-memory splits of text data (empty for token files: use split_size / token).
  const std::vector<int32_t>& split(bool val) const { return val ? val_ : train_; }
  int64_t split_size(bool val) const;
  int32_t token(bool val, int64_t i) const;
  // x, y: i32 (B, T). Advances rng by B draws.
  std::pair<Tensor, Tensor> batch(bool val, int64_t B, int64_t T, Rng& rng) const;
  // Advances rng exactly as `count` batch() calls would, without reading tokens: a data-parallel rank steps
  // over the other ranks' micro-batches of the global batch (the stream stays the same on every rank).
  void skip(bool val, int64_t B, int64_t T, Rng& rng, int64_t count) const;

 private:
  std::shared_ptr<Tokenizer> tokenizer_;
  std::vector<int32_t> train_, val_;
  // Token-file mode: the mapped files and each split's [offset, offset + size) range in them.
  std::shared_ptr<const TokenFile> file_[2];
  int64_t offset_[2] = {0, 0}, size_[2] = {0, 0};
};

}  // namespace alpha
