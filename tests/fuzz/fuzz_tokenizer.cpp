// Fuzzes the tokenizer loaders. First byte even: the rest is tokenizer JSON (as stored in checkpoints and
// tokenizer.json) for tokenizer_from_json. Odd: GPT-2 encoder.json and vocab.bpe, split at the first NUL.
// Contract: a tokenizer loads, encodes and decodes a fixed text and round-trips to_json, or ValueError is thrown.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/fuzz/fuzz_util.h"
#include "config/json_limits.h"
#include "data/tokenizer.h"

namespace {

const std::string kText = "Hello, w\xc3\xb6rld! 123 \xe2\x82\xac\xff\xfe  \n\tthe end";

void exercise(const alpha::Tokenizer& tok) {
  const int64_t vocab = tok.vocab_size();
  if (vocab <= 0) std::abort();
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(kText);
  } catch (const alpha::ValueError&) {  // char: text outside the vocabulary
  }
  for (const int32_t id : ids)
    if (id < 0 || id >= vocab) std::abort();
  (void)tok.decode(ids);
  std::vector<int32_t> all;
  for (int32_t i = 0; i < vocab && i < 512; ++i) all.push_back(i);
  (void)tok.decode(all);
  const auto again = alpha::tokenizer_from_json(tok.to_json());
  if (again->vocab_size() != vocab || again->to_json() != tok.to_json()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  alpha::fuzz::expect_only<alpha::ValueError>([&] {
    if (data[0] % 2 == 0) {
      // Readers check the depth before parsing (train/config/json_limits.h); malformed JSON is the reader's error.
      if (alpha::json_nesting_depth(rest) > alpha::kMaxJsonDepth) return;
      const nlohmann::json j = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return;
      exercise(*alpha::tokenizer_from_json(j));
    } else {
      const size_t nul = rest.find('\0');
      const std::string enc = rest.substr(0, nul), bpe = nul == std::string::npos ? "" : rest.substr(nul + 1);
      const alpha::fuzz::MemFile enc_file(reinterpret_cast<const uint8_t*>(enc.data()), enc.size());
      const alpha::fuzz::MemFile bpe_file(reinterpret_cast<const uint8_t*>(bpe.data()), bpe.size());
      exercise(alpha::Gpt2Tokenizer::load_files(enc_file.path(), bpe_file.path()));
    }
  });
  return 0;
}
