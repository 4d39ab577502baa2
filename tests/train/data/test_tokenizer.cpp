// Tokenizers: word, byte-level bpe and GPT-2 (exact match with the gpt-3-encoder fixture), JSON round trips and
// clear errors on malformed tokenizer files. Expected ids of the small GPT-2 cases come from gpt-3-encoder.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "data/tokenizer.h"
#include "data/unicode.h"

using namespace alpha;
namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

namespace {

const std::string kGpt2Dir = std::string(ALPHA_FIXTURES_DIR) + "/gpt2";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Gpt2Tokenizer& gpt2() {
  static const Gpt2Tokenizer tok = Gpt2Tokenizer::load(kGpt2Dir);
  return tok;
}

std::vector<std::string> pieces(const std::string& s) {
  std::vector<std::string> out;
  gpt2_pretokenize(s, [&](size_t b, size_t e) { out.push_back(s.substr(b, e - b)); });
  return out;
}

// Unicode, whitespace runs, a lone continuation byte, a truncated sequence and every byte value.
std::string binaryish() {
  std::string s = "héllo wörld — ✓ 日本語 👩‍💻\t\t\n\n  x \xff\x80 \xe2\x82 end";
  for (int b = 0; b < 256; ++b) s += static_cast<char>(b);
  return s;
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "<no ValueError>";
}

struct TempFile {
  std::string path;
  TempFile(const std::string& name, const std::string& content)
      : path((fs::temp_directory_path() / ("alpha_tok_" + std::to_string(::getpid()) + "_" + name)).string()) {
    std::ofstream(path, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("GPT-2 pre-tokenizer splits like the reference regex") {
  // Expected pieces printed by "text".matchAll(pat) in Node with Encoder.js's pattern.
  CHECK(pieces("Hello world's  end\n\n") == std::vector<std::string>{"Hello", " world", "'s", " ", " end", "\n\n"});
  CHECK(pieces("a\u00a0 b\t\t1\u00bdx") == std::vector<std::string>{"a", "\u00a0", " b", "\t", "\t", "1\u00bd", "x"});
  CHECK(pieces("e\u0301t\u00e9 ''ll  \n x") ==
        std::vector<std::string>{"e", "\u0301", "t\u00e9", " ''", "ll", "  \n", " x"});
  CHECK(pieces("\u3000\u3000\u65e5\u672c\u8a9e ") == std::vector<std::string>{"\u3000", "\u3000", "\u65e5\u672c\u8a9e", " "});
  CHECK(cp_class(0x1d7d8) == CpClass::number);  // astral table: MATHEMATICAL DOUBLE-STRUCK DIGIT ZERO
  CHECK(cp_class(0x20000) == CpClass::letter);  // CJK Extension B
  CHECK(cp_class(0x0085) == CpClass::other);    // NEL is not JS whitespace
}

TEST_CASE("GPT-2 encodes small cases like gpt-3-encoder") {
  const Gpt2Tokenizer& tok = gpt2();
  CHECK(tok.vocab_size() == 50257);
  CHECK(tok.encode("Hello world") == Ids{15496, 995});
  CHECK(tok.encode("Hello world's  end\n\n") == Ids{15496, 995, 338, 220, 886, 628});
  CHECK(tok.encode(" 123 4567!!?") == Ids{17031, 4153, 3134, 3228, 30});
  CHECK(tok.encode("\u3000\u3000\u65e5\u672c\u8a9e ") == Ids{5099, 222, 5099, 222, 33768, 98, 17312, 105, 45739, 252, 220});
  // Strings with look-alike "left,right" merge keys in Encoder.js (ids from the reference).
  CHECK(tok.encode("\"],\"") == Ids{34171});
  CHECK(tok.encode("x\",\",\"y") == Ids{87, 2430, 553, 88});
  CHECK(tok.decode({15496, 995}) == "Hello world");
  CHECK_THROWS_AS(tok.decode({50257}), IndexError);
}

TEST_CASE("GPT-2 matches the gpt-3-encoder fixture token for token and decodes back exactly") {
  const std::string text = read_all(kGpt2Dir + "/fixture.txt");
  const std::string raw = read_all(kGpt2Dir + "/fixture.tokens");
  REQUIRE(text.size() >= (1u << 20));
  REQUIRE(raw.size() % 2 == 0);
  Ids expected(raw.size() / 2);
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<unsigned char>(raw[2 * i]) | (static_cast<unsigned char>(raw[2 * i + 1]) << 8);
  const Ids got = gpt2().encode(text);
  CHECK(got.size() == expected.size());
  size_t first_diff = 0;
  while (first_diff < std::min(got.size(), expected.size()) && got[first_diff] == expected[first_diff]) ++first_diff;
  INFO("first differing token index: " << first_diff);
  CHECK(got == expected);
  CHECK(gpt2().decode(expected) == text);
}

TEST_CASE("GPT-2 keeps invalid UTF-8 bytes and survives a JSON round trip") {
  const std::string s = binaryish();
  CHECK(gpt2().decode(gpt2().encode(s)) == s);
  const auto back = tokenizer_from_json(nlohmann::json::parse(gpt2().to_json().dump()));
  CHECK(back->kind() == "gpt2");
  CHECK(back->encode(s) == gpt2().encode(s));
  const auto made = train_tokenizer("gpt2", "ignored", TokenizerOptions{0, kGpt2Dir});
  CHECK(made->encode("Hello world") == Ids{15496, 995});
  CHECK(error_of([] { train_tokenizer("gpt2", "x"); }).find("encoder.json") != std::string::npos);
}

TEST_CASE("word tokenizer splits words, whitespace runs and punctuation") {
  const std::string text = "Hello, world!  Hello\n";
  const WordTokenizer tok = WordTokenizer::train(text);
  const Ids ids = tok.encode(text);
  std::vector<std::string> got;
  for (int32_t id : ids) got.push_back(tok.decode({id}));
  CHECK(got == std::vector<std::string>{"Hello", ",", " ", "world", "!", "  ", "Hello", "\n"});
  CHECK(tok.vocab_size() == 1 + 7);  // <unk> + 7 distinct pieces
  CHECK(tok.decode({0}) == "<unk>");
  CHECK(ids[0] == 1);  // "Hello" is the most frequent piece
  const std::string uni = "naïve café e\u0301t\u00e9 snake_case x2 日本語。";
  const WordTokenizer u = WordTokenizer::train(uni);
  CHECK(u.encode(uni).size() == 12);  // words keep marks, '_' and digits; "。" stands alone
}

TEST_CASE("word tokenizer maps unknown pieces to <unk> and caps its vocabulary") {
  const WordTokenizer tok = WordTokenizer::train("a a a b b c", 3);  // <unk>, then " " (5x) and "a" (3x)
  CHECK(tok.vocab_size() == 3);
  CHECK(tok.encode("a b zebra") == Ids{2, 1, 0, 1, 0});
  CHECK(tok.decode(tok.encode("a b")) == "a <unk>");
  CHECK_THROWS_AS(WordTokenizer::train("a", 1), ValueError);
  CHECK_THROWS_AS(tok.decode({3}), IndexError);
}

TEST_CASE("word tokenizer round-trips Unicode and invalid bytes, also through JSON") {
  const std::string s = binaryish();
  const WordTokenizer tok = WordTokenizer::train(s, 1 << 20);
  CHECK(tok.decode(tok.encode(s)) == s);
  const std::string dumped = tok.to_json().dump();  // must not throw on invalid UTF-8 tokens
  const auto back = tokenizer_from_json(nlohmann::json::parse(dumped));
  CHECK(back->kind() == "word");
  CHECK(back->encode(s) == tok.encode(s));
  CHECK(back->decode(back->encode(s)) == s);
}

TEST_CASE("bpe training merges the most frequent pair first and is deterministic") {
  const std::string text = "abababab xyz";
  const BpeTokenizer tok = BpeTokenizer::train(text, 260);
  REQUIRE(tok.merges().size() >= 2);
  CHECK(tok.merges()[0] == std::pair<int32_t, int32_t>{'a', 'b'});  // "ab" x4 beats "ba" x3
  CHECK(tok.merges()[1] == std::pair<int32_t, int32_t>{256, 256});  // then "ab ab" (3 adjacent)
  CHECK(tok.encode("abababab") == Ids{257, 257});
  const std::string corpus = read_all(kGpt2Dir + "/fixture.txt").substr(0, 200000);
  const BpeTokenizer a = BpeTokenizer::train(corpus, 600), b = BpeTokenizer::train(corpus, 600);
  CHECK(a.merges() == b.merges());
  CHECK(a.vocab_size() == 600);
  const Ids ids = a.encode(corpus);
  CHECK(ids.size() < corpus.size() * 3 / 4);  // merges shorten the byte sequence
  CHECK(a.decode(ids) == corpus);
  const std::string small = "aaa";  // no pair occurs twice after one merge: training stops early
  CHECK(BpeTokenizer::train(small, 1000).vocab_size() < 1000);
  CHECK_THROWS_AS(BpeTokenizer::train(corpus, 100), ValueError);
}

TEST_CASE("bpe round-trips arbitrary bytes and survives a JSON round trip") {
  const std::string s = binaryish();
  const BpeTokenizer tok = BpeTokenizer::train(s + s + "hello hello hello", 300);
  CHECK(tok.decode(tok.encode(s)) == s);
  const auto back = tokenizer_from_json(nlohmann::json::parse(tok.to_json().dump()));
  CHECK(back->kind() == "bpe");
  CHECK(back->vocab_size() == tok.vocab_size());
  CHECK(back->encode(s) == tok.encode(s));
  const auto made = train_tokenizer("bpe", s);
  CHECK(made->vocab_size() <= BpeTokenizer::kDefaultVocabSize);
  CHECK(made->decode(made->encode(s)) == s);
  CHECK(train_tokenizer("word", s)->decode(train_tokenizer("word", s)->encode(s)) == s);
  CHECK(train_tokenizer("char", "héllo ✓")->decode(train_tokenizer("char", "héllo ✓")->encode("héllo ✓")) == "héllo ✓");
  CHECK_THROWS_AS(train_tokenizer("sentencepiece", s), ValueError);
}

TEST_CASE("malformed tokenizer JSON gives clear errors") {
  using nlohmann::json;
  CHECK(error_of([] { tokenizer_from_json(json::array()); }).find("\"kind\"") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "nope"}}); }).find("unknown tokenizer kind") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "word"}}); }).find("\"vocab\"") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "word"}, {"vocab", json::array({"a"})}}); }).find("<unk>") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "word"}, {"vocab", json::array({"<unk>", "a", "a"})}}); }).find("twice") !=
        std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "word"}, {"vocab", json::array({json("<unk>"), json::array({300})})}}); })
            .find("0..255") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "bpe"}}); }).find("\"merges\"") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "bpe"}, {"merges", json::array({json::array({97, 300})})}}); }).find("not defined before") !=
        std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "bpe"}, {"merges", json::array({json::array({97})})}}); }).find("pair") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "bpe"}, {"merges", json::array({json::array({-1, 2})})}}); }).find("invalid token id") !=
        std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "gpt2"}, {"merges", json::array()}}); }).find("\"encoder\"") !=
        std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "gpt2"}, {"encoder", json::object({{"a", "x"}})}, {"merges", json::array()}}); })
            .find("expected an integer") != std::string::npos);
  CHECK(error_of([] { tokenizer_from_json({{"kind", "gpt2"}, {"encoder", json::object({{"a", 0}})}, {"merges", json::array()}}); })
            .find("no token for byte") != std::string::npos);
}

TEST_CASE("malformed GPT-2 encoder files give clear errors") {
  const std::string vocab = kGpt2Dir + "/vocab.bpe", encoder = kGpt2Dir + "/encoder.json";
  CHECK(error_of([] { Gpt2Tokenizer::load("/nonexistent/dir"); }).find("cannot open") != std::string::npos);
  const TempFile not_json("enc.json", "{\"a\": 0,");
  CHECK(error_of([&] { Gpt2Tokenizer::load_files(not_json.path, vocab); }).find("not valid JSON") != std::string::npos);
  const TempFile dup("dup.json", "{\"a\": 0, \"b\": 0}");
  CHECK(error_of([&] { Gpt2Tokenizer::load_files(dup.path, vocab); }).find("used by two tokens") != std::string::npos);
  const TempFile no_header("nohdr.bpe", "a b\n");
  CHECK(error_of([&] { Gpt2Tokenizer::load_files(encoder, no_header.path); }).find("#version") != std::string::npos);
  const TempFile three("three.bpe", "#version: 0.2\na b c\n");
  CHECK(error_of([&] { Gpt2Tokenizer::load_files(encoder, three.path); }).find("not two tokens") != std::string::npos);
  const TempFile unknown("unknown.bpe", "#version: 0.2\n\xc4\xa0 zzzzzzzzzzzzqq\n");
  CHECK(error_of([&] { Gpt2Tokenizer::load_files(encoder, unknown.path); }).find("not in the encoder") !=
        std::string::npos);
  const TempFile empty("empty.bpe", "#version: 0.2\n");  // no merges: every byte is its own token
  CHECK(Gpt2Tokenizer::load_files(encoder, empty.path).encode("ab") == Ids{64, 65});
}
