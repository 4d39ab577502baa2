// Token files (docs/data-format.md): writer/reader round trip, every malformed-file error, nanoGPT raw and llm.c
// shard readers, and `alpha prepare` -> `alpha train` -> `alpha sample` for each tokenizer.
#include <doctest/doctest.h>

#include <cstring>

#include "tests/test_util.h"
#include "data/data.h"
#include "data/token_file.h"

using namespace alpha;
using namespace alpha::test;

namespace {

template <typename T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// An Alpha token file built byte by byte here (independent of the writer).
std::string alpha_bytes(uint32_t version, uint32_t elem, uint64_t vocab, uint64_t count, const std::vector<uint32_t>& ids) {
  std::string s(kTokenFileMagic, 8);
  put(s, version);
  put(s, elem);
  put(s, vocab);
  put(s, count);
  for (uint32_t t : ids) elem == 2 ? put(s, static_cast<uint16_t>(t)) : put(s, t);
  return s;
}

std::string open_error(const fs::path& p, int64_t vocab, int64_t min_tokens) {
  try {
    TokenFile::open(p.string(), vocab, min_tokens);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("token file: writer and reader round trip, uint16 and uint32") {
  TempDir d;
  for (int64_t vocab : {int64_t{65}, int64_t{65536}, int64_t{70000}}) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 50; ++i) ids.push_back(static_cast<int32_t>((i * 7919) % vocab));
    ids.push_back(static_cast<int32_t>(vocab - 1));
    const fs::path p = d.path / "t.bin";
    write_token_file(p.string(), ids, vocab);
    const int elem = vocab <= 65536 ? 2 : 4;
    CHECK(fs::file_size(p) == static_cast<uintmax_t>(32 + elem * static_cast<int64_t>(ids.size())));
    std::vector<uint32_t> u(ids.begin(), ids.end());
    CHECK(read_file(p) == alpha_bytes(1, static_cast<uint32_t>(elem), static_cast<uint64_t>(vocab), ids.size(), u));
    auto f = TokenFile::open(p.string(), 0, 9);
    CHECK(f->kind() == TokenFileKind::alpha);
    CHECK(f->vocab_size() == vocab);
    REQUIRE(f->size() == static_cast<int64_t>(ids.size()));
    std::vector<int32_t> back(ids.size());
    f->copy(0, f->size(), back.data());
    CHECK(back == ids);
  }
}

TEST_CASE("token file: writer refuses ids outside the vocabulary") {
  TempDir d;
  CHECK_THROWS_WITH_AS(write_token_file((d.path / "t.bin").string(), {1, 2, 10}, 10),
                       doctest::Contains("token id 10 at position 2 is outside vocab size 10"), DataError);
}

TEST_CASE("token file: every malformed file is a DataError naming the problem") {
  TempDir d;
  const fs::path p = d.path / "bad.bin";
  std::vector<uint32_t> ten = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  write_file(p, "");
  CHECK(open_error(p, 100, 5).find("is empty") != std::string::npos);
  write_file(p, alpha_bytes(1, 2, 100, 10, ten));
  CHECK(open_error(p, 100, 5) == "");
  CHECK(open_error(p, 100, 11).find("has 10 tokens, shorter than block_size + 1 = 11") != std::string::npos);
  std::vector<uint32_t> big = ten;
  big[4] = 100;
  write_file(p, alpha_bytes(1, 2, 100, 10, big));
  CHECK(open_error(p, 0, 5).find("token id 100 at position 4 is >= vocab size 100") != std::string::npos);
  write_file(p, alpha_bytes(1, 2, 100, 12, ten));
  CHECK(open_error(p, 0, 5).find("header/size mismatch: header says 12 tokens, the file holds 10") != std::string::npos);
  write_file(p, alpha_bytes(1, 2, 100, 10, ten) + "x");
  CHECK(open_error(p, 0, 5).find("odd byte count") != std::string::npos);
  write_file(p, alpha_bytes(2, 2, 100, 10, ten));
  CHECK(open_error(p, 0, 5).find("unsupported token file version 2") != std::string::npos);
  write_file(p, alpha_bytes(1, 4, 100, 10, ten));
  CHECK(open_error(p, 0, 5).find("header dtype is 4 bytes but vocab size 100 needs 2") != std::string::npos);
  write_file(p, alpha_bytes(1, 2, 100, 10, ten).substr(0, 20));
  CHECK(open_error(p, 0, 5).find("shorter than the 32-byte header") != std::string::npos);
  write_file(p, alpha_bytes(1, 2, 100, 10, ten));
  CHECK(open_error(p, 50, 5).find("file vocab size 100 is larger than the model's 50") != std::string::npos);
  CHECK(open_error(d.path / "missing.bin", 0, 5).find("cannot open") != std::string::npos);
}

TEST_CASE("token file: nanoGPT raw uint16 .bin needs a vocabulary and is bounds-checked") {
  TempDir d;
  const fs::path p = d.path / "train.bin";
  std::string raw;
  for (uint16_t t : {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 50256}) put(raw, t);
  write_file(p, raw);
  CHECK(open_error(p, 0, 5).find("has no vocabulary in it") != std::string::npos);
  auto f = TokenFile::open(p.string(), 50257, 5);
  CHECK(f->kind() == TokenFileKind::nanogpt);
  REQUIRE(f->size() == 11);
  CHECK(f->at(0) == 3);
  CHECK(f->at(5) == 9);
  CHECK(f->at(10) == 50256);
  CHECK(open_error(p, 50000, 5).find("token id 50256 at position 10 is >= vocab size 50000") != std::string::npos);
  write_file(p, raw + "z");
  CHECK(open_error(p, 50257, 5).find("odd byte count") != std::string::npos);
}

TEST_CASE("token file: llm.c shards (256 x int32 header, uint16 tokens)") {
  TempDir d;
  const fs::path p = d.path / "shard.bin";
  auto shard = [](int32_t version, int32_t count, const std::vector<uint16_t>& ids) {
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = version;
    header[2] = count;
    std::string s(reinterpret_cast<const char*>(header.data()), 1024);
    for (uint16_t t : ids) put(s, t);
    return s;
  };
  const std::vector<uint16_t> ids = {10, 20, 30, 40, 50, 60, 70, 80};
  write_file(p, shard(1, 8, ids));
  auto f = TokenFile::open(p.string(), 100, 4);
  CHECK(f->kind() == TokenFileKind::llmc);
  REQUIRE(f->size() == 8);
  std::vector<int32_t> back(8);
  f->copy(0, 8, back.data());
  CHECK(back == std::vector<int32_t>(ids.begin(), ids.end()));
  write_file(p, shard(1, 9, ids));
  CHECK(open_error(p, 100, 4).find("header/size mismatch: header says 9 tokens, the file holds 8") != std::string::npos);
  write_file(p, shard(2, 8, ids));
  CHECK(open_error(p, 100, 4).find("unsupported llm.c shard version 2") != std::string::npos);
  write_file(p, shard(1, 8, ids).substr(0, 500));
  CHECK(open_error(p, 100, 4).find("shorter than llm.c's 1024-byte header") != std::string::npos);
  write_file(p, shard(1, 8, ids));
  CHECK(open_error(p, 60, 4).find("token id 60 at position 5 is >= vocab size 60") != std::string::npos);
}

TEST_CASE("token data: batches from a mapped file equal nanoGPT's get_batch on the same ids") {
  TempDir d;
  std::vector<int32_t> ids;
  for (int i = 0; i < 200; ++i) ids.push_back((i * 13) % 40);
  write_file(d.path / "tokenizer.json", CharTokenizer::train(std::string(40, 'a') + "bcdefghijklmnopqrstuvwxyz0123456789ABCD")
                                            .to_json()
                                            .dump());
  write_token_file((d.path / "all.bin").string(), ids, 40);
  TextData data = TextData::load_tokens((d.path / "all.bin").string(), 0.25, 8, 0, "char");
  REQUIRE(data.split_size(false) == 150);
  REQUIRE(data.split_size(true) == 50);
  CHECK(data.token(true, 0) == ids[150]);
  Rng r1(5), r2(5);
  auto [x, y] = data.batch(true, 3, 8, r1);
  for (int b = 0; b < 3; ++b) {
    const auto i = static_cast<int64_t>(r2.below(50 - 8));
    for (int t = 0; t < 8; ++t) {
      CHECK(x.data<int32_t>()[b * 8 + t] == ids[static_cast<size_t>(150 + i + t)]);
      CHECK(y.data<int32_t>()[b * 8 + t] == ids[static_cast<size_t>(150 + i + t + 1)]);
    }
  }
}

TEST_CASE("alpha train: a bad token file exits 3 before training starts") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  fs::create_directories(d.path / "tok");
  write_file(d.path / "tok" / "tokenizer.json", CharTokenizer::train("abc").to_json().dump());
  write_token_file((d.path / "tok" / "train.bin").string(), {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}, 3);
  write_file(d.path / "tok" / "val.bin", "");
  std::string err;
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.path=" + (d.path / "tok").string()}, &err) == 3);
  CHECK(err.find("val.bin\" is empty") != std::string::npos);
  CHECK(!fs::exists(d.path / "run" / "metrics.jsonl"));
}

TEST_CASE("alpha prepare -> train (3 steps) -> sample, for every tokenizer") {
  const std::string gpt2_dir = std::string(ALPHA_FIXTURES_DIR) + "/gpt2";
  for (std::string kind : {"char", "word", "bpe", "gpt2"}) {
    CAPTURE(kind);
    TempDir d;
    const std::string cfg = tiny_config(d.path);
    const fs::path tok = d.path / "tok";
    std::vector<std::string> args = {"prepare", "--quiet", "--tokenizer", kind};
    if (kind == "bpe") args.insert(args.end(), {"--vocab-size", "300"});
    if (kind == "gpt2") args.insert(args.end(), {"--tokenizer-path", gpt2_dir});
    args.insert(args.end(), {(d.path / "data.txt").string(), tok.string()});
    std::string err;
    REQUIRE_MESSAGE(cli(args, &err) == 0, err);
    const auto tj = nlohmann::json::parse(read_file(tok / "tokenizer.json"));
    auto tokenizer = tokenizer_from_json(tj);
    CHECK(tokenizer->kind() == kind);
    // The two files hold exactly the text's ids, split at the tail 10%.
    const std::vector<int32_t> ids = tokenizer->encode(corpus());
    auto tr = TokenFile::open((tok / "train.bin").string(), 0, 1), va = TokenFile::open((tok / "val.bin").string(), 0, 1);
    REQUIRE(tr->size() + va->size() == static_cast<int64_t>(ids.size()));
    CHECK(tr->size() == static_cast<int64_t>(static_cast<double>(ids.size()) * 0.9));
    std::vector<int32_t> back(ids.size());
    tr->copy(0, tr->size(), back.data());
    va->copy(0, va->size(), back.data() + tr->size());
    CHECK(back == ids);

    std::vector<std::string> targs = {"train", cfg, "--quiet", "--set", "data.path=" + tok.string(), "--set",
                                      "train.max_steps=3", "--set", "train.eval_interval=3", "--set", "data.tokenizer=" + kind};
    if (kind == "gpt2") targs.insert(targs.end(), {"--set", "data.tokenizer_path=" + gpt2_dir});
    REQUIRE_MESSAGE(cli(targs, &err) == 0, err);
    const auto recs = read_jsonl(d.path / "run" / "metrics.jsonl");
    int steps = 0;
    for (const auto& r : recs) steps += r["type"] == "step";
    CHECK(steps == 3);
    CHECK(fs::exists(d.path / "run" / "ckpt-00000003.alph"));
    REQUIRE_MESSAGE(cli({"sample", (d.path / "run").string(), "--max-new-tokens", "5", "--seed", "1"}, &err) == 0, err);
  }
}

TEST_CASE("alpha prepare CONFIG uses the data.* keys; bad usage exits 2, bad input 3") {
  TempDir d;
  write_file(d.path / "data.txt", corpus());
  const std::string cfg = (d.path / "cfg.json").string();
  write_file(cfg, R"({"data": {"path": ")" + (d.path / "data.txt").string() + R"(", "tokenizer": "word", "val_fraction": 0.2}})");
  std::string err;
  REQUIRE_MESSAGE(cli({"prepare", "--quiet", cfg}, &err) == 0, err);
  const fs::path out = d.path / "data.tokens";
  auto tok = tokenizer_from_json(nlohmann::json::parse(read_file(out / "tokenizer.json")));
  CHECK(tok->kind() == "word");
  const auto n = static_cast<int64_t>(tok->encode(corpus()).size());
  CHECK(TokenFile::open((out / "val.bin").string(), 0, 1)->size() == n - static_cast<int64_t>(static_cast<double>(n) * 0.8));
  CHECK(cli({"prepare", (d.path / "data.txt").string(), (d.path / "o").string()}, &err) == 2);
  CHECK(err.find("prepare needs --tokenizer") != std::string::npos);
  write_file(d.path / "empty.txt", "");
  CHECK(cli({"prepare", "--tokenizer", "char", (d.path / "empty.txt").string(), (d.path / "o").string()}, &err) == 3);
  CHECK(err.find("is empty") != std::string::npos);
}

TEST_CASE("skip advances the stream exactly as that many batches do (data-parallel ranks)") {
  std::string text;
  for (int i = 0; i < 400; ++i) text += static_cast<char>('a' + (i * 7) % 26);
  const TextData d = TextData::from_text(text, "char", 0.1, 8, "test");
  Rng drawn(5), skipped(5);
  for (int i = 0; i < 3; ++i) d.batch(false, 4, 8, drawn);
  d.skip(false, 4, 8, skipped, 3);
  CHECK(drawn.state() == skipped.state());
  // The batch after the skip is the 4th batch of the stream.
  auto [x1, y1] = d.batch(false, 4, 8, drawn);
  auto [x2, y2] = d.batch(false, 4, 8, skipped);
  CHECK(std::memcmp(x1.data<int32_t>(), x2.data<int32_t>(), 4 * 8 * sizeof(int32_t)) == 0);
  d.skip(false, 4, 8, skipped, 0);
  CHECK(drawn.state() == skipped.state());
}
