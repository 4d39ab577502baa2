// The training job end to end through the CLI entry point: a tiny run writes metrics and a resolved config,
// is deterministic, and bad configs, data and arguments exit with the documented codes and messages.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "data/data.h"
#include "data/tokenizer.h"
#include "tests/test_util.h"

using namespace alpha;
namespace fs = std::filesystem;
using namespace alpha::test;

namespace {

}  // namespace

TEST_CASE("a tiny training run writes metrics, the resolved config and a sample") {
  TempDir d;
  std::string err;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet"}, &err) == kExitOk);
  const auto lines = read_jsonl(d.path / "run" / "metrics.jsonl");
  REQUIRE(!lines.empty());
  CHECK(lines.front()["type"] == "run");
  int steps = 0, evals = 0, samples = 0;
  double first = 0, last = 0;
  for (const auto& l : lines) {
    if (l["type"] == "step") {
      for (const char* k : {"step", "loss", "lr", "grad_norm", "tokens_per_sec", "step_ms", "elapsed_s"})
        CHECK_MESSAGE(l.contains(k), "step record lacks " << k);
      if (steps++ == 0) first = l["loss"];
      last = l["loss"];
    }
    if (l["type"] == "eval") {
      ++evals;
      CHECK(l.contains("val_loss"));
      CHECK(l.contains("train_loss"));
    }
    if (l["type"] == "sample") ++samples;
  }
  CHECK(steps == 12);
  CHECK(evals == 2);
  CHECK(samples == 1);
  CHECK(last < first);  // lr 3e-3 on a repetitive corpus: the loss falls within 12 steps
  const auto resolved = nlohmann::json::parse(std::ifstream(d.path / "run" / "config.json"));
  CHECK(resolved["train"]["max_steps"] == 12);
  CHECK(resolved["optim"]["beta2"] == 0.99);  // defaults are filled in
}

TEST_CASE("same seed, same device: identical losses; --set overrides apply") {
  TempDir a, b;
  REQUIRE(cli({"train", tiny_config(a.path), "--quiet"}) == kExitOk);
  REQUIRE(cli({"train", tiny_config(b.path), "--quiet"}) == kExitOk);
  auto losses = [](const fs::path& p) {
    std::vector<double> v;
    for (const auto& l : read_jsonl(p)) if (l["type"] == "step") v.push_back(l["loss"]);
    return v;
  };
  CHECK(losses(a.path / "run" / "metrics.jsonl") == losses(b.path / "run" / "metrics.jsonl"));
  TempDir c;
  REQUIRE(cli({"train", tiny_config(c.path), "--quiet", "--set", "seed=8", "--set", "train.max_steps=5"}) == kExitOk);
  const auto lc = losses(c.path / "run" / "metrics.jsonl");
  CHECK(lc.size() == 5);
  CHECK(lc[0] != losses(a.path / "run" / "metrics.jsonl")[0]);
}

TEST_CASE("bad configs exit 2 naming the key; bad data exits 3; bad usage exits 2") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  std::string err;
  CHECK(cli({"train", cfg, "--quiet", "--set", "model.n_laye=2"}, &err) == kExitUsage);
  CHECK(err.find("model.n_layer") != std::string::npos);
  CHECK(cli({"train", cfg, "--quiet", "--set", "optim.lr=-1"}, &err) == kExitUsage);
  CHECK(err.find("optim.lr") != std::string::npos);
  CHECK(cli({"train", (d.path / "missing.json").string()}, &err) == kExitUsage);
  CHECK(err.find("missing.json") != std::string::npos);
  CHECK(cli({"train", cfg, "--bogus"}, &err) == kExitUsage);
  CHECK(cli({"train"}, &err) == kExitUsage);
  CHECK(cli({"frobnicate"}, &err) == kExitUsage);
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.path=" + (d.path / "nope.txt").string()}, &err) == kExitData);
  CHECK(err.find("nope.txt") != std::string::npos);
  write_file(d.path / "short.txt", "abc");
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.path=" + (d.path / "short.txt").string()}, &err) == kExitData);
  CHECK(err.find("block_size") != std::string::npos);
  write_file(d.path / "empty.txt", "");
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.path=" + (d.path / "empty.txt").string()}, &err) == kExitData);
  CHECK(err.find("empty") != std::string::npos);
  CHECK(cli({"--version"}) == kExitOk);
  CHECK(cli({"--help"}) == kExitOk);
  CHECK(cli({"train", "--help"}) == kExitOk);
}

TEST_CASE("char tokenizer round-trips Unicode and rejects unknown characters") {
  const std::string text = "héllo wörld — ✓ ok\n";
  CharTokenizer tok = CharTokenizer::train(text);
  CHECK(tok.decode(tok.encode(text)) == text);
  CHECK(tok.vocab_size() == 13);  // h é l o space w ö r d — ✓ k newline
  CHECK_THROWS_AS(tok.encode("z"), ValueError);
  auto back = tokenizer_from_json(tok.to_json());
  CHECK(back->encode(text) == tok.encode(text));
  CHECK(utf8_decode("\xff" "a") == std::vector<uint32_t>{0xfffd, 'a'});  // invalid byte never crashes
}

TEST_CASE("data windows follow nanoGPT's get_batch: y is x shifted by one") {
  TextData d = TextData::from_text(corpus(), "char", 0.1, 8, "corpus");
  Rng rng(3);
  auto [x, y] = d.batch(false, 5, 8, rng);
  const auto xv = x.to_f64_vector(), yv = y.to_f64_vector();
  for (int b = 0; b < 5; ++b)
    for (int t = 0; t < 7; ++t) CHECK(yv[b * 8 + t] == xv[b * 8 + t + 1]);
  CHECK(d.split(false).size() + d.split(true).size() == corpus().size());
}

TEST_CASE("options whose feature is not built yet are refused, not ignored") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  std::string err;
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.sampling=sequential"}, &err) == kExitUsage);
  CHECK(cli({"train", cfg, "--quiet", "--set", "device=vulkan:99"}, &err) != kExitOk);  // no such GPU: clear error
  CHECK(err.find("device index 99") != std::string::npos);
}

TEST_CASE("multi-threaded kernels are deterministic: two 40-step runs give identical losses") {
  // Sizes where every GEMM and row kernel is split across the thread pool (a non-reentrant BLAS or a racy
  // kernel shows up here as diverging losses).
  TempDir a, b;
  const std::string extra = R"(, "metrics": {"path": "m.jsonl"})";
  for (TempDir* d : {&a, &b}) {
    const std::string cfg = tiny_config(d->path, extra);
    REQUIRE(cli({"train", cfg, "--quiet", "--set", "model.n_embd=64", "--set", "model.n_layer=2",
                 "--set", "model.block_size=32", "--set", "train.batch_size=8", "--set", "train.max_steps=40",
                 "--set", "optim.decay_steps=40", "--set", "train.eval_interval=40", "--set", "train.sample_tokens=0"}) ==
            kExitOk);
  }
  auto losses = [](const fs::path& p) {
    std::vector<double> v;
    for (const auto& l : read_jsonl(p)) if (l["type"] == "step") v.push_back(l["loss"]);
    return v;
  };
  const auto la = losses(a.path / "run" / "m.jsonl"), lb = losses(b.path / "run" / "m.jsonl");
  CHECK(la.size() == 40);
  CHECK(la == lb);
}

TEST_CASE("every tokenizer kind trains end to end: char, word, bpe, gpt2") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--set", "data.tokenizer=word"},
        std::vector<std::string>{"--set", "data.tokenizer=bpe", "--set", "data.vocab_size=300"},
        std::vector<std::string>{"--set", "data.tokenizer=gpt2", "--set",
                                 "data.tokenizer_path=" + std::string(ALPHA_FIXTURES_DIR) + "/gpt2"}}) {
    std::vector<std::string> args = {"train", cfg, "--quiet", "--set", "train.max_steps=3", "--set", "train.eval_interval=3"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string err;
    CHECK_MESSAGE(cli(args, &err) == kExitOk, extra[1] << ": " << err);
  }
  std::string err;
  CHECK(cli({"train", cfg, "--quiet", "--set", "data.tokenizer=gpt2"}, &err) == kExitUsage);  // no tokenizer_path
  CHECK(err.find("data.tokenizer_path") != std::string::npos);
}

TEST_CASE("step records carry MFU when the device's peak is configured") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  REQUIRE(cli({"train", cfg, "--quiet", "--set", "metrics.peak_tflops=0.5", "--set", "train.max_steps=3"}) == kExitOk);
  int n = 0;
  for (const auto& l : read_jsonl(d.path / "run" / "metrics.jsonl")) {
    if (l["type"] != "step") continue;
    ++n;
    REQUIRE(l.contains("mfu"));
    const double expect = l["flops_per_step"].get<double>() / (l["step_ms"].get<double>() / 1e3) / 0.5e12;
    CHECK(l["mfu"].get<double>() == doctest::Approx(expect).epsilon(1e-9));
  }
  CHECK(n == 3);
  TempDir e;
  REQUIRE(cli({"train", tiny_config(e.path), "--quiet", "--set", "train.max_steps=2"}) == kExitOk);
  for (const auto& l : read_jsonl(e.path / "run" / "metrics.jsonl")) CHECK(!l.contains("mfu"));  // peak unknown
}
