// The Llama architecture (model.arch "llama", train/model/llama.cpp): a tiny model loaded with a PyTorch
// fixture's weights (tests/make_llama_fixture.py -> fixtures/llama_tiny.json, written from Hugging Face's Llama
// definitions) must reproduce the f64 reference logits, loss and every parameter gradient; the KV cache (GQA,
// RoPE offsets) must give the full forward's logits; parameter counts, bad configs; and `alpha train`,
// `sample`, `eval` and exact `--resume` end to end on a llama run.
// Error metric (as in test_gpt.cpp): max_i |a_i - r_i| / max(|r_i|, 0.1 * max_i |r_i|).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "loop/run_checkpoint.h"
#include "model/gpt.h"
#include "tests/train/model/llama_reference.h"
#include "tests/train/model/model_check.h"
#include "model/sample.h"
#include "tests/test_util.h"

using namespace alpha;
using namespace alpha::test;
using nlohmann::json;

namespace {

GPTConfig config_of(const json& c) {
  GPTConfig cfg{c["n_layer"], c["n_head"], c["n_embd"], c["block_size"], c["vocab_size"], 0.0, false};
  cfg.arch = "llama";
  cfg.n_kv_head = c["n_kv_head"];
  cfg.mlp_act = c["mlp_act"];
  cfg.mlp_hidden = c["mlp_hidden"];
  cfg.qk_norm = c["qk_norm"];
  cfg.tie_embeddings = c["tie_embeddings"];
  cfg.rope_base = c["rope_base"];
  return cfg;
}

GPTConfig small_llama() {
  GPTConfig c{2, 4, 32, 12, 20, 0.0, false};
  c.arch = "llama";
  c.n_kv_head = 2;
  c.qk_norm = true;
  return c;
}

}  // namespace

TEST_CASE("tiny Llama: logits, loss and every gradient match the PyTorch f64 reference (HF names)") {
  std::ifstream f(std::string(ALPHA_FIXTURES_DIR) + "/llama_tiny.json");
  REQUIRE(f.good());
  const json fx = json::parse(f);
  REQUIRE(fx["variants"].size() == 2);
  for (const json& vx : fx["variants"]) {
    INFO(vx["name"].get<std::string>());
    Rng rng(0);
    GPT model(config_of(vx["config"]), rng);
    // Same names, same order, same shapes as the reference's Hugging Face state_dict.
    REQUIRE(model.named_parameters().size() == vx["param_names"].size());
    for (size_t i = 0; i < model.named_parameters().size(); ++i) {
      const auto& [name, t] = model.named_parameters()[i];
      CHECK(name == vx["param_names"][i].get<std::string>());
      const json& p = vx["params"][name];
      REQUIRE(Shape(p["shape"].get<Shape>()) == t.shape());
      const std::vector<float> v = p["data"].get<std::vector<float>>();
      Tensor dst = t;
      std::copy(v.begin(), v.end(), dst.mutable_data<float>());
    }
    CHECK(model.num_parameters() == expected_parameters(model.config()));
    const Shape s = vx["batch"]["shape"].get<Shape>();
    const Tensor x = Tensor::from_vector(vx["batch"]["idx"].get<std::vector<int32_t>>(), s);
    const Tensor y = Tensor::from_vector(vx["batch"]["targets"].get<std::vector<int32_t>>(), s);
    for (bool fused : {true, false}) {
      GPTConfig cfg = model.config();
      cfg.fused_attention = fused;
      Rng r2(0);
      GPT m2(cfg, r2);
      for (size_t i = 0; i < m2.named_parameters().size(); ++i) {
        Tensor dst = m2.named_parameters()[i].second;
        dst.copy_from(model.named_parameters()[i].second);
      }
      const double e_logits =
          rel_error(m2.forward(x, false, r2).to_f64_vector(), vx["ref64"]["logits"].get<std::vector<double>>());
      Tensor loss = m2.loss(x, y, false, r2);
      const double ref = vx["ref64"]["loss"].get<double>();
      ag::backward(loss);
      double e_grad = 0;
      std::string worst;
      for (const auto& [name, t] : m2.named_parameters()) {
        REQUIRE(t.grad().defined());
        const double e = rel_error(t.grad().to_f64_vector(), vx["ref64"]["grads"][name].get<std::vector<double>>());
        if (e > e_grad) e_grad = e, worst = name;
      }
      MESSAGE(fmt::format("{} fused={}: logits {:.2e}, loss {:.2e}, grads {:.2e} ({})", vx["name"].get<std::string>(),
                          fused, e_logits, std::fabs(loss.item() - ref) / ref, e_grad, worst));
      CHECK(e_logits <= 1e-5);
      CHECK(std::fabs(loss.item() - ref) / ref <= 1e-5);
      CHECK(e_grad <= 1e-4);
    }
  }
}

TEST_CASE("Llama fused q/k/v and gate/up GEMMs give the unfused math's logits and every gradient (CPU)") {
  struct Case {
    const char* name;
    int64_t n_kv_head;
    bool qk_norm, fused_attention;
    const char* act;
  };
  for (const Case& k : {Case{"MHA (one RoPE pass, attention on the packed qkv)", 4, false, true, "swiglu"},
                        Case{"GQA", 2, false, true, "swiglu"}, Case{"GQA + QK-norm", 2, true, true, "swiglu"},
                        Case{"MHA unfused attention", 4, false, false, "swiglu"},
                        Case{"relu2", 4, false, true, "relu2"}}) {
    INFO(k.name);
    GPTConfig cfg{2, 4, 32, 12, 20, 0.0, false};
    cfg.arch = "llama";
    cfg.n_kv_head = k.n_kv_head;
    cfg.qk_norm = k.qk_norm;
    cfg.fused_attention = k.fused_attention;
    cfg.mlp_act = k.act;
    cfg.mlp_hidden = 24;
    cfg.tie_embeddings = false;
    Rng init(3);
    GPT model(cfg, init);
    std::vector<int32_t> ids(2 * 12), tg(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 20), tg[i] = (ids[i] + 1) % 20;
    const Tensor x = Tensor::from_vector(ids, {2, 12}), y = Tensor::from_vector(tg, {2, 12});
    auto run = [&](bool reference) {
      for (Tensor p : model.parameters()) p.set_grad(Tensor());
      Rng rng(0);
      const Tensor logits = reference ? test::llama_reference_logits(model, x) : model.forward(x, true, rng);
      ag::backward(ag::cross_entropy(ag::reshape(logits, {-1, 20}), y.reshape({-1})));
      std::vector<std::vector<double>> out{logits.to_f64_vector()};
      for (const Tensor& p : model.parameters()) out.push_back(p.grad().to_f64_vector());
      return out;
    };
    const auto fused = run(false), ref = run(true);
    CHECK(rel_error(fused[0], ref[0]) <= 1e-5);
    for (size_t i = 1; i < fused.size(); ++i) {
      INFO(model.named_parameters()[i - 1].first);
      CHECK(rel_error(fused[i], ref[i]) <= 1e-4);
    }
  }
}

TEST_CASE("Llama KV cache (GQA, RoPE at an offset) gives the full forward's logits; greedy generate agrees") {
  for (bool fused : {true, false}) {
    GPTConfig cfg = small_llama();
    cfg.fused_attention = fused;
    Rng init(5), data(6);
    GPT model(cfg, init);
    const int64_t B = 2, T = 12, V = 20;
    std::vector<int32_t> toks;
    for (int64_t i = 0; i < B * T; ++i) toks.push_back(static_cast<int32_t>(data.below(V)));
    ag::NoGrad no_grad;
    Rng unused(0);
    const std::vector<float> full = model.forward(Tensor::from_vector(toks, {B, T}), false, unused).to_f32_vector();
    KVCache cache = model.make_cache(B);
    CHECK(cache.k[0].size(1) == 2);  // Hkv heads cached, not H
    auto chunk = [&](int64_t t0, int64_t n) {
      std::vector<int32_t> c;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = t0; t < t0 + n; ++t) c.push_back(toks[b * T + t]);
      return model.forward_cached(Tensor::from_vector(c, {B, n}), cache).to_f32_vector();
    };
    double err = 0;
    auto compare = [&](const std::vector<float>& got, int64_t t0, int64_t n) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < n; ++t)
          for (int64_t v = 0; v < V; ++v)
            err = std::max(err, std::fabs(double(got[(b * n + t) * V + v]) - full[(b * T + t0 + t) * V + v]));
    };
    compare(chunk(0, 5), 0, 5);  // prefill 5 positions, then 1, then 3, then the rest one by one
    compare(chunk(5, 1), 5, 1);
    compare(chunk(6, 3), 6, 3);
    for (int64_t t = 9; t < T; ++t) compare(chunk(t, 1), t, 1);
    CHECK(cache.length == T);
    CHECK(err < 1e-5);
    // Greedy decoding with the cache (and its re-prefill past block_size) = re-running the window each step.
    SampleOptions opt;
    opt.temperature = 0;
    opt.max_new_tokens = 20;
    Rng r1(1);
    const std::vector<int32_t> got = generate(model, {3, 4}, opt, r1);
    std::vector<int32_t> want = {3, 4};
    while (want.size() < got.size()) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(want.size()), cfg.block_size);
      const auto l = model.forward(Tensor::from_vector(std::vector<int32_t>(want.end() - n, want.end()), {1, n}), false, unused)
                         .to_f32_vector();
      want.push_back(static_cast<int32_t>(std::max_element(l.end() - V, l.end()) - (l.end() - V)));
    }
    CHECK(got == want);
  }
}

TEST_CASE("Llama parameter counts, default MLP width and bad configs") {
  Rng rng(1);
  GPTConfig c = small_llama();
  CHECK(c.mlp_width() == 128);  // 8 * 32 / 3 = 85 -> 128
  c.n_embd = 384, c.n_head = 6;
  CHECK(c.mlp_width() == 1024);
  c.mlp_act = "relu2";
  CHECK(c.mlp_width() == 4 * 384);
  for (bool tie : {true, false})
    for (const char* act : {"swiglu", "relu2"}) {
      GPTConfig l = small_llama();
      l.tie_embeddings = tie;
      l.mlp_act = act;
      GPT m(l, rng);
      CHECK(m.num_parameters() == expected_parameters(l));
      CHECK(m.num_parameters(false) == m.num_parameters());  // no position table
    }
  for (bool bias : {true, false}) {
    GPTConfig g{2, 2, 16, 8, 20, 0.0, bias};
    GPT m(g, rng);
    CHECK(m.num_parameters() == expected_parameters(g));
  }
  GPTConfig bad = small_llama();
  bad.n_kv_head = 3;
  CHECK_THROWS_WITH_AS(GPT(bad, rng), doctest::Contains("n_kv_head"), ValueError);
  bad = small_llama();
  bad.n_embd = 12, bad.n_head = 4;  // D = 3
  CHECK_THROWS_WITH_AS(GPT(bad, rng), doctest::Contains("even head size"), ValueError);
  bad = small_llama();
  bad.mlp_act = "gelu";
  CHECK_THROWS_AS(GPT(bad, rng), ValueError);
  bad = small_llama();
  bad.arch = "mamba";
  CHECK_THROWS_AS(GPT(bad, rng), ValueError);
}

TEST_CASE("alpha train / sample / eval / --resume on a llama run; the checkpoint keeps the arch") {
  TempDir a, b;
  const std::vector<std::string> sets = {"--set", "model.bias=false", "--set", "model.arch=llama", "--set",
                                         "model.n_kv_head=1", "--set", "model.qk_norm=true", "--set",
                                         "model.tie_embeddings=false"};
  auto train = [&](const TempDir& d, std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", tiny_config(d.path), "--quiet"};
    args.insert(args.end(), sets.begin(), sets.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  };
  REQUIRE(train(a, {}) == kExitOk);
  const RunCheckpoint ck = ckpt(a.path / "run", 12);
  CHECK(ck.model.arch == "llama");
  CHECK(ck.model.n_kv_head == 1);
  CHECK(ck.model.qk_norm);
  CHECK(!ck.model.tie_embeddings);
  CHECK(ck.config.model.arch == "llama");
  // Resume: 6 steps, then --resume to 12, bit-identical to the straight run.
  REQUIRE(train(b, {"--set", "train.max_steps=6"}) == kExitOk);
  REQUIRE(train(b, {"--resume"}) == kExitOk);
  check_same_tensors(ck, ckpt(b.path / "run", 12));
  // Resuming with another architecture is refused, naming the field.
  std::string err;
  std::vector<std::string> args = {"train", tiny_config(b.path), "--quiet", "--resume", "--set", "model.bias=false"};
  CHECK(cli(args, &err) != kExitOk);
  CHECK(err.find("model.arch") != std::string::npos);
  const std::string path = (a.path / "run" / "ckpt-00000012.alph").string();
  REQUIRE(cli({"sample", path, "--prompt", "the ", "--max-new-tokens", "20", "--seed", "3"}) == kExitOk);
  REQUIRE(cli({"eval", path}) == kExitOk);
  // The GPT-2 safetensors layout refuses a llama model instead of writing zeros (Hugging Face Llama export: --hf).
  CHECK(cli({"export", path, "--format", "safetensors", (a.path / "m.safetensors").string()}, &err) == kExitCheckpoint);
  CHECK(err.find("llama") != std::string::npos);
}

TEST_CASE("config: llama keys need arch llama; bad values are clear errors") {
  auto err_of = [](const std::string& text, std::vector<std::string> sets) {
    try {
      load_config_text(text, sets, "<test>");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(err_of("{}", {"model.n_kv_head=2"}).find("applies to \"model.arch\": \"llama\" only") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=llama", "model.n_kv_head=4"}).find("multiple of \"model.n_kv_head\"") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=llama", "model.n_head=4", "model.n_embd=12"}).find("even head size") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=llama", "model.bias=true"}).find("no biases") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=llama", "model.mlp_act=gelu"}).find("model.mlp_act") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=lama"}).find("model.arch") != std::string::npos);
  CHECK(err_of("{}", {"model.arch=llama", "model.rope_base=1"}).find("model.rope_base") != std::string::npos);
  const Config c = load_config_text("{}", {"model.arch=llama", "model.n_kv_head=3", "model.qk_norm=true"}, "<test>");
  CHECK(c.model.n_kv_head == 3);
  CHECK(parse_config(config_to_json(c)) == c);
  CHECK(err_of("{}", {}).empty());
}

TEST_CASE("Llama in f16 storage: loss near f32's, f32 gradients for the f32 master weights") {
  GPTConfig cfg = small_llama();
  Rng i1(3), i2(3);
  GPT m32(cfg, i1);
  cfg.f16 = true;
  GPT m16(cfg, i2);  // same seed: same weights
  std::vector<int32_t> ids;
  for (int i = 0; i < 24; ++i) ids.push_back((i * 7 + 1) % 20);
  const Tensor x = Tensor::from_vector(ids, {2, 12});
  const Tensor y = Tensor::from_vector(std::vector<int32_t>(ids.rbegin(), ids.rend()), {2, 12});
  Rng r(0);
  const Tensor l32 = m32.loss(x, y, false, r), l16 = m16.loss(x, y, false, r);
  CHECK(l16.dtype() == DType::f32);
  CHECK(l16.item() == doctest::Approx(l32.item()).epsilon(5e-3));
  ag::backward(l16);
  for (const auto& [name, t] : m16.named_parameters()) {
    INFO(name);
    REQUIRE(t.grad().defined());
    CHECK(t.grad().dtype() == DType::f32);
  }
}
