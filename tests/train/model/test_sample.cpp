// Inference: the KV-cached forward against the full forward, generate() against a plain re-run-the-window loop,
// top-p filtering, and `alpha sample` / `alpha eval` end to end (determinism, streaming output, exit codes).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "autograd/tape.h"
#include "cli/cli.h"
#include "model/gpt.h"
#include "loop/run_checkpoint.h"
#include "model/sample.h"
#include "tests/test_util.h"

using namespace alpha;
using namespace alpha::test;

namespace {

GPTConfig small_config() {
  GPTConfig c;
  c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.block_size = 12, c.vocab_size = 20, c.bias = true;
  return c;
}

std::vector<int32_t> random_tokens(Rng& rng, int64_t n, int64_t V) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(V))));
  return t;
}

// Runs `alpha args...` in-process capturing stdout (and stderr into `err`).
int cli_out(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
  std::fflush(stdout);
  char buf[] = "/tmp/alpha_cli_outXXXXXX";
  const int fd = mkstemp(buf);
  const int saved = dup(1);
  dup2(fd, 1);
  const int rc = cli(std::move(args), err);
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  if (out) *out = read_file(buf);
  fs::remove(buf);
  return rc;
}

}  // namespace

TEST_CASE("KV-cached forward gives the full forward's logits at every position") {
  Rng init(5), data(6);
  GPT model(small_config(), init);
  const int64_t B = 2, T = 12, V = 20;
  const std::vector<int32_t> toks = random_tokens(data, B * T, V);
  ag::NoGrad no_grad;
  Rng unused(0);
  const std::vector<float> full = model.forward(Tensor::from_vector(toks, {B, T}), false, unused).to_f32_vector();
  // Prefill 5 positions, then one token at a time.
  KVCache cache = model.make_cache(B);
  std::vector<std::pair<int64_t, Tensor>> chunks;  // (start, logits (B, Tn, V))
  for (int64_t start = 0; start < T;) {
    const int64_t Tn = start == 0 ? 5 : 1;
    std::vector<int32_t> part;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = start; t < start + Tn; ++t) part.push_back(toks[b * T + t]);
    chunks.emplace_back(start, model.forward_cached(Tensor::from_vector(part, {B, Tn}), cache));
    start += Tn;
  }
  CHECK(cache.length == T);
  int64_t compared = 0;
  for (const auto& [start, logits] : chunks) {
    const int64_t Tn = logits.size(1);
    const std::vector<float> got = logits.to_f32_vector();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < Tn; ++t)
        for (int64_t v = 0; v < V; ++v) {
          const double want = full[(b * T + start + t) * V + v], g = got[(b * Tn + t) * V + v];
          CHECK_MESSAGE(std::abs(g - want) <= 1e-5 * std::max(1.0, std::abs(want)),
                        "b " << b << " t " << start + t << " v " << v << ": " << g << " vs " << want);
          ++compared;
        }
  }
  CHECK(compared == B * T * V);
  // A full cache refuses more positions.
  CHECK_THROWS_AS(model.forward_cached(Tensor::from_vector(std::vector<int32_t>{1, 2}, {2, 1}), cache), ShapeError);
}

TEST_CASE("generate with the KV cache equals re-running the cropped window, past block_size too") {
  Rng init(11);
  GPT model(small_config(), init);
  const int64_t block = model.config().block_size;
  for (double temperature : {0.0, 1.0}) {
    SampleOptions so;
    so.max_new_tokens = 2 * block + 3;  // crosses the window limit: exercises the re-prefill
    so.temperature = temperature;
    so.top_k = temperature > 0 ? 8 : 0;
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
    Rng r1(42), r2(42);
    std::vector<int32_t> streamed;
    const std::vector<int32_t> got = generate(model, prompt, so, r1, [&](int32_t t) { streamed.push_back(t); });
    // Reference: nanoGPT's loop, full forward over the last block_size tokens each step.
    std::vector<int32_t> ref = prompt;
    ag::NoGrad no_grad;
    Rng unused(0);
    for (int64_t n = 0; n < so.max_new_tokens; ++n) {
      const int64_t T = std::min<int64_t>(static_cast<int64_t>(ref.size()), block);
      Tensor logits = model.forward(Tensor::from_vector(std::vector<int32_t>(ref.end() - T, ref.end()), {1, T}), false, unused);
      ref.push_back(sample_token(logits.narrow(1, T - 1, 1).to_f32_vector(), so, r2));
    }
    CHECK_MESSAGE(got == ref, "temperature " << temperature);
    CHECK(streamed == std::vector<int32_t>(got.begin() + static_cast<int64_t>(prompt.size()), got.end()));
  }
}

TEST_CASE("top-p keeps the smallest set of most likely tokens reaching p") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto counts = [&](double top_p) {
    SampleOptions so;
    so.top_p = top_p;
    Rng rng(9);
    std::map<int32_t, int> c;
    for (int i = 0; i < 4000; ++i) ++c[sample_token(logits, so, rng)];
    return c;
  };
  CHECK(counts(0.4).size() == 1);  // token 0 alone has 0.5 >= 0.4
  const auto c2 = counts(0.7);     // 0.5 + 0.3 >= 0.7: tokens 0 and 1, renormalized to 5/8 and 3/8
  CHECK(c2.size() == 2);
  CHECK(c2.count(0) == 1);
  CHECK(c2.count(1) == 1);
  CHECK(c2.at(0) / 4000.0 == doctest::Approx(0.625).epsilon(0.05));
  CHECK(counts(0.9).size() == 3);
  CHECK(counts(1.0).size() == 4);
  SampleOptions bad;
  bad.top_p = 0;
  Rng init(1), rng(1);
  GPT model(small_config(), init);
  CHECK_THROWS_AS(generate(model, {1}, bad, rng), ValueError);
}

TEST_CASE("alpha sample streams the prompt then the text; same seed, same text; bad input exits 2 or 4") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet"}) == kExitOk);
  const std::string ckpt = (d.path / "run" / "ckpt-00000012.alph").string();
  const std::vector<std::string> args = {"sample", ckpt, "--prompt", "the ", "--max-new-tokens", "40", "--seed", "3",
                                         "--top-k", "10", "--top-p", "0.95", "--temperature", "0.9"};
  std::string a, b, c, err;
  REQUIRE(cli_out(args, &a, &err) == kExitOk);
  REQUIRE(cli_out(args, &b) == kExitOk);
  CHECK(a == b);
  CHECK(a.rfind("the ", 0) == 0);
  CHECK(a.size() == 4 + 40 + 1);  // char tokenizer: one byte per token (ASCII corpus), then a newline
  auto other = args;
  other[7] = "4";
  REQUIRE(cli_out(other, &c) == kExitOk);
  CHECK(c != a);
  // The out_dir works too (its latest checkpoint).
  REQUIRE(cli_out({"sample", (d.path / "run").string(), "--prompt", "the ", "--max-new-tokens", "40", "--seed", "3",
                   "--top-k", "10", "--top-p", "0.95", "--temperature", "0.9"}, &c) == kExitOk);
  CHECK(c == a);

  CHECK(cli_out({"sample", ckpt, "--top-p", "1.5"}, nullptr, &err) == kExitUsage);
  CHECK(err.find("--top-p") != std::string::npos);
  CHECK(cli_out({"sample", ckpt, "--max-new-tokens", "ten"}, nullptr, &err) == kExitUsage);
  CHECK(err.find("--max-new-tokens") != std::string::npos);
  CHECK(cli_out({"sample", ckpt, "--temperature", "-1"}, nullptr, &err) == kExitUsage);
  CHECK(cli_out({"sample", ckpt, "--bogus", "1"}, nullptr, &err) == kExitUsage);
  CHECK(err.find("--bogus") != std::string::npos);
  CHECK(cli_out({"sample", ckpt, "--prompt", "QXZ"}, nullptr, &err) == kExitUsage);  // not in the char vocabulary
  CHECK(err.find("prompt") != std::string::npos);
  CHECK(cli_out({"sample"}, nullptr, &err) == kExitUsage);
  CHECK(cli_out({"sample", (d.path / "missing.alph").string()}, nullptr, &err) == kExitCheckpoint);
  CHECK(err.find("missing.alph") != std::string::npos);
  write_file(d.path / "bad.alph", std::string(200, 'x'));
  CHECK(cli_out({"sample", (d.path / "bad.alph").string()}, nullptr, &err) == kExitCheckpoint);
  CHECK(cli_out({"sample", "--help"}, &c) == kExitOk);
}

TEST_CASE("alpha eval prints the no-grad loss over consecutive windows, deterministically") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet"}) == kExitOk);
  const std::string ckpt = (d.path / "run" / "ckpt-00000012.alph").string();
  std::string a, b, err;
  REQUIRE(cli_out({"eval", ckpt}, &a, &err) == kExitOk);
  REQUIRE(cli_out({"eval", ckpt}, &b) == kExitOk);
  CHECK(a == b);
  double loss = 0, ppl = 0;
  REQUIRE(std::sscanf(a.c_str(), "loss %lf perplexity %lf", &loss, &ppl) == 2);
  CHECK(ppl == doctest::Approx(std::exp(loss)).epsilon(1e-4));

  // --data with --iters 1: one batch (train.batch_size = 4) of the file's first windows, recomputed here.
  write_file(d.path / "held.txt", corpus().substr(100, 200));
  REQUIRE(cli_out({"eval", ckpt, "--data", (d.path / "held.txt").string(), "--iters", "1"}, &a) == kExitOk);
  REQUIRE(std::sscanf(a.c_str(), "loss %lf", &loss) == 1);
  CHECK(a.find("4 windows") != std::string::npos);
  const RunCheckpoint ck = load_run_checkpoint(ckpt);
  Rng unused(0);
  GPT model(ck.model, unused);
  restore_run(ck, model, nullptr);
  auto tok = tokenizer_from_json(ck.tokenizer);
  const std::vector<int32_t> ids = tok->encode(corpus().substr(100, 200));
  const int64_t T = ck.model.block_size;
  std::vector<int32_t> x, y;
  for (int64_t w = 0; w < 4; ++w)
    for (int64_t t = 0; t < T; ++t) {
      x.push_back(ids[w * (T + 1) + t]);
      y.push_back(ids[w * (T + 1) + t + 1]);
    }
  ag::NoGrad no_grad;
  const double want = model.loss(Tensor::from_vector(x, {4, T}), Tensor::from_vector(y, {4, T}), false, unused).item();
  CHECK(loss == doctest::Approx(want).epsilon(1e-5));

  CHECK(cli_out({"eval", ckpt, "--iters", "0"}, nullptr, &err) == kExitUsage);
  CHECK(cli_out({"eval", ckpt, "--data", (d.path / "nope.txt").string()}, nullptr, &err) == kExitData);
  CHECK(err.find("nope.txt") != std::string::npos);
  write_file(d.path / "alien.txt", "QQQQQQQQQQQQQQQQQQQQ");
  CHECK(cli_out({"eval", ckpt, "--data", (d.path / "alien.txt").string()}, nullptr, &err) == kExitData);
  write_file(d.path / "short.txt", "the");
  CHECK(cli_out({"eval", ckpt, "--data", (d.path / "short.txt").string()}, nullptr, &err) == kExitData);
  CHECK(err.find("block_size") != std::string::npos);
  CHECK(cli_out({"eval", (d.path / "missing.alph").string()}, nullptr, &err) == kExitCheckpoint);
}
