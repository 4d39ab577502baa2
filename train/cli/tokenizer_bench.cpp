// Tokenizer throughput: encode MB/s for gpt2, bpe and word, and bpe training time, on one text file.
// Usage: alpha_tokenizer_bench GPT2_DIR FILE [MAX_BYTES]   (scripts/tokenizer_bench.sh runs it next to the JS one)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/parallel.h"
#include "data/tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best of `reps` runs of f(); each run starts cold (encode keeps no cache between calls).
template <class F>
double best_seconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s GPT2_DIR FILE [MAX_BYTES]\n", argv[0]);
    return 2;
  }
  std::ifstream f(argv[2], std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot open %s\n", argv[2]);
    return 2;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (argc > 3) text.resize(std::min(text.size(), static_cast<size_t>(std::stoull(argv[3]))));
  const double mb = static_cast<double>(text.size()) / 1e6;
  try {
    const auto t_load = std::chrono::steady_clock::now();
    const alpha::Gpt2Tokenizer gpt2 = alpha::Gpt2Tokenizer::load(argv[1]);
    const double load_s = seconds_since(t_load);
    size_t n = 0;
    const double gpt2_s = best_seconds(3, [&] { n = gpt2.encode(text).size(); });
    std::printf("cpp gpt2 load_s=%.3f encode_MBps=%.2f tokens=%zu bytes=%zu threads=%d\n", load_s, mb / gpt2_s, n,
                text.size(), alpha::num_threads());
    const int threads = alpha::num_threads();
    alpha::set_num_threads(1);
    const double serial_s = best_seconds(3, [&] { n = gpt2.encode(text).size(); });
    alpha::set_num_threads(threads);
    std::printf("cpp gpt2 1-thread encode_MBps=%.2f tokens=%zu\n", mb / serial_s, n);
    for (int64_t vocab : {512, 4096}) {
      std::unique_ptr<alpha::BpeTokenizer> bpe;
      const double train_s =
          best_seconds(1, [&] { bpe = std::make_unique<alpha::BpeTokenizer>(alpha::BpeTokenizer::train(text, vocab)); });
      const double enc_s = best_seconds(3, [&] { n = bpe->encode(text).size(); });
      std::printf("cpp bpe vocab=%lld train_s=%.3f encode_MBps=%.2f tokens=%zu\n", static_cast<long long>(vocab),
                  train_s, mb / enc_s, n);
    }
    std::unique_ptr<alpha::WordTokenizer> word;
    const double wtrain_s = best_seconds(1, [&] { word = std::make_unique<alpha::WordTokenizer>(alpha::WordTokenizer::train(text)); });
    const double wenc_s = best_seconds(3, [&] { n = word->encode(text).size(); });
    std::printf("cpp word vocab=%lld train_s=%.3f encode_MBps=%.2f tokens=%zu\n",
                static_cast<long long>(word->vocab_size()), wtrain_s, mb / wenc_s, n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
