// Config parsing: defaults, the shipped configs, every validation error (message content checked), overrides,
// file errors, the config_to_json round trip, and docs/config.md covering every key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"

using alpha::Config;
using alpha::ConfigError;
using nlohmann::json;

namespace {

const std::string kSource = ALPHA_SOURCE_DIR;

// The ConfigError message `f` throws; fails the test if it throws nothing.
template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

std::string text_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return config_error([&] { alpha::load_config_text(text, overrides, "<test>"); });
}

std::string json_error(const json& j) {
  return config_error([&] { alpha::parse_config(j); });
}

Config from_text(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return alpha::load_config_text(text, overrides, "<test>");
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every dotted leaf key of a config JSON ("model.n_layer", ...).
void leaf_keys(const json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (const auto& [k, v] : j.items()) {
    const std::string p = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object()) {
      leaf_keys(v, p, out);
    } else {
      out.push_back(p);
    }
  }
}

// Runs each {json text, expected message fragment} case.
void expect_errors(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& c : cases) {
    const std::string& text = c.first;  // not a structured binding: CAPTURE's lambda can't take one on clang 14
    const std::string& fragment = c.second;
    CAPTURE(text);
    const std::string msg = text_error(text);
    CAPTURE(msg);
    CHECK(contains(msg, "[config] "));
    CHECK(contains(msg, fragment));
  }
}

}  // namespace

TEST_CASE("config: an empty object gives the documented defaults") {
  const Config c = alpha::parse_config(json::object());
  CHECK(c == Config{});
  CHECK(c.out_dir == "runs/default");
  CHECK(c.seed == 1337);
  CHECK(c.device == "auto");
  CHECK(c.init_from == "");
  CHECK(c.model.n_layer == 6);
  CHECK(c.model.n_head == 6);
  CHECK(c.model.n_embd == 384);
  CHECK(c.model.block_size == 256);
  CHECK(c.model.vocab_size == 0);
  CHECK(c.model.dropout == 0.2);
  CHECK(c.model.bias == false);
  CHECK(c.model.attention == "fused");
  CHECK(c.model.precision == "f32");
  CHECK(c.data.path == "");
  CHECK(c.data.tokenizer == "char");
  CHECK(c.data.val_fraction == 0.1);
  CHECK(c.data.sampling == "random");
  CHECK(c.train.batch_size == 64);
  CHECK(c.train.grad_accum == 1);
  CHECK(c.train.max_steps == 5000);
  CHECK(c.train.eval_interval == 250);
  CHECK(c.train.eval_iters == 200);
  CHECK(c.train.log_interval == 1);
  CHECK(c.train.sample_tokens == 200);
  CHECK(c.train.defer_weight_grads);
  CHECK(c.train.overlap_steps);
  CHECK(c.optim.lr == 1e-3);
  CHECK(c.optim.min_lr == 1e-4);
  CHECK(c.optim.warmup_steps == 100);
  CHECK(c.optim.schedule == "cosine");
  CHECK(c.optim.decay_steps == 5000);
  CHECK(c.optim.wsd_decay_fraction == 0.2);
  CHECK(c.optim.weight_decay == 0.1);
  CHECK(c.optim.beta1 == 0.9);
  CHECK(c.optim.beta2 == 0.99);
  CHECK(c.optim.eps == 1e-8);
  CHECK(c.optim.grad_clip == 1.0);
  CHECK(c.checkpoint.interval == 250);
  CHECK(c.checkpoint.keep_last == 3);
  CHECK(c.metrics.path == "metrics.jsonl");
  CHECK(c.dispatch.threshold == alpha::kAutoThreshold);
  CHECK(c.dispatch.matmul_threshold == alpha::kAutoThreshold);
  CHECK(config_to_json(c)["dispatch"]["threshold"] == "auto");
}

TEST_CASE("config: missing keys take defaults, present keys are used") {
  const Config c = from_text(R"({"model": {"n_layer": 2}, "optim": {"schedule": "wsd"}, "seed": 7})");
  CHECK(c.model.n_layer == 2);
  CHECK(c.optim.schedule == "wsd");
  CHECK(c.seed == 7);
  Config expected;
  expected.model.n_layer = 2;
  expected.optim.schedule = "wsd";
  expected.seed = 7;
  CHECK(c == expected);
}

TEST_CASE("config: configs/default.json parses with the README job's values") {
  const Config c = alpha::load_config(kSource + "/configs/default.json", {});
  CHECK(c.data.path == "data/fortunes.txt");
  CHECK(c.data.tokenizer == "char");
  CHECK(c.model.n_layer == 4);
  CHECK(c.model.n_head == 4);
  CHECK(c.model.n_embd == 128);
  CHECK(c.model.block_size == 64);
  CHECK(c.model.dropout == 0.0);
  CHECK(c.train.batch_size == 12);
  CHECK(c.train.max_steps == c.optim.decay_steps);  // the cosine ends where the run does
  CHECK(c.train.max_steps % c.train.eval_interval == 0);
  CHECK(c.train.eval_iters == 20);
  CHECK(c.train.sample_tokens == 300);
  CHECK(c.optim.lr == 1e-3);
  CHECK(c.optim.min_lr == 1e-4);
  CHECK(c.optim.warmup_steps == 100);
  CHECK(c.optim.schedule == "cosine");
  CHECK(c.optim.beta2 == 0.99);
  CHECK(c.optim.weight_decay == 0.1);
  CHECK(c.optim.grad_clip == 1.0);
  CHECK(c.out_dir == "runs/default");
}

TEST_CASE("config: configs/shakespeare_char_cpu.json parses with nanoGPT's CPU recipe") {
  const Config c = alpha::load_config(kSource + "/configs/shakespeare_char_cpu.json", {});
  CHECK(c.model.n_layer == 4);
  CHECK(c.model.n_head == 4);
  CHECK(c.model.n_embd == 128);
  CHECK(c.model.block_size == 64);
  CHECK(c.model.dropout == 0.0);
  CHECK(c.train.batch_size == 12);
  CHECK(c.train.max_steps == 2000);
  CHECK(c.train.eval_interval == 250);
  CHECK(c.train.eval_iters == 20);
  CHECK(c.optim.lr == 1e-3);
  CHECK(c.optim.min_lr == 1e-4);
  CHECK(c.optim.warmup_steps == 100);
  CHECK(c.optim.schedule == "cosine");
  CHECK(c.optim.decay_steps == 2000);
  CHECK(c.optim.beta2 == 0.99);
  CHECK(c.optim.weight_decay == 0.1);
  CHECK(c.optim.grad_clip == 1.0);
  CHECK(c.data.path == "data/tinyshakespeare.txt");
  CHECK(c.data.tokenizer == "char");
  CHECK(c.out_dir == "runs/shakespeare_char_cpu");
}

TEST_CASE("config: unknown keys are refused with a did-you-mean") {
  CHECK(text_error(R"({"model": {"n_laye": 4}})") ==
        R"([config] unknown key "model.n_laye" (did you mean "model.n_layer"?))");
  // A transposition counts as one edit; sections get suggestions too.
  CHECK(contains(text_error(R"({"model": {"n_layre": 4}})"), R"(did you mean "model.n_layer"?)"));
  CHECK(contains(text_error(R"({"modle": {}})"), R"(unknown key "modle" (did you mean "model"?))"));
  // A prefix match.
  CHECK(contains(text_error(R"({"optim": {"warmup": 10}})"), R"(did you mean "optim.warmup_steps"?)"));
  // A key in the wrong section points at the right one.
  CHECK(contains(text_error(R"({"lr": 0.1})"), R"(unknown key "lr" (did you mean "optim.lr"?))"));
  CHECK(contains(text_error(R"({"model": {"batch_size": 8}})"), R"(did you mean "train.batch_size"?)"));
  CHECK(contains(text_error(R"({"path": "x"})"), R"(did you mean "data.path"?)"));  // not the section "data"
  CHECK(contains(text_error(R"({"Model": {"N_LAYER": 2}})"), R"(did you mean "model"?)"));
  // A flat dotted key is explained.
  CHECK(contains(text_error(R"({"model.n_layer": 4})"), "nested objects"));
  // Nothing close: the known keys of that section are listed.
  const std::string far = text_error(R"({"checkpoint": {"zzzzzzzz": 1}})");
  CHECK(contains(far, R"(unknown key "checkpoint.zzzzzzzz")"));
  CHECK(contains(far, "checkpoint.interval"));
  CHECK(contains(far, "checkpoint.keep_last"));
  CHECK_FALSE(contains(far, "did you mean"));
}

TEST_CASE("config: wrong JSON types are refused, naming the key and the value") {
  CHECK(text_error(R"({"train": {"batch_size": "64"}})") ==
        R"([config] "train.batch_size" must be an integer, got string "64")");
  expect_errors({
      {R"({"train": {"batch_size": 1.5}})", R"("train.batch_size" must be an integer, got number 1.5)"},
      {R"({"train": {"batch_size": true}})", R"("train.batch_size" must be an integer, got boolean true)"},
      {R"({"train": {"batch_size": null}})", R"("train.batch_size" must be an integer, got null)"},
      {R"({"model": {"dropout": "0.1"}})", R"("model.dropout" must be a number, got string "0.1")"},
      {R"({"model": {"bias": 1}})", R"("model.bias" must be a boolean (true or false), got number 1)"},
      {R"({"out_dir": 5})", R"("out_dir" must be a string, got number 5)"},
      {R"({"data": {"path": ["a"]}})", R"("data.path" must be a string, got array)"},
      {R"({"model": 5})", R"("model" must be an object, got number 5)"},
      {R"({"seed": -1})", R"("seed" must be a non-negative integer)"},
      {R"({"seed": 1.5})", R"("seed" must be a non-negative integer)"},
      {R"({"dispatch": {"threshold": "fast"}})", R"("dispatch.threshold" must be an integer or "auto", got string "fast")"},
      {R"({"dispatch": {"matmul_threshold": -1}})", R"("dispatch.matmul_threshold" must be >= 0, got -1)"},
      {R"([1, 2])", "must be a JSON object, got array"},
  });
  CHECK(contains(json_error(json("text")), "must be a JSON object, got string"));
}

TEST_CASE("config: integers written as integral floats are accepted, others refused") {
  const Config c = from_text(R"({"train": {"max_steps": 1e3, "batch_size": 8.0}, "seed": 4e3})");
  CHECK(c.train.max_steps == 1000);
  CHECK(c.train.batch_size == 8);
  CHECK(c.seed == 4000);
  CHECK(contains(text_error(R"({"train": {"max_steps": 1e30}})"), R"("train.max_steps" must be <= 1000000000)"));
  CHECK(contains(text_error(R"({"train": {"max_steps": 18446744073709551615}})"), R"("train.max_steps" must be <=)"));
  CHECK(contains(text_error(R"({"train": {"max_steps": -9223372036854775808}})"), R"("train.max_steps" must be >= 1)"));
  CHECK(contains(text_error(R"({"train": {"max_steps": 2.5e0}})"), "must be an integer, got number 2.5"));
  // The full uint64 range is a valid seed.
  CHECK(from_text(R"({"seed": 18446744073709551615})").seed == std::numeric_limits<uint64_t>::max());
}

TEST_CASE("config: integer ranges") {
  expect_errors({
      {R"({"model": {"n_layer": 0}})", R"("model.n_layer" must be >= 1, got 0)"},
      {R"({"model": {"n_layer": 1001}})", R"("model.n_layer" must be <= 1000, got 1001)"},
      {R"({"model": {"n_head": 0}})", R"("model.n_head" must be >= 1, got 0)"},
      {R"({"model": {"n_head": 2048, "n_embd": 4096}})", R"("model.n_head" must be <= 1024, got 2048)"},
      {R"({"model": {"n_embd": 0}})", R"("model.n_embd" must be >= 1, got 0)"},
      {R"({"model": {"n_embd": 65537}})", R"("model.n_embd" must be <= 65536, got 65537)"},
      {R"({"model": {"block_size": 0}})", R"("model.block_size" must be >= 1, got 0)"},
      {R"({"model": {"block_size": 1048577}})", R"("model.block_size" must be <= 1048576, got 1048577)"},
      {R"({"model": {"vocab_size": -1}})", R"("model.vocab_size" must be >= 0, got -1)"},
      {R"({"model": {"vocab_size": 16777217}})", R"("model.vocab_size" must be <= 16777216, got 16777217)"},
      {R"({"train": {"batch_size": 0}})", R"("train.batch_size" must be >= 1, got 0)"},
      {R"({"train": {"batch_size": 1000000001}})", R"("train.batch_size" must be <= 1000000000)"},
      {R"({"train": {"grad_accum": 0}})", R"("train.grad_accum" must be >= 1, got 0)"},
      {R"({"train": {"max_steps": 0}})", R"("train.max_steps" must be >= 1, got 0)"},
      {R"({"train": {"eval_interval": 0}})", R"("train.eval_interval" must be >= 1, got 0)"},
      {R"({"train": {"eval_iters": 0}})", R"("train.eval_iters" must be >= 1, got 0)"},
      {R"({"train": {"log_interval": 0}})", R"("train.log_interval" must be >= 1, got 0)"},
      {R"({"train": {"sample_tokens": -1}})", R"("train.sample_tokens" must be >= 0, got -1)"},
      {R"({"optim": {"warmup_steps": -1}})", R"("optim.warmup_steps" must be >= 0, got -1)"},
      {R"({"optim": {"decay_steps": 0}})", R"("optim.decay_steps" must be >= 1, got 0)"},
      {R"({"checkpoint": {"interval": 0}})", R"("checkpoint.interval" must be >= 1, got 0)"},
      {R"({"checkpoint": {"keep_last": 0}})", R"("checkpoint.keep_last" must be >= 1, got 0)"},
  });
  // Boundary values are accepted.
  const Config c = from_text(R"({"model": {"n_layer": 1, "n_head": 1, "n_embd": 1, "block_size": 1},
                                 "train": {"sample_tokens": 0}, "optim": {"warmup_steps": 0}})");
  CHECK(c.model.n_layer == 1);
  CHECK(c.train.sample_tokens == 0);
  CHECK(c.optim.warmup_steps == 0);
}

TEST_CASE("config: floating-point ranges") {
  CHECK(text_error(R"({"optim": {"lr": -0.001}})") == R"([config] "optim.lr" must be > 0, got -0.001)");
  expect_errors({
      {R"({"optim": {"lr": 0}})", R"("optim.lr" must be > 0, got 0)"},
      {R"({"model": {"dropout": 1}})", R"("model.dropout" must be < 1, got 1)"},
      {R"({"model": {"dropout": -0.1}})", R"("model.dropout" must be >= 0, got -0.1)"},
      {R"({"data": {"val_fraction": 0}})", R"("data.val_fraction" must be > 0, got 0)"},
      {R"({"data": {"val_fraction": 1}})", R"("data.val_fraction" must be < 1, got 1)"},
      {R"({"optim": {"min_lr": -1e-5}})", R"("optim.min_lr" must be >= 0, got -1e-05)"},
      {R"({"optim": {"wsd_decay_fraction": 1.5}})", R"("optim.wsd_decay_fraction" must be <= 1, got 1.5)"},
      {R"({"optim": {"wsd_decay_fraction": -0.5}})", R"("optim.wsd_decay_fraction" must be >= 0, got -0.5)"},
      {R"({"optim": {"weight_decay": -0.1}})", R"("optim.weight_decay" must be >= 0, got -0.1)"},
      {R"({"optim": {"beta1": 1}})", R"("optim.beta1" must be < 1, got 1)"},
      {R"({"optim": {"beta2": -0.5}})", R"("optim.beta2" must be >= 0, got -0.5)"},
      {R"({"optim": {"eps": 0}})", R"("optim.eps" must be > 0, got 0)"},
      {R"({"optim": {"grad_clip": -1}})", R"("optim.grad_clip" must be >= 0, got -1)"},
  });
  // Inclusive boundaries are accepted: dropout 0, min_lr 0 and == lr, grad_clip 0 (off), wsd fraction 0 and 1.
  const Config c = from_text(R"({"model": {"dropout": 0}, "optim": {"min_lr": 0, "grad_clip": 0,
                                 "wsd_decay_fraction": 1, "beta1": 0}})");
  CHECK(c.optim.grad_clip == 0.0);
  CHECK(c.optim.wsd_decay_fraction == 1.0);
  CHECK(from_text(R"({"optim": {"lr": 0.01, "min_lr": 0.01}})").optim.min_lr == 0.01);
}

TEST_CASE("config: NaN and infinity are refused everywhere a number is read") {
  const double inf = std::numeric_limits<double>::infinity();
  const double bad[] = {std::nan(""), inf, -inf};
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"model", "dropout"},   {"data", "val_fraction"}, {"optim", "lr"},    {"optim", "min_lr"},
      {"optim", "weight_decay"}, {"optim", "beta1"},    {"optim", "beta2"}, {"optim", "eps"},
      {"optim", "grad_clip"}, {"optim", "wsd_decay_fraction"}};
  for (const double v : bad) {
    for (const auto& [section, key] : keys) {
      json j;
      j[section][key] = v;
      const std::string msg = json_error(j);
      CAPTURE(msg);
      CHECK(contains(msg, "\"" + section + "." + key + "\" must be finite"));
    }
    json j;
    j["train"]["batch_size"] = v;
    CHECK(contains(json_error(j), R"("train.batch_size" must be an integer)"));
    json s;
    s["seed"] = v;
    CHECK(contains(json_error(s), R"("seed" must be a non-negative integer)"));
  }
  // From the command line "nan" is not JSON, so it arrives as a string.
  CHECK(contains(text_error("{}", {"optim.lr=nan"}), R"("optim.lr" must be a number, got string "nan")"));
}

TEST_CASE("config: choices for tokenizer, sampling, schedule and device") {
  for (const char* t : {"char", "word", "bpe", "gpt2"}) {
    CHECK(from_text(json{{"data", {{"tokenizer", t}, {"tokenizer_path", "tok/"}}}}.dump()).data.tokenizer == t);
  }
  CHECK(contains(text_error(R"({"data": {"tokenizer": "gpt2"}})"), R"("data.tokenizer_path")"));
  for (const char* s : {"constant", "cosine", "linear", "wsd"}) {
    CHECK(from_text(json{{"optim", {{"schedule", s}}}}.dump()).optim.schedule == s);
  }
  for (const char* s : {"random", "sequential"}) {
    CHECK(from_text(json{{"data", {{"sampling", s}}}}.dump()).data.sampling == s);
  }
  for (const char* d : {"auto", "cpu", "vulkan", "vulkan:0", "vulkan:12"}) {
    CHECK(from_text(json{{"device", d}}.dump()).device == d);
  }
  expect_errors({
      {R"({"data": {"tokenizer": "chr"}})",
       R"("data.tokenizer" must be one of char, word, bpe, gpt2, got "chr" (did you mean "char"?))"},
      {R"({"data": {"sampling": "shuffle"}})", R"("data.sampling" must be one of random, sequential, got "shuffle")"},
      {R"({"optim": {"schedule": "cosin"}})", R"(got "cosin" (did you mean "cosine"?))"},
      {R"({"device": "cuda"})", R"("device" must be auto, cpu, vulkan or vulkan:N)"},
      {R"({"device": "vulcan"})", R"(did you mean "vulkan"?)"},
      {R"({"device": "vulkan:"})", R"(got "vulkan:")"},
      {R"({"device": "vulkan:-1"})", R"(got "vulkan:-1")"},
      {R"({"device": "vulkan:1x"})", R"(got "vulkan:1x")"},
      {R"({"device": "VULKAN"})", R"(got "VULKAN")"},
  });
}

TEST_CASE("config: cross-field rules") {
  CHECK(text_error(R"({"model": {"n_head": 5}})") ==
        R"([config] "model.n_embd" (384) must be divisible by "model.n_head" (5))");
  CHECK(text_error(R"({"optim": {"lr": 0.001, "min_lr": 0.01}})") ==
        R"([config] "optim.min_lr" (0.01) must be <= "optim.lr" (0.001))");
  // Each field is in range, but the model or the activations are absurdly large.
  const std::string params = text_error(R"({"model": {"n_layer": 1000, "n_head": 1, "n_embd": 65536}})");
  CHECK(contains(params, "model too large"));
  CHECK(contains(params, "model.n_layer=1000"));
  const std::string acts = text_error(R"({"train": {"batch_size": 1000000000}, "model": {"block_size": 1048576}})");
  CHECK(contains(acts, R"("train.batch_size" * "model.block_size" * "model.n_embd")"));
  // A big but sane model passes (GPT-2 XL-ish: 48 layers, 1600 wide, 50257 vocab).
  CHECK(from_text(R"({"model": {"n_layer": 48, "n_head": 25, "n_embd": 1600, "block_size": 1024,
                                "vocab_size": 50257}})").model.n_layer == 48);
}

TEST_CASE("config: file and JSON syntax errors name the file and position") {
  const std::string missing = config_error([] { alpha::load_config("/nonexistent/dir/cfg.json", {}); });
  CHECK(contains(missing, R"("/nonexistent/dir/cfg.json")"));
  CHECK(contains(missing, "no such file"));
  const auto dir = std::filesystem::temp_directory_path();
  CHECK(contains(config_error([&] { alpha::load_config(dir.string(), {}); }), "is a directory"));

  const auto path = dir / "alpha_test_config_bad.json";
  {
    std::ofstream f(path);
    f << "{\n  \"model\": {\n    \"n_layer\": 4,\n  }\n}\n";
  }
  const std::string bad = config_error([&] { alpha::load_config(path.string(), {}); });
  std::filesystem::remove(path);
  CHECK(contains(bad, path.string() + ":4:3: invalid JSON"));

  CHECK(contains(text_error("{\n  // a comment\n  \"seed\": 1\n}"), "<test>:2:3: comments are not allowed"));
  CHECK(contains(text_error("{\"seed\": 1 /* c */}"), "comments are not allowed"));
  CHECK(contains(text_error("{\"model\": {\"n_layer\": 1, \"n_layer\": 2}}"), R"(duplicate key "model.n_layer")"));
  CHECK(contains(text_error("  \n"), "<test>: empty config"));
  CHECK(contains(text_error("{\"seed\": 1} trailing"), "<test>:1:"));
  CHECK(contains(text_error(R"({"model": {"n_embd": 1e400}})"), "<test>: invalid JSON: number overflow"));
}

TEST_CASE("config: --set overrides are nested, type-checked and applied in order") {
  const std::string base = R"({"model": {"n_layer": 4}, "data": {"path": "a.txt"}})";
  const Config c = from_text(base, {"model.n_layer=2", "optim.lr=3e-4", "data.path=data/x y.txt", "model.bias=true",
                                    "out_dir=\"123\"", "device=vulkan:1", "seed = 9", "train.max_steps=10",
                                    "train.max_steps=20"});
  CHECK(c.model.n_layer == 2);
  CHECK(c.optim.lr == 3e-4);
  CHECK(c.data.path == "data/x y.txt");  // not JSON, so taken as a string
  CHECK(c.model.bias == true);
  CHECK(c.out_dir == "123");  // quoted: a JSON string
  CHECK(c.device == "vulkan:1");
  CHECK(c.seed == 9);
  CHECK(c.train.max_steps == 20);  // last one wins
  CHECK(c.model.n_head == 6);      // untouched keys keep their defaults
  // A whole section merges into what the file set.
  const Config m = from_text(base, {R"(model={"n_head": 2, "n_embd": 64})"});
  CHECK(m.model.n_layer == 4);
  CHECK(m.model.n_head == 2);
  CHECK(m.model.n_embd == 64);
  // An empty value is the empty string (allowed for data.path).
  CHECK(from_text(base, {"data.path="}).data.path == "");

  CHECK(text_error(base, {"train.batch_size=abc"}) ==
        R"([config] "train.batch_size" must be an integer, got string "abc")");
  CHECK(contains(text_error(base, {"out_dir=123"}), R"("out_dir" must be a string, got number 123)"));
  CHECK(text_error(base, {"model.n_laye=3"}) ==
        R"([config] unknown key "model.n_laye" in override "model.n_laye=3" (did you mean "model.n_layer"?))");
  CHECK(contains(text_error(base, {"optim.wramup_steps=3"}), R"(did you mean "optim.warmup_steps"?)"));
  CHECK(contains(text_error(base, {"lr=0.1"}), R"(did you mean "optim.lr"?)"));
  CHECK(contains(text_error(base, {"model.n_layer.x=3"}), R"("model.n_layer" is a value, not a section)"));
  CHECK(contains(text_error(base, {"model.n_layer"}), "must look like key.path=value"));
  CHECK(contains(text_error(base, {"=3"}), "must look like key.path=value"));
  CHECK(contains(text_error(base, {"model..n_layer=3"}), "empty name in key path"));
  CHECK(contains(text_error(R"({"model": 3})", {"model.n_layer=3"}), R"("model" must be an object, got number 3)"));
}

TEST_CASE("config: config_to_json has every key and round-trips") {
  Config c;
  c.out_dir = "runs/x";
  c.seed = std::numeric_limits<uint64_t>::max();
  c.device = "vulkan:2";
  c.init_from = "runs/y/ckpt";
  c.model = {3, 2, 64, 32, 1000, 0.05, true};
  c.model.attention = "unfused";
  c.model.precision = "f16";
  c.data = {"d.txt", "bpe", 0.25, "sequential", 1000, "tok/"};
  c.train = {7, 2, 99, 11, 5, 3, 0, false, false};
  c.optim.lr = 0.123456789012345;
  c.optim.min_lr = 1e-7;
  c.optim.warmup_steps = 0;
  c.optim.schedule = "wsd";
  c.optim.decay_steps = 77;
  c.optim.wsd_decay_fraction = 0.3;
  c.optim.weight_decay = 0.0;
  c.optim.beta1 = 0.8;
  c.optim.beta2 = 0.95;
  c.optim.eps = 1e-6;
  c.optim.grad_clip = 0.0;
  c.optim.device = "gpu";
  c.optim.zero = 1;
  c.optim.name = "muon";
  c.optim.muon = {0.05, 0.9, 0.01, false, 7, {3.0, -3.2, 1.2}, "f16"};
  c.checkpoint = {17, 1};
  c.metrics.path = "/tmp/m.jsonl";
  c.metrics.profile = true;
  c.metrics.peak_tflops = 989.5;
  c.metrics.inspect_interval = 7;
  c.metrics.http = {"http://127.0.0.1:9/x", "ALPHA_TOKEN", 7, 3, 2, 1.5, 0.5};
  c.dispatch = {0, 12345, "auto"};
  c.guard = {"rollback", 2, 0.5, 10, 3.0, "skip", 0};

  const json j = alpha::config_to_json(c);
  const json d = alpha::config_to_json(Config{});
  std::vector<std::string> keys, default_keys;
  leaf_keys(j, "", keys);
  leaf_keys(d, "", default_keys);
  CHECK(keys == default_keys);
  CHECK(keys.size() == 79);  // 4 top-level + 16 model + 4 data + 9 train + 21 optim + 2 checkpoint + 2 metrics
                             // + 3 dispatch + 7 guard
  // The Llama keys need arch llama (which refuses biases): a second config sets them all.
  Config l = c;
  l.model.bias = false;
  l.model.arch = "llama";
  l.model.n_kv_head = 1;
  l.model.mlp_hidden = 96;
  l.model.rope_base = 500000.0;
  l.model.tie_embeddings = false;
  l.model.qk_norm = true;
  l.model.mlp_act = "relu2";
  const json jl = alpha::config_to_json(l);
  // Every key differs from its default here, so a key that parse_config ignored would break the round trip.
  for (const auto& k : keys) {
    CAPTURE(k);
    std::string pointer = "/" + k;
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const bool llama_key = j.at(json::json_pointer(pointer)) == d.at(json::json_pointer(pointer));
    CHECK((llama_key ? jl : j).at(json::json_pointer(pointer)) != d.at(json::json_pointer(pointer)));
  }
  CHECK(alpha::parse_config(j) == c);
  CHECK(alpha::parse_config(jl) == l);
  CHECK(alpha::load_config_text(j.dump(2), {}, "<dump>") == c);  // through text: doubles print exactly
  CHECK(alpha::parse_config(d) == Config{});
}

TEST_CASE("config: docs/config.md documents every key") {
  std::ifstream f(kSource + "/docs/config.md");
  REQUIRE(f.good());
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> keys;
  leaf_keys(alpha::config_to_json(Config{}), "", keys);
  for (const auto& k : keys) {
    CAPTURE(k);
    CHECK(contains(doc, "| `" + k + "`"));
  }
  CHECK(contains(doc, "--set"));
  CHECK(contains(doc, "exit code 2"));
}

TEST_CASE("config: optim.name and optim.muon keys are validated") {
  CHECK(from_text(R"({"optim": {"name": "muon", "muon": {"ns_coefficients": [1, -2, 1.5]}}})").optim.muon.ns_coefficients ==
        std::vector<double>{1, -2, 1.5});
  CHECK(contains(text_error(R"({"optim": {"name": "sgd"}})"), R"("optim.name")"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"ns_dtype": "bf16"}}})"), R"("optim.muon.ns_dtype" must be one of f32, f16)"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"momentum": 1}}})"), R"("optim.muon.momentum" must be < 1)"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"ns_steps": 0}}})"), R"("optim.muon.ns_steps" must be >= 1)"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"lr": -0.1}}})"), R"("optim.muon.lr" must be >= 0)"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"nesterov": 1}}})"), R"("optim.muon.nesterov" must be a boolean)"));
  CHECK(contains(text_error(R"({"train": {"defer_weight_grads": "no"}})"),
                 R"("train.defer_weight_grads" must be a boolean)"));
  for (const char* bad : {"[1, 2]", "[1, 2, \"x\"]", "3", "[1, 2, 3, 4]"})
    CHECK(contains(text_error(std::string(R"({"optim": {"muon": {"ns_coefficients": )") + bad + "}}}"),
                   R"("optim.muon.ns_coefficients" must be 3 finite numbers [a, b, c])"));
  CHECK(contains(text_error(R"({"optim": {"muon": {"ns_step": 5}}})"), R"(did you mean "optim.muon.ns_steps")"));
}

TEST_CASE("config: metrics.http keys are validated") {
  CHECK(contains(text_error(R"({"metrics": {"http": {"queue_lines": 0}}})"), R"("metrics.http.queue_lines" must be >= 1)"));
  CHECK(contains(text_error(R"({"metrics": {"http": {"timeout_s": 0}}})"), R"("metrics.http.timeout_s")"));
  CHECK(contains(text_error(R"({"metrics": {"http": {"urll": "x"}}})"), R"(did you mean "metrics.http.url")"));
  CHECK(from_text(R"({"metrics": {"http": {"url": "http://127.0.0.1:1/m"}}})").metrics.http.url == "http://127.0.0.1:1/m");
}
