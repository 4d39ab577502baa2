#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "data/data.h"

namespace alpha {

namespace {

template <typename T>
void put(std::string& out, T v) {  // little-endian (the only byte order Alpha runs on)
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int token_dtype_bytes(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens, int64_t vocab_size) {
  ALPHA_CHECK(vocab_size > 0, DataError, "[data] \"{}\": vocab size must be positive, got {}", path, vocab_size);
  const int elem = token_dtype_bytes(vocab_size);
  std::string out;
  out.reserve(static_cast<size_t>(kTokenFileHeaderBytes) + tokens.size() * static_cast<size_t>(elem));
  out.append(kTokenFileMagic, 8);
  put<uint32_t>(out, kTokenFileVersion);
  put<uint32_t>(out, static_cast<uint32_t>(elem));
  put<uint64_t>(out, static_cast<uint64_t>(vocab_size));
  put<uint64_t>(out, static_cast<uint64_t>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    ALPHA_CHECK(t >= 0 && t < vocab_size, DataError, "[data] \"{}\": token id {} at position {} is outside vocab size {}",
                path, t, i, vocab_size);
    if (elem == 2) put<uint16_t>(out, static_cast<uint16_t>(t));
    else put<uint32_t>(out, static_cast<uint32_t>(t));
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  ALPHA_CHECK(f.good(), DataError, "[data] cannot write \"{}\": {}", path, std::strerror(errno));
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  f.close();
  ALPHA_CHECK(!f.fail(), DataError, "[data] error writing \"{}\"", path);
}

std::shared_ptr<TokenFile> TokenFile::open(const std::string& path, int64_t vocab_size, int64_t min_tokens) {
  std::shared_ptr<TokenFile> tf(new TokenFile());
  const int fd = ::open(path.c_str(), O_RDONLY);
  ALPHA_CHECK(fd >= 0, DataError, "[data] cannot open \"{}\": {}", path, std::strerror(errno));
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const auto bytes = static_cast<int64_t>(st.st_size);
  if (!stat_ok || bytes == 0) ::close(fd);
  ALPHA_CHECK(stat_ok, DataError, "[data] cannot stat \"{}\"", path);
  ALPHA_CHECK(bytes > 0, DataError, "[data] token file \"{}\" is empty", path);
  void* m = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ALPHA_CHECK(m != MAP_FAILED, DataError, "[data] cannot map \"{}\": {}", path, std::strerror(errno));
  tf->map_ = m;
  tf->map_bytes_ = static_cast<size_t>(bytes);
  const auto* p = static_cast<const uint8_t*>(m);

  int64_t header = 0, declared = -1;
  if (bytes >= 8 && std::memcmp(p, kTokenFileMagic, 8) == 0) {
    tf->kind_ = TokenFileKind::alpha;
    ALPHA_CHECK(bytes >= kTokenFileHeaderBytes, DataError, "[data] \"{}\": {} bytes is shorter than the {}-byte header",
                path, bytes, kTokenFileHeaderBytes);
    const auto version = get<uint32_t>(p + 8), elem = get<uint32_t>(p + 12);
    const auto vocab = static_cast<int64_t>(get<uint64_t>(p + 16));
    declared = static_cast<int64_t>(get<uint64_t>(p + 24));
    ALPHA_CHECK(version == kTokenFileVersion, DataError, "[data] \"{}\": unsupported token file version {} (expected {})",
                path, version, kTokenFileVersion);
    ALPHA_CHECK(vocab > 0, DataError, "[data] \"{}\": header vocab size is 0", path);
    ALPHA_CHECK(static_cast<int>(elem) == token_dtype_bytes(vocab), DataError,
                "[data] \"{}\": header dtype is {} bytes but vocab size {} needs {}", path, elem, vocab,
                token_dtype_bytes(vocab));
    ALPHA_CHECK(vocab_size <= 0 || vocab <= vocab_size, DataError,
                "[data] \"{}\": file vocab size {} is larger than the model's {}", path, vocab, vocab_size);
    tf->elem_ = static_cast<int>(elem);
    tf->vocab_ = vocab;
    header = kTokenFileHeaderBytes;
  } else if (bytes >= 4 && get<int32_t>(p) == kLlmcMagic) {
    tf->kind_ = TokenFileKind::llmc;
    ALPHA_CHECK(bytes >= kLlmcHeaderBytes, DataError, "[data] \"{}\": {} bytes is shorter than llm.c's {}-byte header",
                path, bytes, kLlmcHeaderBytes);
    const auto version = get<int32_t>(p + 4);
    ALPHA_CHECK(version == 1, DataError, "[data] \"{}\": unsupported llm.c shard version {} (expected 1)", path, version);
    declared = get<int32_t>(p + 8);
    ALPHA_CHECK(declared >= 0, DataError, "[data] \"{}\": llm.c header token count {} is negative", path, declared);
    tf->elem_ = 2;
    header = kLlmcHeaderBytes;
  } else {
    tf->kind_ = TokenFileKind::nanogpt;  // raw uint16, no header
    tf->elem_ = 2;
  }
  if (tf->kind_ != TokenFileKind::alpha) {
    ALPHA_CHECK(vocab_size > 0, DataError,
                "[data] \"{}\" has no vocabulary in it: set \"model.vocab_size\" or put a tokenizer.json beside it", path);
    tf->vocab_ = vocab_size;
  }
  const int64_t body = bytes - header;
  ALPHA_CHECK(body % tf->elem_ == 0, DataError, "[data] \"{}\": odd byte count: {} token bytes is not a multiple of {}",
              path, body, tf->elem_);
  tf->count_ = body / tf->elem_;
  ALPHA_CHECK(declared < 0 || declared == tf->count_, DataError,
              "[data] \"{}\": header/size mismatch: header says {} tokens, the file holds {}", path, declared, tf->count_);
  ALPHA_CHECK(tf->count_ >= min_tokens, DataError,
              "[data] \"{}\" has {} tokens, shorter than block_size + 1 = {}", path, tf->count_, min_tokens);
  tf->tokens_ = p + header;
  for (int64_t i = 0; i < tf->count_; ++i) {  // one pass up front so a bad id fails before training starts
    const int32_t t = tf->at(i);
    ALPHA_CHECK(t >= 0 && t < tf->vocab_, DataError, "[data] \"{}\": token id {} at position {} is >= vocab size {}",
                path, static_cast<uint32_t>(t), i, tf->vocab_);
  }
  return tf;
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

void TokenFile::copy(int64_t i, int64_t n, int32_t* out) const {
  for (int64_t k = 0; k < n; ++k) out[k] = at(i + k);
}

}  // namespace alpha
