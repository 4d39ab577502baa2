// Word tokenizer: words, whitespace runs and single punctuation characters, most frequent first, <unk> at id 0.
#include <algorithm>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/tokenizer_detail.h"
#include "data/unicode.h"

namespace alpha {

namespace {

// Calls emit(begin, end) for each word piece of s (see WordTokenizer in tokenizer.h).
template <class Emit>
void word_pieces(std::string_view s, Emit&& emit) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  auto kind = [](const CpInfo& c) {
    if (c.cls == CpClass::letter || c.cls == CpClass::number || c.cls == CpClass::mark || c.cp == '_') return 1;
    return c.cls == CpClass::space ? 2 : 0;
  };
  size_t i = 0;
  while (i < n) {
    const CpInfo c0 = cp_at(p, n, i);
    const int k0 = kind(c0);
    size_t j = i + c0.len;
    if (k0 != 0) {
      while (j < n) {
        const CpInfo c = cp_at(p, n, j);
        if (kind(c) != k0) break;
        j += c.len;
      }
    }
    emit(i, j);
    i = j;
  }
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const CpInfo c = cp_at(p, s.size(), i);
    if (c.cp == 0xfffd && c.len == 1) return false;  // U+FFFD itself is 3 bytes; len 1 marks an invalid byte
    i += c.len;
  }
  return true;
}

nlohmann::json bytes_to_json(const std::string& s) {
  if (is_valid_utf8(s)) return s;
  nlohmann::json a = nlohmann::json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

std::string bytes_from_json(const nlohmann::json& j, const char* what) {
  if (j.is_string()) return j.get<std::string>();
  ALPHA_CHECK(j.is_array(), ValueError, "[tokenizer] {} must be a string or an array of bytes, got {}", what,
              j.type_name());
  std::string out;
  for (const auto& b : j) {
    ALPHA_CHECK(b.is_number_unsigned() && b.get<uint64_t>() < 256, ValueError,
                "[tokenizer] {} has a byte value that is not in 0..255: {}", what, b.dump());
    out += static_cast<char>(b.get<uint64_t>());
  }
  return out;
}

WordTokenizer WordTokenizer::train(const std::string& text, int64_t max_vocab) {
  ALPHA_CHECK(max_vocab >= 2, ValueError, "[tokenizer] word vocabulary cap {} must be at least 2 (<unk> + one word)",
              max_vocab);
  std::unordered_map<std::string_view, int64_t> counts;
  word_pieces(text, [&](size_t b, size_t e) { ++counts[std::string_view(text).substr(b, e - b)]; });
  std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  std::vector<std::string> vocab{kUnk};
  for (size_t i = 0; i < sorted.size() && static_cast<int64_t>(vocab.size()) < max_vocab; ++i)
    vocab.emplace_back(sorted[i].first);
  return WordTokenizer(std::move(vocab));
}

WordTokenizer::WordTokenizer(std::vector<std::string> vocab) : vocab_(std::move(vocab)) {
  ALPHA_CHECK(!vocab_.empty() && vocab_[0] == kUnk, ValueError, "[tokenizer] word vocabulary must start with \"{}\"",
              kUnk);
  ALPHA_CHECK(vocab_.size() < (1u << 31), ValueError, "[tokenizer] word vocabulary of {} is too large", vocab_.size());
  for (size_t i = 1; i < vocab_.size(); ++i) {
    ALPHA_CHECK(!vocab_[i].empty(), ValueError, "[tokenizer] word vocabulary entry {} is empty", i);
    const bool fresh = index_.emplace(vocab_[i], static_cast<int32_t>(i)).second;
    ALPHA_CHECK(fresh, ValueError, "[tokenizer] word vocabulary has \"{}\" twice", vocab_[i]);
  }
}

std::vector<int32_t> WordTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  word_pieces(text, [&](size_t b, size_t e) {
    auto it = index_.find(std::string_view(text).substr(b, e - b));
    ids.push_back(it == index_.end() ? 0 : it->second);
  });
  return ids;
}

std::string WordTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    ALPHA_CHECK(id >= 0 && id < vocab_size(), IndexError, "[tokenizer] token {} out of range for vocab {}", id,
                vocab_size());
    out += vocab_[static_cast<size_t>(id)];
  }
  return out;
}

nlohmann::json WordTokenizer::to_json() const {
  nlohmann::json v = nlohmann::json::array();
  for (const std::string& w : vocab_) v.push_back(bytes_to_json(w));
  return {{"kind", "word"}, {"vocab", std::move(v)}};
}

std::unique_ptr<Tokenizer> word_tokenizer_from_json(const nlohmann::json& j) {
  ALPHA_CHECK(j.contains("vocab") && j["vocab"].is_array(), ValueError, "[tokenizer] word tokenizer has no \"vocab\" array");
  std::vector<std::string> vocab;
  for (const auto& w : j["vocab"]) vocab.push_back(bytes_from_json(w, "word vocabulary entry"));
  return std::make_unique<WordTokenizer>(std::move(vocab));
}

}  // namespace alpha
