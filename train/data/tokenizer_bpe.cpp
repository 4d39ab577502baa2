// Byte-pair encoding: the merge loop shared with gpt2, and the byte-level bpe tokenizer with its trainer.
#include <algorithm>
#include <climits>
#include <queue>

#include "core/error.h"
#include "core/parallel.h"
#include "data/tokenizer.h"
#include "data/tokenizer_detail.h"
#include "data/unicode.h"

namespace alpha {

namespace {
uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
}  // namespace

BytePairCore::BytePairCore(std::vector<std::string> tokens, const std::array<int32_t, 256>& byte_ids)
    : tokens_(std::move(tokens)), byte_ids_(byte_ids) {}

void BytePairCore::add_pair(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  pairs_[pair_key(left, right)] = Merge{rank, merged};
}

void BytePairCore::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> w(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) w[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  while (w.size() > 1) {
    // Lowest rank wins; on equal ranks (only gpt2's "left,right" look-alikes) the later pair, like the reference.
    int32_t best_rank = INT_MAX, left = -1, right = -1, merged = -1;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = pairs_.find(pair_key(w[i], w[i + 1]));
      if (it != pairs_.end() && it->second.rank <= best_rank) {
        best_rank = it->second.rank;
        left = w[i];
        right = w[i + 1];
        merged = it->second.merged;
      }
    }
    if (merged < 0) break;
    size_t o = 0;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == left && w[i + 1] == right) {
        w[o++] = merged;
        i += 2;
      } else {
        w[o++] = w[i++];
      }
    }
    w.resize(o);
  }
  out.insert(out.end(), w.begin(), w.end());
}

std::vector<int32_t> BytePairCore::encode_serial(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  // Per-call cache of piece -> ids (views into `text`), so encode stays const and thread-safe.
  std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
  std::vector<int32_t> arena;
  gpt2_pretokenize(text, [&](size_t b, size_t e) {
    if (e - b == 1) {
      ids.push_back(byte_ids_[static_cast<unsigned char>(text[b])]);
      return;
    }
    const std::string_view piece = text.substr(b, e - b);
    auto [it, fresh] = cache.try_emplace(piece, 0u, 0u);
    if (fresh) {
      const size_t start = arena.size();
      encode_piece(piece, arena);
      it->second = {static_cast<uint32_t>(start), static_cast<uint32_t>(arena.size() - start)};
    }
    ids.insert(ids.end(), arena.begin() + it->second.first, arena.begin() + it->second.first + it->second.second);
  });
  return ids;
}

std::vector<int32_t> BytePairCore::encode(std::string_view text) const {
  // Large texts are cut into chunks encoded in parallel. A cut right after "X\n" before "Y" (X, Y ASCII non-space)
  // is a piece boundary of the whole-text split ("\n" is then a piece of its own), so the ids never change.
  constexpr size_t kChunk = 1 << 18;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  auto solid = [&](size_t i) { return p[i] < 0x80 && cp_class(p[i]) != CpClass::space; };
  std::vector<size_t> cuts{0};
  for (size_t k = kChunk; k + 1 < text.size(); ++k) {
    if (k - cuts.back() >= kChunk && k >= 2 && p[k - 1] == '\n' && solid(k - 2) && solid(k)) cuts.push_back(k);
  }
  cuts.push_back(text.size());
  if (cuts.size() == 2) return encode_serial(text);
  std::vector<std::vector<int32_t>> parts(cuts.size() - 1);
  parallel_for(static_cast<int64_t>(parts.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const auto i = static_cast<size_t>(c);
      parts[i] = encode_serial(text.substr(cuts[i], cuts[i + 1] - cuts[i]));
    }
  });
  std::vector<int32_t> ids;
  size_t total = 0;
  for (const auto& part : parts) total += part.size();
  ids.reserve(total);
  for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  return ids;
}

std::string BytePairCore::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    ALPHA_CHECK(id >= 0 && id < size(), IndexError, "[tokenizer] token {} out of range for vocab {}", id, size());
    out += tokens_[static_cast<size_t>(id)];
  }
  return out;
}

namespace {

std::array<int32_t, 256> identity_bytes() {
  std::array<int32_t, 256> a{};
  for (int32_t b = 0; b < 256; ++b) a[static_cast<size_t>(b)] = b;
  return a;
}

BytePairCore build_core(const std::vector<std::pair<int32_t, int32_t>>& merges) {
  std::vector<std::string> tokens;
  tokens.reserve(256 + merges.size());
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (size_t k = 0; k < merges.size(); ++k) {
    const auto [a, b] = merges[k];
    const auto n = static_cast<int32_t>(tokens.size());
    ALPHA_CHECK(a >= 0 && a < n && b >= 0 && b < n, ValueError,
                "[tokenizer] bpe merge {} = ({}, {}) refers to a token not defined before it (ids < {})", k, a, b, n);
    tokens.push_back(tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)]);
  }
  BytePairCore core(std::move(tokens), identity_bytes());
  for (size_t k = 0; k < merges.size(); ++k)
    core.add_pair(merges[k].first, merges[k].second, static_cast<int32_t>(k), static_cast<int32_t>(256 + k));
  return core;
}

}  // namespace

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges)
    : merges_(std::move(merges)), core_(build_core(merges_)) {}

BpeTokenizer BpeTokenizer::train(const std::string& text, int64_t vocab_size) {
  ALPHA_CHECK(vocab_size >= 256 && vocab_size < (1LL << 31), ValueError,
              "[tokenizer] bpe vocab_size {} must be at least 256 (one token per byte)", vocab_size);
  // Unique pre-tokenized pieces with counts, in byte order so training never depends on hash order.
  std::unordered_map<std::string_view, int64_t> counts;
  gpt2_pretokenize(text, [&](size_t b, size_t e) { ++counts[std::string_view(text).substr(b, e - b)]; });
  std::vector<std::pair<std::string_view, int64_t>> pieces(counts.begin(), counts.end());
  std::sort(pieces.begin(), pieces.end());
  struct Word {
    std::vector<int32_t> sym;
    int64_t count;
  };
  std::vector<Word> words;
  words.reserve(pieces.size());
  for (const auto& [piece, count] : pieces) {
    Word w{{}, count};
    for (unsigned char c : piece) w.sym.push_back(c);
    if (w.sym.size() > 1) words.push_back(std::move(w));
  }
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair -> words holding it (may repeat, may be stale)
  auto add_word = [&](int32_t wi, int64_t sign, std::vector<uint64_t>* changed) {
    const Word& w = words[static_cast<size_t>(wi)];
    for (size_t i = 0; i + 1 < w.sym.size(); ++i) {
      const uint64_t k = pair_key(w.sym[i], w.sym[i + 1]);
      pair_count[k] += sign * w.count;
      if (sign > 0) {
        auto& v = where[k];
        if (v.empty() || v.back() != wi) v.push_back(wi);
      }
      if (changed) changed->push_back(k);
    }
  };
  for (size_t wi = 0; wi < words.size(); ++wi) add_word(static_cast<int32_t>(wi), 1, nullptr);
  // Max-heap on (count, then smallest pair); entries whose count is out of date are skipped when popped.
  using Entry = std::pair<int64_t, uint64_t>;
  auto cmp = [](const Entry& x, const Entry& y) { return x.first != y.first ? x.first < y.first : x.second > y.second; };
  std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)> heap(cmp);
  for (const auto& [k, c] : pair_count) heap.push({c, k});
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<int32_t> stamp(words.size(), -1);
  std::vector<uint64_t> changed;
  while (static_cast<int64_t>(256 + merges.size()) < vocab_size && !heap.empty()) {
    const auto [count, key] = heap.top();
    heap.pop();
    auto pc = pair_count.find(key);
    if (pc == pair_count.end() || pc->second != count) continue;
    if (count < 2) break;
    const auto a = static_cast<int32_t>(key >> 32), b = static_cast<int32_t>(key & 0xffffffffu);
    const auto merged = static_cast<int32_t>(256 + merges.size());
    merges.emplace_back(a, b);
    std::vector<int32_t> holders = std::move(where[key]);
    where.erase(key);
    changed.clear();
    for (int32_t wi : holders) {
      if (stamp[static_cast<size_t>(wi)] == merged) continue;
      stamp[static_cast<size_t>(wi)] = merged;
      add_word(wi, -1, &changed);
      std::vector<int32_t>& s = words[static_cast<size_t>(wi)].sym;
      size_t o = 0;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          s[o++] = merged;
          i += 2;
        } else {
          s[o++] = s[i++];
        }
      }
      s.resize(o);
      add_word(wi, 1, &changed);
    }
    std::sort(changed.begin(), changed.end());
    changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
    for (uint64_t k : changed) {
      auto it = pair_count.find(k);
      if (it->second == 0) pair_count.erase(it);
      else heap.push({it->second, k});
    }
  }
  return BpeTokenizer(std::move(merges));
}

nlohmann::json BpeTokenizer::to_json() const {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges_) m.push_back({a, b});
  return {{"kind", "bpe"}, {"pretokenizer", "gpt2"}, {"merges", std::move(m)}};
}

std::unique_ptr<Tokenizer> bpe_tokenizer_from_json(const nlohmann::json& j) {
  ALPHA_CHECK(j.contains("merges") && j["merges"].is_array(), ValueError,
              "[tokenizer] bpe tokenizer has no \"merges\" array");
  ALPHA_CHECK(!j.contains("pretokenizer") || j["pretokenizer"] == "gpt2", ValueError,
              "[tokenizer] bpe pretokenizer {} is not supported (expected \"gpt2\")", j.value("pretokenizer", nlohmann::json()).dump());
  std::vector<std::pair<int32_t, int32_t>> merges;
  for (const auto& m : j["merges"]) {
    ALPHA_CHECK(m.is_array() && m.size() == 2 && m[0].is_number_integer() && m[1].is_number_integer(), ValueError,
                "[tokenizer] bpe merge {} is not a pair of token ids: {}", merges.size(), m.dump());
    const auto a = m[0].get<int64_t>(), b = m[1].get<int64_t>();
    ALPHA_CHECK(a >= 0 && b >= 0 && a < INT_MAX && b < INT_MAX, ValueError,
                "[tokenizer] bpe merge {} has an invalid token id: {}", merges.size(), m.dump());
    merges.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
  }
  return std::make_unique<BpeTokenizer>(std::move(merges));
}

}  // namespace alpha
