// Fuzzes the token-file reader (Alpha header, llm.c shard, raw nanoGPT uint16) on a memfd holding the input.
// Contract: the file opens and every token is < its vocabulary, or DataError is thrown.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "data/data.h"
#include "data/token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const alpha::fuzz::MemFile file(data, size);
  // vocab 0 (take the header's) and GPT-2's 50257; min_tokens 1 and a block of 9.
  for (const int64_t vocab : {int64_t{0}, int64_t{50257}}) {
    for (const int64_t min_tokens : {int64_t{1}, int64_t{9}}) {
      alpha::fuzz::expect_only<alpha::DataError>([&] {
        const auto tf = alpha::TokenFile::open(file.path(), vocab, min_tokens);
        if (tf->size() < min_tokens || tf->vocab_size() <= 0) std::abort();
        std::vector<int32_t> out(static_cast<size_t>(tf->size()));
        tf->copy(0, tf->size(), out.data());
        for (const int32_t t : out)
          if (t < 0 || t >= tf->vocab_size()) std::abort();
      });
    }
  }
  return 0;
}
