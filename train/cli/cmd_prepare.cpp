// `alpha prepare`: tokenizes a text file once into OUT_DIR/train.bin + val.bin (docs/data-format.md) and
// tokenizer.json, so training memory-maps token ids instead of re-tokenizing the text on every start.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/cmd_util.h"
#include "config/config.h"
#include "data/data.h"
#include "metrics/progress.h"
#include "data/token_file.h"

namespace alpha {

namespace {

constexpr const char* kPrepareHelp = R"(usage: alpha prepare --tokenizer char|word|bpe|gpt2 [--vocab-size N] [--tokenizer-path DIR]
                     [--val-fraction F] [--quiet] IN.txt OUT_DIR
       alpha prepare CONFIG [OUT_DIR] [--quiet]

Trains the tokenizer on IN.txt (gpt2 loads DIR/encoder.json + vocab.bpe), tokenizes it and writes
OUT_DIR/train.bin, OUT_DIR/val.bin (the tail F of the tokens, default 0.1) and OUT_DIR/tokenizer.json.
With a CONFIG, the data.* keys give the input and tokenizer; OUT_DIR defaults to data.path without its
extension plus ".tokens". Point data.path at OUT_DIR to train from the token files (docs/data-format.md).
exit codes: 0 ok, 2 usage error, 3 bad input data
)";

constexpr size_t kChunkBytes = size_t{1} << 20;

// Encodes in ~1 MiB chunks cut after a newline followed by a non-space character, a boundary no tokenizer's
// pieces cross, so the ids equal one whole-text encode while a progress line advances.
std::vector<int32_t> encode_with_progress(const Tokenizer& tok, const std::string& text, Progress& progress) {
  std::vector<int32_t> ids;
  const auto total = static_cast<int64_t>(text.size());
  progress.task("tokenizing", 0, total);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.size();
    if (text.size() - pos > 2 * kChunkBytes) {
      size_t cut = pos + kChunkBytes;
      while (cut + 1 < text.size() &&
             !(text[cut] == '\n' && !std::isspace(static_cast<unsigned char>(text[cut + 1]))))
        ++cut;
      end = cut + 1 < text.size() ? cut + 1 : text.size();
    }
    const std::vector<int32_t> part = tok.encode(text.substr(pos, end - pos));
    ids.insert(ids.end(), part.begin(), part.end());
    pos = end;
    progress.task("tokenizing", static_cast<int64_t>(pos), total);
  }
  return ids;
}

}  // namespace

int cmd_prepare(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  bool quiet = false;
  for (const std::string& s : args) {
    if (s == "--quiet") quiet = true;
    else rest.push_back(s);
  }
  CmdArgs a("prepare", rest, {"--tokenizer", "--vocab-size", "--tokenizer-path", "--val-fraction"});
  if (a.help) {
    std::fputs(kPrepareHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return a.usage(a.error);
  std::string in, out_dir, kind;
  TokenizerOptions topt;
  double val_fraction = 0.1;
  const bool config_form = !a.positional.empty() && a.positional[0].size() > 5 &&
                           a.positional[0].substr(a.positional[0].size() - 5) == ".json" && !a.values.count("--tokenizer");
  if (config_form) {
    if (a.positional.size() > 2) return a.usage("prepare CONFIG takes at most one OUT_DIR");
    const Config cfg = load_config(a.positional[0], {});
    in = cfg.data.path;
    kind = cfg.data.tokenizer;
    topt = TokenizerOptions{cfg.data.vocab_size, cfg.data.tokenizer_path};
    val_fraction = cfg.data.val_fraction;
    ALPHA_CHECK(!in.empty(), DataError, "[data] no data file: set \"data.path\" in the config");
    out_dir = a.positional.size() == 2 ? a.positional[1]
                                       : (std::filesystem::path(in).replace_extension("").string() + ".tokens");
  } else {
    if (a.positional.size() != 2) return a.usage("prepare needs IN.txt and OUT_DIR (or a CONFIG)");
    if (!a.values.count("--tokenizer")) return a.usage("prepare needs --tokenizer char|word|bpe|gpt2");
    in = a.positional[0];
    out_dir = a.positional[1];
    kind = a.get("--tokenizer", "");
    if (kind != "char" && kind != "word" && kind != "bpe" && kind != "gpt2")
      return a.usage("--tokenizer must be char, word, bpe or gpt2, got \"" + kind + "\"");
    try {
      topt.vocab_size = a.get_int("--vocab-size", 0, 1);
      val_fraction = a.get_double("--val-fraction", 0.1);
    } catch (const CmdArgError& e) {
      return a.usage(e.what());
    }
    if (!(val_fraction > 0 && val_fraction < 1)) return a.usage("--val-fraction must be in (0, 1)");
    topt.path = a.get("--tokenizer-path", "");
    if (kind == "gpt2" && topt.path.empty()) return a.usage("--tokenizer gpt2 needs --tokenizer-path DIR");
  }

  std::ifstream f(in, std::ios::binary);
  ALPHA_CHECK(f.good(), DataError, "[data] cannot open \"{}\"", in);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  ALPHA_CHECK(!text.empty(), DataError, "[data] \"{}\" is empty", in);

  Progress progress(0, quiet);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = train_tokenizer(kind, text, topt);
  } catch (const ValueError& e) {
    throw DataError(fmt::format("[data] tokenizer {}: {}", kind, e.what()));
  }
  const std::vector<int32_t> ids = encode_with_progress(*tok, text, progress);
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t n_train = static_cast<int64_t>(static_cast<double>(n) * (1.0 - val_fraction));
  ALPHA_CHECK(n_train >= 2 && n - n_train >= 2, DataError, "[data] \"{}\" has {} tokens: too few to split {} / {}", in,
              n, n_train, n - n_train);
  std::filesystem::create_directories(out_dir);
  const std::filesystem::path od(out_dir);
  write_token_file((od / "train.bin").string(), std::vector<int32_t>(ids.begin(), ids.begin() + n_train),
                   tok->vocab_size());
  write_token_file((od / "val.bin").string(), std::vector<int32_t>(ids.begin() + n_train, ids.end()), tok->vocab_size());
  std::ofstream(od / "tokenizer.json") << tok->to_json().dump();
  progress.message(fmt::format("prepared {}: {} train + {} val tokens, {} tokenizer, vocab {} -> {}", in, n_train,
                               n - n_train, kind, tok->vocab_size(), out_dir));
  progress.finish();
  return kExitOk;
}

}  // namespace alpha
