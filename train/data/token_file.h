// Token files: pre-tokenized training data read by memory-mapping instead of tokenizing text at start-up.
// Three layouts (docs/data-format.md): Alpha's own (header with magic, version, vocab, count, dtype), nanoGPT's
// raw uint16 `.bin` (no header) and llm.c shards (256 x int32 header, magic 20240520, uint16 tokens).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace alpha {

constexpr char kTokenFileMagic[8] = {'A', 'L', 'P', 'H', 'A', 'T', 'O', 'K'};
constexpr uint32_t kTokenFileVersion = 1;
constexpr int64_t kTokenFileHeaderBytes = 32;
constexpr int32_t kLlmcMagic = 20240520;
constexpr int64_t kLlmcHeaderBytes = 256 * 4;

enum class TokenFileKind { alpha, nanogpt, llmc };

// uint16 when every id fits (vocab <= 65536), else uint32.
int token_dtype_bytes(int64_t vocab_size);

// Writes the header and tokens little-endian; throws DataError if an id is outside [0, vocab_size).
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size);

// A read-only memory-mapped token file, validated when opened (DataError names the file and what is wrong).
class TokenFile {
 public:
  // vocab_size: the vocabulary the ids must stay below; for nanoGPT/llm.c files (no vocab in the file) it is
  // required (> 0), for Alpha files 0 means "take the header's". min_tokens: block_size + 1 typically.
  static std::shared_ptr<TokenFile> open(const std::string& path, int64_t vocab_size, int64_t min_tokens);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  TokenFileKind kind() const { return kind_; }
  int64_t size() const { return count_; }
  int64_t vocab_size() const { return vocab_; }
  int32_t at(int64_t i) const {
    return elem_ == 2 ? static_cast<int32_t>(reinterpret_cast<const uint16_t*>(tokens_)[i])
                      : static_cast<int32_t>(reinterpret_cast<const uint32_t*>(tokens_)[i]);
  }
  // Copies tokens [i, i + n) into out as int32.
  void copy(int64_t i, int64_t n, int32_t* out) const;

 private:
  TokenFile() = default;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const uint8_t* tokens_ = nullptr;
  int64_t count_ = 0, vocab_ = 0;
  int elem_ = 2;
  TokenFileKind kind_ = TokenFileKind::alpha;
};

}  // namespace alpha
