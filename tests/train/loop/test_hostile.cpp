// Hostile input (issue 9): configs, checkpoints, token files and tokenizer files built to break the readers —
// deep nesting, huge files, duplicate keys, overflowing sizes, NaN — are refused with the documented error
// type and a message naming what is wrong, before any large allocation. Each fuzzer finding is pinned here too.
#include <doctest/doctest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tests/test_util.h"
#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "data/data.h"
#include "config/json_limits.h"
#include "loop/run_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "data/token_file.h"
#include "data/tokenizer.h"

using namespace alpha;
using namespace alpha::test;

namespace {

// The message of the E that f throws; fails the test if it throws nothing or something else.
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return "";
}

std::string config_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of<ConfigError>([&] { load_config_text(text, overrides, "<test>"); });
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An ALPH file whose header is `header_json` (a valid checksum, no tensors): reaches the JSON parser.
std::string alph_with_header(const std::string& header_json) {
  std::string b(kCheckpointPreamble, '\0');
  std::memcpy(b.data(), kCheckpointMagic, 4);
  const uint32_t ver = kCheckpointVersion;
  const uint64_t hlen = header_json.size();
  std::memcpy(b.data() + 4, &ver, 4);
  std::memcpy(b.data() + 8, &hlen, 8);
  b += header_json;
  const uint64_t sum = fnv1a64(b.data(), b.size());
  b.append(reinterpret_cast<const char*>(&sum), 8);
  b.resize((b.size() + kCheckpointAlign - 1) / kCheckpointAlign * kCheckpointAlign, '\0');
  return b;
}

// Runs f in a child process that may map only `mb` MiB more address space than it has at the fork (ASan's
// shadow is already mapped, so the same cap works in the sanitizer build); returns its exit status (or 128 + signal).
template <class F>
int run_with_memory_cap(size_t mb, F&& f) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    size_t pages = 0;
    if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%zu", &pages) != 1) pages = 0;
      std::fclose(statm);
    }
    const rlim_t cap = pages * static_cast<size_t>(sysconf(_SC_PAGESIZE)) + (mb << 20);
    const rlimit lim{cap, cap};
    setrlimit(RLIMIT_AS, &lim);
    _exit(f());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("hostile config: 100000 nested brackets are refused by depth, not by a stack overflow") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK(json_nesting_depth(deep) == 100000);
  CHECK(json_nesting_depth(R"({"a": "[[[[{{{{", "b": [1, {"c": 2}]})") == 3);  // brackets in strings do not count
  std::string msg = config_error(deep);
  CHECK(has(msg, "<test>: JSON nested 100000 levels deep (the limit is 64)"));
  msg = config_error(R"({"model": )" + deep + "}");
  CHECK(has(msg, "levels deep"));
  // Unbalanced (invalid) JSON is refused the same way before the parser sees it.
  CHECK(has(config_error(std::string(100000, '{')), "levels deep"));
  // Through --set: the override value is JSON, so it gets the same limit.
  msg = config_error("{}", {"model.n_layer=" + deep});
  CHECK(has(msg, "override \"model.n_layer\": JSON nested 100000 levels deep"));
  // 64 levels is fine for the parser (and refused for what it is: a wrong type).
  const std::string ok = std::string(63, '[') + std::string(63, ']');
  CHECK(has(config_error(R"({"seed": )" + ok + "}"), R"("seed" must be a non-negative integer)"));
}

TEST_CASE("hostile config: files over 1 MiB and endless files are refused without reading them whole") {
  TempDir d;
  std::string big = R"({"out_dir": ")" + std::string(1 << 20, 'x') + R"("})";
  CHECK(has(config_error(big), "<test>: too large for a config (more than 1048576 bytes)"));
  write_file(d.path / "big.json", big);
  const std::string path = (d.path / "big.json").string();
  CHECK(has(error_of<ConfigError>([&] { load_config(path, {}); }), path + ": too large for a config"));
  // /dev/zero never ends: the reader stops one byte past the limit (the address space cap proves it).
  const int rc = run_with_memory_cap(1024, [] {
    try {
      load_config("/dev/zero", {});
    } catch (const ConfigError& e) {
      return has(e.what(), "too large for a config") ? 2 : 1;
    }
    return 0;
  });
  CHECK(rc == 2);
  // Exactly at the limit is still read (and judged as JSON).
  std::string at_limit = R"({"out_dir": "x"})";
  at_limit += std::string((1 << 20) - at_limit.size(), ' ');
  CHECK(load_config_text(at_limit, {}, "<test>").out_dir == "x");
}

TEST_CASE("hostile config: a 900 kB unknown key is refused quickly (did-you-mean skips hopeless candidates)") {
  const std::string key(900000, 'k');
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(has(config_error(R"({")" + key + R"(": 1})"), "unknown key"));
  CHECK(has(config_error("{}", {"model." + key + "=1"}), "unknown key"));
  // A quadratic edit-distance table per known key took tens of seconds here.
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("hostile config: duplicate keys are refused, naming the key, in files and in --set values") {
  CHECK(has(config_error(R"({"seed": 1, "seed": 2})"), R"(<test>: duplicate key "seed")"));
  CHECK(has(config_error(R"({"optim": {"lr": 0.1, "schedule": "wsd", "lr": 10}})"), R"(duplicate key "optim.lr")"));
  CHECK(has(config_error(R"({"model": {}, "train": {}, "model": {}})"), R"(duplicate key "model")"));
  CHECK(has(config_error("{}", {R"(model={"n_layer": 2, "n_layer": 3})"}), R"(duplicate key "n_layer")"));
  // The same key in different sections is not a duplicate.
  CHECK(load_config_text(R"({"model": {"vocab_size": 100}, "data": {"vocab_size": 300}})", {}, "<t>").data.vocab_size ==
        300);
}

TEST_CASE("hostile config: overflowing sizes are refused naming the keys (n_layer 1e12, products, params)") {
  CHECK(has(config_error(R"({"model": {"n_layer": 1e12}})"), R"("model.n_layer" must be <= 1000, got 1000000000000)"));
  CHECK(has(config_error(R"({"model": {"n_layer": 1e300}})"), R"("model.n_layer" must be <= 1000)"));
  CHECK(has(config_error(R"({"model": {"n_layer": 18446744073709551615}})"), R"("model.n_layer" must be <= 1000)"));
  CHECK(has(config_error(R"({"model": {"n_layer": -9223372036854775808}})"), R"("model.n_layer" must be >= 1)"));
  CHECK(has(config_error(R"({"train": {"batch_size": 1e15}})"), R"("train.batch_size" must be <= 1000000000)"));
  CHECK(has(config_error(R"({"model": {"n_embd": 1e400}})"), "number overflow"));
  // Each value in range, the product B*T*C is not: int64 would have overflowed long before allocation.
  std::string msg = config_error(
      R"({"train": {"batch_size": 1000000000}, "model": {"block_size": 1048576, "n_embd": 65536, "n_head": 1}})");
  CHECK(has(msg, R"("train.batch_size" * "model.block_size" * "model.n_embd")"));
  // vocab * n_embd and layers * n_embd^2: the parameter count, naming every key that feeds it.
  msg = config_error(R"({"model": {"vocab_size": 16777216, "n_embd": 65536, "n_head": 1, "n_layer": 1}})");
  CHECK(has(msg, "model too large"));
  CHECK(has(msg, "model.vocab_size=16777216"));
  msg = config_error(R"({"model": {"n_layer": 1000, "n_embd": 65536, "n_head": 1}})");
  CHECK(has(msg, "model.n_layer=1000"));
}

TEST_CASE("hostile config: NaN, infinite and negative learning rates are refused, also from --set") {
  for (const std::string v : {"nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999"}) {
    CAPTURE(v);
    const std::string msg = config_error("{}", {"optim.lr=" + v});
    CHECK(has(msg, "[config]"));
    CHECK((has(msg, R"("optim.lr" must be a number)") || has(msg, "number overflow")));
  }
  CHECK(has(config_error("{}", {"optim.lr=-0.001"}), R"("optim.lr" must be > 0, got -0.001)"));
  CHECK(has(config_error("{}", {"optim.lr=0"}), R"("optim.lr" must be > 0, got 0)"));
  CHECK(has(config_error("{}", {"optim.min_lr=-1e-9"}), R"("optim.min_lr" must be >= 0)"));
  CHECK(has(config_error(R"({"optim": {"lr": -1e308}})"), R"("optim.lr" must be > 0)"));
}

TEST_CASE("hostile config: a run that cannot fit in host memory is refused, naming the keys") {
  Config c;
  c.model.n_layer = 100;
  c.model.n_embd = 16384;
  const std::string msg = error_of<ConfigError>([&] { check_host_memory(c, 50257, 64e9); });
  CHECK(has(msg, "GB of host memory, this machine has 64 GB"));  // 16 B x 3.2e11 params is over 5 TB
  CHECK(has(msg, "model.n_layer=100, model.n_embd=16384"));
  // Logits alone: B*T*V*8 bytes.
  Config l;
  l.train.batch_size = 1 << 20;
  CHECK(has(error_of<ConfigError>([&] { check_host_memory(l, 1 << 20, 64e9); }), "train.batch_size=1048576"));
  check_host_memory(Config{}, 65, 1e9);  // the default model needs ~0.2 GB
  CHECK_THROWS_AS(check_host_memory(Config{}, 65, 1e8), ConfigError);
}

TEST_CASE("hostile config: alpha train exits 2 on an oversized model before allocating it") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  // Under a 1 GiB address-space cap an attempt to allocate the model would fail or crash instead of exiting 2.
  const std::vector<std::vector<std::string>> cases = {
      {"--set", "model.n_layer=1e12"},                                           // config range
      {"--set", "train.batch_size=1000000000", "--set", "model.block_size=1048576"},  // B*T*C product
      {"--set", "model.n_layer=100", "--set", "model.n_embd=16384", "--set", "model.n_head=1"},  // host memory
  };
  for (const auto& extra : cases) {
    std::vector<std::string> args = {"train", cfg};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string joined;
    for (const auto& a : extra) joined += a + " ";
    CAPTURE(joined);
    const int rc = run_with_memory_cap(1024, [&] {
      std::string e;
      const int r = cli(args, &e);
      std::fprintf(stdout, "%s", e.c_str());
      return r;
    });
    CHECK(rc == 2);
  }
}

TEST_CASE("hostile checkpoint: a deeply nested JSON header is refused before it is parsed") {
  TempDir d;
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  write_file(d.path / "deep.alph", alph_with_header(R"({"tensors": [], "data_bytes": 0, "x": )" + deep + "}"));
  const std::string msg = error_of<CheckpointError>([&] { read_checkpoint((d.path / "deep.alph").string()); });
  CHECK(has(msg, "JSON header nested 200001 levels deep (the limit is 64)"));
}

TEST_CASE("hostile data: a deeply nested tokenizer.json beside token files is a DataError") {
  TempDir d;
  write_token_file((d.path / "train.bin").string(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 65);
  write_file(d.path / "tokenizer.json", std::string(100000, '[') + std::string(100000, ']'));
  const std::string msg = error_of<DataError>([&] { TextData::load_tokens((d.path / "train.bin").string(), 0.5, 2, 0, "char"); });
  CHECK(has(msg, "bad tokenizer"));
  CHECK(has(msg, "nested deeper than 64 levels"));
}

TEST_CASE("hostile checkpoint: a header model larger than the file's tensors is refused before allocating it") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--set", "train.max_steps=2", "--set", "train.sample_tokens=0"}) == 0);
  const std::string good = (d.path / "run" / checkpoint_file_name(2)).string();
  const CheckpointFile f = read_checkpoint(good);
  const auto rewrite = [&](const std::string& name, auto&& edit) {
    nlohmann::json meta = f.meta;
    edit(meta);
    const std::string p = (d.path / name).string();
    write_checkpoint(p, meta, f.tensors);
    return p;
  };
  // The header claims 1000 layers of width 16 (in range): the file holds ~2.5k parameter values, not 3M.
  const std::string big = rewrite("big.alph", [](nlohmann::json& m) { m["model"]["n_layer"] = 1000; });
  CHECK(load_run_checkpoint(big, /*header_only=*/true).model.n_layer == 1000);  // the header alone is plausible
  std::string msg = error_of<CheckpointError>([&] { load_run_checkpoint(big); });
  const int64_t vocab = f.meta["model"]["vocab_size"].get<int64_t>();
  // Exact count with biases: (V + block_size) * C + n_layer * (12 C^2 + 13 C) + 2 C (final LayerNorm).
  const int64_t need = (vocab + 8) * 16 + 1000 * (12 * 16 * 16 + 13 * 16) + 2 * 16;
  CHECK(has(msg, "parameter values, fewer than the " + std::to_string(need) + " its header's model needs"));
  // Out-of-range shapes are refused from the header alone (retention and export read only headers).
  const std::string odd = rewrite("odd.alph", [](nlohmann::json& m) { m["model"]["n_embd"] = 65537; });
  msg = error_of<CheckpointError>([&] { load_run_checkpoint(odd, /*header_only=*/true); });
  CHECK(has(msg, "header model (n_layer 1, n_head 2, n_embd 65537, block_size 8"));
  CHECK(has(msg, "is out of range"));
  for (const auto& kv : std::vector<std::pair<std::string, nlohmann::json>>{
           {"vocab_size", 0}, {"vocab_size", int64_t{1} << 40}, {"dropout", 1.5}, {"dropout", -1}, {"n_head", 3},
           {"n_layer", -1}, {"block_size", int64_t{1} << 21}}) {
    const std::string key = kv.first;
    const std::string p = rewrite("v.alph", [&](nlohmann::json& m) { m["model"][key] = kv.second; });
    CAPTURE(key);
    CHECK_THROWS_WITH_AS(load_run_checkpoint(p, true), doctest::Contains("is out of range"), CheckpointError);
  }
  // The untouched file still loads.
  CHECK(load_run_checkpoint(good).model.n_layer == 1);
}

TEST_CASE("hostile token file: an llm.c header with a negative token count is refused") {
  TempDir d;
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcMagic;
  header[1] = 1;
  header[2] = -1;  // was skipped like "no count" and the file accepted
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  bytes += std::string(20, '\0');  // 10 uint16 tokens of id 0
  write_file(d.path / "shard.bin", bytes);
  const std::string msg = error_of<DataError>([&] { TokenFile::open((d.path / "shard.bin").string(), 100, 1); });
  CHECK(has(msg, "llm.c header token count -1 is negative"));
  header[2] = 10;
  std::memcpy(bytes.data(), header.data(), 12);
  write_file(d.path / "shard.bin", bytes);
  CHECK(TokenFile::open((d.path / "shard.bin").string(), 100, 1)->size() == 10);
}

TEST_CASE("hostile safetensors: a deeply nested JSON header is refused before it is parsed") {
  TempDir d;
  const std::string header = R"({"__metadata__": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  write_file(d.path / "deep.safetensors", bytes + header);
  const std::string msg =
      error_of<CheckpointError>([&] { read_safetensors((d.path / "deep.safetensors").string(), nullptr); });
  CHECK(has(msg, "JSON header nested deeper than 64 levels"));
}

TEST_CASE("hostile safetensors: a float where an integer belongs (shape 3e20, offset 4.0) or a negative shape is refused, not cast") {
  // The fuzzer's find: nlohmann's get<uint64_t>() of 3e20 was an out-of-range float cast (undefined behaviour).
  TempDir d;
  for (const std::string entry : {R"({"dtype":"F32","shape":[3e20],"data_offsets":[0,4]})",
                                  R"({"dtype":"F32","shape":[1],"data_offsets":[0,4.0]})",
                                  R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"}) {
    const std::string header = R"({"w":)" + entry + "}";
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    write_file(d.path / "float.safetensors", bytes + header + std::string(4, '\0'));
    const std::string msg =
        error_of<CheckpointError>([&] { read_safetensors((d.path / "float.safetensors").string(), nullptr); });
    CHECK(has(msg, "bad entry \"w\""));
  }
  CHECK(json_u64(nlohmann::json::parse("7")) == 7);
  CHECK(json_i64(nlohmann::json::parse("-7")) == -7);
  CHECK_THROWS_AS(json_i64(nlohmann::json::parse("18446744073709551615")), nlohmann::json::type_error);
  CHECK_THROWS_AS(json_u64(nlohmann::json::parse("-1")), nlohmann::json::type_error);
}
