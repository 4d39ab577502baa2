#include "data/tokenizer.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "data/tokenizer_detail.h"

namespace alpha {

std::vector<uint32_t> utf8_decode(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

CharTokenizer CharTokenizer::train(const std::string& text) {
  const std::vector<uint32_t> cps = utf8_decode(text);
  std::set<uint32_t> seen(cps.begin(), cps.end());
  return CharTokenizer(std::vector<uint32_t>(seen.begin(), seen.end()));
}

CharTokenizer::CharTokenizer(std::vector<uint32_t> code_points) : chars_(std::move(code_points)) {
  std::sort(chars_.begin(), chars_.end());
  chars_.erase(std::unique(chars_.begin(), chars_.end()), chars_.end());
  ALPHA_CHECK(!chars_.empty(), ValueError, "[tokenizer] char vocabulary is empty");
}

std::vector<int32_t> CharTokenizer::encode(const std::string& text) const {
  const std::vector<uint32_t> cps = utf8_decode(text);
  std::vector<int32_t> ids;
  ids.reserve(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    auto it = std::lower_bound(chars_.begin(), chars_.end(), cps[i]);
    if (it == chars_.end() || *it != cps[i]) {
      std::string ch;
      utf8_append(ch, cps[i]);
      throw ValueError(fmt::format("[tokenizer] character '{}' (U+{:04X}) at position {} is not in the vocabulary",
                                   ch, cps[i], i));
    }
    ids.push_back(static_cast<int32_t>(it - chars_.begin()));
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    ALPHA_CHECK(id >= 0 && id < vocab_size(), IndexError, "[tokenizer] token {} out of range for vocab {}", id,
                vocab_size());
    utf8_append(out, chars_[static_cast<size_t>(id)]);
  }
  return out;
}

nlohmann::json CharTokenizer::to_json() const { return {{"kind", "char"}, {"chars", chars_}}; }

std::unique_ptr<Tokenizer> train_tokenizer(const std::string& kind, const std::string& text,
                                           const TokenizerOptions& options) {
  ALPHA_CHECK(options.vocab_size >= 0, ValueError, "[tokenizer] vocab_size {} is negative", options.vocab_size);
  if (kind == "char") return std::make_unique<CharTokenizer>(CharTokenizer::train(text));
  if (kind == "word")
    return std::make_unique<WordTokenizer>(
        WordTokenizer::train(text, options.vocab_size > 0 ? options.vocab_size : WordTokenizer::kDefaultMaxVocab));
  if (kind == "bpe")
    return std::make_unique<BpeTokenizer>(
        BpeTokenizer::train(text, options.vocab_size > 0 ? options.vocab_size : BpeTokenizer::kDefaultVocabSize));
  if (kind == "gpt2") {
    ALPHA_CHECK(!options.path.empty(), ValueError,
                "[tokenizer] gpt2 needs the directory holding GPT-2's encoder.json and vocab.bpe");
    return std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(options.path));
  }
  throw ValueError(fmt::format("[tokenizer] unknown tokenizer kind \"{}\" (supported: char, word, bpe, gpt2)", kind));
}

std::unique_ptr<Tokenizer> tokenizer_from_json(const nlohmann::json& j) {
  ALPHA_CHECK(j.is_object() && j.contains("kind") && j["kind"].is_string(), ValueError,
              "[tokenizer] JSON has no \"kind\" string");
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "char") {
    ALPHA_CHECK(j.contains("chars") && j["chars"].is_array(), ValueError, "[tokenizer] char tokenizer has no \"chars\"");
    std::vector<uint32_t> cps;
    for (const auto& v : j["chars"]) {
      ALPHA_CHECK(v.is_number_unsigned() && v.get<uint64_t>() <= 0x10ffff, ValueError,
                  "[tokenizer] char tokenizer has an invalid code point");
      cps.push_back(v.get<uint32_t>());
    }
    return std::make_unique<CharTokenizer>(std::move(cps));
  }
  if (kind == "word") return word_tokenizer_from_json(j);
  if (kind == "bpe") return bpe_tokenizer_from_json(j);
  if (kind == "gpt2") return gpt2_tokenizer_from_json(j);
  throw ValueError(fmt::format("[tokenizer] unknown tokenizer kind \"{}\"", kind));
}

}  // namespace alpha
