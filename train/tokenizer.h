// Tokenizers turn text into token ids and back. The char tokenizer maps each Unicode code point seen in the
// training text to an id (sorted by code point, like nanoGPT's shakespeare_char). Its JSON form travels with
// checkpoints so sampling always decodes with the vocabulary the model was trained on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace alpha {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string kind() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual nlohmann::json to_json() const = 0;
};

class CharTokenizer : public Tokenizer {
 public:
  static CharTokenizer train(const std::string& text);  // vocabulary = code points present in text
  explicit CharTokenizer(std::vector<uint32_t> code_points);
  std::string kind() const override { return "char"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(chars_.size()); }
  // Code points outside the vocabulary raise ValueError naming the character and its byte offset.
  std::vector<int32_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  nlohmann::json to_json() const override;

 private:
  std::vector<uint32_t> chars_;  // id -> code point, ascending
};

// Builds a tokenizer of kind `kind` on `text` (the char tokenizer here; other kinds come with the tokenizer issue).
std::unique_ptr<Tokenizer> train_tokenizer(const std::string& kind, const std::string& text);
std::unique_ptr<Tokenizer> tokenizer_from_json(const nlohmann::json& j);

// UTF-8 helpers: invalid bytes decode as U+FFFD so arbitrary files never crash the tokenizer.
std::vector<uint32_t> utf8_decode(const std::string& s);
void utf8_append(std::string& out, uint32_t cp);

}  // namespace alpha
