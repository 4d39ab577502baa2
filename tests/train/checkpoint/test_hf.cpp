// Hugging Face directories (train/checkpoint/hf.h): `alpha export --hf` and `init_from` of such a directory, against
// GPT-2 rebuilt in plain PyTorch from the directory's HF names and config keys (tests/hf_reference.py): the committed
// fixture (tests/fixtures/hf_tiny + hf_tiny_logits.json) in every run, the script itself in test_hf_torch_live
// (registered only where python3 imports torch; docs/checkpoint-format.md).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "cli/cli.h"
#include "loop/run_checkpoint.h"
#include "tests/test_util.h"
#include "tests/train/model/model_check.h"

using namespace alpha;
using namespace alpha::test;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = fs::path(ALPHA_FIXTURES_DIR) / "hf_tiny";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Text behind the fixture's byte-level BPE tokenizer (kept here, not in a shared helper, so the fixture never moves).
const std::string kText =
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings and arrows of "
    "outrageous fortune, or to take arms against a sea of troubles and by opposing end them. To die, to sleep.\n";

std::unique_ptr<Tokenizer> fixture_tokenizer() { return train_tokenizer("bpe", kText, TokenizerOptions{300, ""}); }

// The model behind tests/fixtures/hf_tiny: GPT-2 init plus noise on every tensor (LayerNorms, biases and the
// Conv1D transposes all matter for the logits). 2 layers, 2 heads, 16 wide, 16 positions, the tokenizer's vocab.
GPT fixture_model(int64_t vocab) {
  Rng rng(2026), noise(7);
  GPT m(GPTConfig{2, 2, 16, 16, vocab, 0.0, true}, rng);
  for (const auto& [n, t0] : m.named_parameters()) {
    Tensor t = t0;
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += static_cast<float>(0.2 * noise.normal());
  }
  return m;
}

// The Llama model behind tests/fixtures/hf_llama_tiny: grouped-query attention (4 heads, 2 kv heads), RoPE base
// 500, untied head, noise on every tensor (RMSNorm weights included).
GPT llama_model(int64_t vocab, bool tied = false, int64_t kv = 2) {
  GPTConfig c{2, 4, 16, 16, vocab, 0.0, false};
  c.arch = "llama";
  c.n_kv_head = kv;
  c.rope_base = 500.0;
  c.tie_embeddings = tied;
  Rng rng(2027), noise(8);
  GPT m(c, rng);
  for (const auto& [n, t0] : m.named_parameters()) {
    Tensor t = t0;
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += static_cast<float>(0.2 * noise.normal());
  }
  return m;
}

// Training arguments with a byte-level BPE tokenizer (the kind that has HF tokenizer files).
std::vector<std::string> bpe(std::vector<std::string> args) {
  args.insert(args.end(), {"--set", "data.tokenizer=bpe", "--set", "data.vocab_size=300"});
  return args;
}

}  // namespace

TEST_CASE("HF export of the fixture model reproduces tests/fixtures/hf_tiny; torch's logits from it match both ways") {
  const std::unique_ptr<Tokenizer> tok = fixture_tokenizer();
  const GPT m = fixture_model(tok->vocab_size());
  TempDir d;
  const fs::path out = d.path / "hf";
  export_hf(out.string(), m, tok.get());
  if (const char* regen = std::getenv("ALPHA_WRITE_HF_FIXTURE"))
    fs::copy(out, regen, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer_config.json"}) {
    CAPTURE(f);
    REQUIRE(fs::exists(kFixture / f));
    CHECK(read_file(out / f) == read_file(kFixture / f));  // the torch logits were computed from exactly these bytes
  }
  const auto logits = nlohmann::json::parse(read_file(fs::path(ALPHA_FIXTURES_DIR) / "hf_tiny_logits.json"));
  CHECK(worst_logit_error(m, logits) < 1e-4);  // Alpha -> HF dir -> PyTorch
  // HF dir -> Alpha: a fresh model from the fixture directory has the same bits and torch's logits.
  Rng other(5);
  GPT back(m.config(), other);
  load_hf_into(back, kFixture.string(), *tok);
  for (const auto& [n, t] : back.named_parameters()) CHECK_MESSAGE(same_bytes(t, m.parameter(n)), n);
  CHECK(worst_logit_error(back, logits) < 1e-4);

  // The layout transformers expects: GPT2LMHeadModel names, Conv1D (in, out), no lm_head (tied); GPT2Config keys.
  nlohmann::json meta;
  const NamedTensors st = read_safetensors((out / "model.safetensors").string(), &meta);
  CHECK(meta["format"] == "pt");
  bool found = false;
  for (const auto& [n, t] : st) {
    CHECK(n.rfind("transformer.", 0) == 0);
    if (n == "transformer.h.1.mlp.c_fc.weight") {
      found = true;
      CHECK(t.shape() == Shape{16, 64});
      CHECK(t.data<float>()[3 * 64 + 40] == m.parameter(n).data<float>()[40 * 16 + 3]);
    }
  }
  CHECK(found);
  CHECK(st.size() == 2 + 2 * 12 + 2);
  const auto cfg = nlohmann::json::parse(read_file(out / "config.json"));
  CHECK(cfg["architectures"] == nlohmann::json{"GPT2LMHeadModel"});
  CHECK(cfg["n_embd"] == 16);
  CHECK(cfg["n_positions"] == 16);
  CHECK(cfg["vocab_size"] == tok->vocab_size());
  CHECK(cfg["activation_function"] == "gelu_new");
  CHECK(cfg["tie_word_embeddings"] == true);
  // vocab.json spells every byte-level token in GPT-2's alphabet: a space is U+0120, "Ġ".
  const auto vocab = nlohmann::json::parse(read_file(out / "vocab.json"));
  CHECK(vocab.size() == static_cast<size_t>(tok->vocab_size()));
  CHECK(vocab.at("\xc4\xa0") == 32);
  CHECK(vocab.at("A") == 65);
  CHECK(read_file(out / "merges.txt").rfind("#version: 0.2\n", 0) == 0);
}

TEST_CASE("alpha export --hf + init_from DIR through the CLI; refused directories name the key") {
  TempDir d;
  const std::string cfg = tiny_config(d.path);
  REQUIRE(cli(bpe({"train", cfg, "--quiet", "--set", "train.max_steps=6"})) == kExitOk);
  const std::string ck_path = (d.path / "run" / checkpoint_file_name(6)).string();
  const fs::path hf = d.path / "hf";
  std::string err;
  CHECK(cli({"export", ck_path, "--hf", hf.string(), "extra"}, &err) == kExitUsage);
  CHECK(cli({"export", ck_path, "--hf", hf.string(), "--format", "safetensors"}, &err) == kExitUsage);
  REQUIRE_MESSAGE(cli({"export", ck_path, "--hf", hf.string()}, &err) == kExitOk, err);
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer_config.json"})
    CHECK_MESSAGE(fs::exists(hf / f), f);
  CHECK(is_hf_dir(hf.string()));
  const RunCheckpoint ck = load_run_checkpoint(ck_path);
  Rng r0(9);
  GPT fresh(ck.model, r0);
  load_hf_into(fresh, hf.string(), *tokenizer_from_json(ck.tokenizer));
  for (const auto& [n, t] : fresh.named_parameters()) CHECK_MESSAGE(same_bytes(t, ck.file.get("param/" + n)), n);

  // A run initialized from the directory starts where the trained model was.
  TempDir e;
  const std::string cfg_e = tiny_config(e.path);
  REQUIRE_MESSAGE(cli(bpe({"train", cfg_e, "--quiet", "--set", "train.max_steps=1", "--set", "init_from=" + hf.string()}),
                      &err) == kExitOk, err);
  CHECK(records(e.path / "run" / "metrics.jsonl", "step", "loss")[0] <
        records(d.path / "run" / "metrics.jsonl", "step", "loss")[0] - 0.1);
  CHECK(read_jsonl(e.path / "run" / "metrics.jsonl")[0]["init_from"] == hf.string());
  // A directory without the two files, a wrong shape, an untied head, a foreign activation: exit 4, key named.
  CHECK(cli(bpe({"train", cfg_e, "--quiet", "--set", "init_from=" + e.path.string()}), &err) == kExitCheckpoint);
  CHECK_MESSAGE(err.find("holds no config.json + model.safetensors") != std::string::npos, err);
  CHECK(cli(bpe({"train", cfg_e, "--quiet", "--set", "model.n_layer=2", "--set", "init_from=" + hf.string()}), &err) ==
        kExitCheckpoint);
  CHECK_MESSAGE(err.find("\"n_layer\" is 1, the model (model.n_layer) needs 2") != std::string::npos, err);
  auto edited = [&](const char* key, const nlohmann::json& v) {
    auto c = nlohmann::json::parse(read_file(hf / "config.json"));
    c[key] = v;
    write_file(hf / "config.json", c.dump());
    const int rc = cli(bpe({"train", cfg_e, "--quiet", "--set", "init_from=" + hf.string()}), &err);
    write_file(hf / "config.json", hf_gpt2_config(ck.model, nullptr).dump());
    return rc;
  };
  CHECK(edited("activation_function", "relu") == kExitCheckpoint);
  CHECK_MESSAGE(err.find("\"activation_function\" is \"relu\"") != std::string::npos, err);
  CHECK(edited("model_type", "llama") == kExitCheckpoint);
  CHECK(edited("n_positions", 4) == kExitCheckpoint);
  CHECK_MESSAGE(err.find("less than model.block_size 8") != std::string::npos, err);
  CHECK(edited("tie_word_embeddings", false) == kExitCheckpoint);
  CHECK(edited("layer_norm_epsilon", 1e-6) == kExitCheckpoint);
  CHECK(edited("tie_word_embeddings", "yes") == kExitCheckpoint);  // wrong JSON type: a checkpoint error too
  CHECK_MESSAGE(err.find("bad config.json or metadata") != std::string::npos, err);
  write_file(hf / "config.json", "{");
  CHECK(cli(bpe({"train", cfg_e, "--quiet", "--set", "init_from=" + hf.string()}), &err) == kExitCheckpoint);
  CHECK_MESSAGE(err.find("is not valid JSON") != std::string::npos, err);
}

TEST_CASE("a gpt2 tokenizer exports as GPT-2's own vocab.json and merges.txt; init_from checks vocab.json") {
  const fs::path gpt2 = fs::path(ALPHA_FIXTURES_DIR) / "gpt2";
  const std::unique_ptr<Tokenizer> tok = train_tokenizer("gpt2", "", TokenizerOptions{0, gpt2.string()});
  Rng rng(1);
  const GPT m(GPTConfig{1, 2, 8, 8, tok->vocab_size(), 0.0, true}, rng);
  TempDir d;
  export_hf((d.path / "hf").string(), m, tok.get());
  CHECK(nlohmann::json::parse(read_file(d.path / "hf" / "vocab.json")) ==
        nlohmann::json::parse(read_file(gpt2 / "encoder.json")));
  // vocab.bpe's lines after its "#version" header, one merge per line.
  std::string want = read_file(gpt2 / "vocab.bpe"), got = read_file(d.path / "hf" / "merges.txt");
  while (!want.empty() && want.back() == '\n') want.pop_back();
  while (!got.empty() && got.back() == '\n') got.pop_back();
  CHECK(got == want);
  const auto cfg = nlohmann::json::parse(read_file(d.path / "hf" / "config.json"));
  CHECK(cfg["bos_token_id"] == 50256);
  CHECK(cfg["eos_token_id"] == 50256);
  CHECK(nlohmann::json::parse(read_file(d.path / "hf" / "tokenizer_config.json"))["eos_token"] == "<|endoftext|>");
  Rng r2(2);
  GPT back(m.config(), r2);
  load_hf_into(back, (d.path / "hf").string(), *tok);
  for (const auto& [n, t] : back.named_parameters()) CHECK_MESSAGE(same_bytes(t, m.parameter(n)), n);
  // A vocab.json that is not the run's encoder is refused (token ids would mean other text).
  auto vocab = nlohmann::json::parse(read_file(d.path / "hf" / "vocab.json"));
  vocab["hello"] = 0;
  write_file(d.path / "hf" / "vocab.json", vocab.dump());
  CHECK_THROWS_WITH_AS(load_hf_into(back, (d.path / "hf").string(), *tok),
                       doctest::Contains("vocab.json differs from the gpt2 tokenizer"), CheckpointError);
}

TEST_CASE("Llama: HF export reproduces tests/fixtures/hf_llama_tiny; torch's LlamaForCausalLM logits match both ways") {
  const std::unique_ptr<Tokenizer> tok = fixture_tokenizer();
  const GPT m = llama_model(tok->vocab_size());
  TempDir d;
  const fs::path out = d.path / "hf";
  export_hf(out.string(), m, tok.get());
  const fs::path fixture = fs::path(ALPHA_FIXTURES_DIR) / "hf_llama_tiny";
  if (const char* regen = std::getenv("ALPHA_WRITE_HF_LLAMA_FIXTURE"))
    fs::copy(out, regen, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer_config.json"}) {
    CAPTURE(f);
    REQUIRE(fs::exists(fixture / f));
    CHECK(read_file(out / f) == read_file(fixture / f));
  }
  const auto logits = nlohmann::json::parse(read_file(fs::path(ALPHA_FIXTURES_DIR) / "hf_llama_tiny_logits.json"));
  CHECK(worst_logit_error(m, logits) < 1e-4);  // Alpha -> HF dir -> PyTorch
  Rng other(5);
  GPT back(m.config(), other);
  load_hf_into(back, fixture.string(), *tok);  // HF dir -> Alpha
  for (const auto& [n, t] : back.named_parameters()) CHECK_MESSAGE(same_bytes(t, m.parameter(n)), n);
  CHECK(worst_logit_error(back, logits) < 1e-4);
  const auto cfg = nlohmann::json::parse(read_file(out / "config.json"));
  CHECK(cfg["architectures"] == nlohmann::json{"LlamaForCausalLM"});
  CHECK(cfg["num_key_value_heads"] == 2);
  CHECK(cfg["intermediate_size"] == m.config().mlp_width());
  CHECK(cfg["rope_theta"] == 500.0);
  CHECK(cfg["tie_word_embeddings"] == false);
  nlohmann::json meta;
  const NamedTensors st = read_safetensors((out / "model.safetensors").string(), &meta);
  CHECK(st.size() == m.named_parameters().size());  // 1:1, lm_head.weight included (untied)
  for (const auto& [n, t] : st) CHECK_MESSAGE(same_bytes(t, m.parameter(n)), n);

  // Refused: config keys that do not describe the model, and blocks LlamaForCausalLM cannot express.
  auto edited = [&](const char* key, const nlohmann::json& v) -> std::string {
    auto c = nlohmann::json::parse(read_file(out / "config.json"));
    c[key] = v;
    write_file(out / "config.json", c.dump());
    std::string what;
    try {
      load_hf_into(back, out.string(), *tok);
    } catch (const CheckpointError& e) {
      what = e.what();
    }
    write_file(out / "config.json", hf_llama_config(m.config(), tok.get()).dump());
    return what;
  };
  CHECK(contains(edited("rope_theta", 10000.0), "\"rope_theta\" is 10000.0, the model (model.rope_base) needs 500.0"));
  CHECK(contains(edited("num_key_value_heads", 4), "\"num_key_value_heads\""));
  CHECK(contains(edited("tie_word_embeddings", true), "\"tie_word_embeddings\""));
  CHECK(contains(edited("rope_scaling", nlohmann::json{{"type", "linear"}}), "\"rope_scaling\""));
  CHECK(contains(edited("model_type", "gpt2"), "\"model_type\" is \"gpt2\""));
  CHECK(edited("head_dim", 4).empty());  // equal to n_embd / n_head: accepted
  GPTConfig qk = m.config();
  qk.qk_norm = true;
  Rng r3(3);
  CHECK_THROWS_WITH_AS(export_hf((d.path / "qk").string(), GPT(qk, r3), tok.get()),
                       doctest::Contains("model.qk_norm has no LlamaForCausalLM equivalent"), CheckpointError);
  // A GPT-2 directory cannot fill a Llama model, nor the reverse.
  CHECK_THROWS_WITH_AS(load_hf_into(back, kFixture.string(), *tok), doctest::Contains("\"model_type\" is \"gpt2\""),
                       CheckpointError);
  GPT g = fixture_model(tok->vocab_size());
  CHECK_THROWS_WITH_AS(load_hf_into(g, fixture.string(), *tok), doctest::Contains("\"model_type\" is \"llama\""),
                       CheckpointError);
}

TEST_CASE("live: tests/hf_reference.py rebuilds fresh GPT-2 and Llama exports in PyTorch and its re-saved directory loads back") {
  const char* py = std::getenv("ALPHA_PYTHON");
  REQUIRE_MESSAGE(py != nullptr, "ALPHA_PYTHON unset: this case runs as ctest test_hf_torch_live");
  // The noisy fixture model (trained tiny weights are too small to tell one GELU from another), one layer more.
  const std::unique_ptr<Tokenizer> tok = fixture_tokenizer();
  const GPT m = fixture_model(tok->vocab_size());
  Rng rng(11);
  GPT deeper(GPTConfig{3, 4, 16, 12, tok->vocab_size(), 0.0, true}, rng);
  const GPT llama = llama_model(tok->vocab_size()), llama_mqa = llama_model(tok->vocab_size(), /*tied=*/true, 1);
  for (const GPT* model : std::vector<const GPT*>{&m, &deeper, &llama, &llama_mqa}) {
    CAPTURE(model->config().arch);
    TempDir d;
    const fs::path hf = d.path / "hf", resaved = d.path / "torch_hf", logits = d.path / "logits.json";
    export_hf(hf.string(), *model, tok.get());
    const std::string cmd = std::string(py) + " " + ALPHA_SOURCE_DIR + "/tests/hf_reference.py " + hf.string() +
                            " --out " + logits.string() + " --resave " + resaved.string();
    REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, cmd);
    const auto j = nlohmann::json::parse(read_file(logits));
    CHECK(worst_logit_error(*model, j) < 1e-4);  // Alpha -> HF -> PyTorch
    Rng r1(2);
    GPT back(model->config(), r1);
    load_hf_into(back, resaved.string(), *tok);  // PyTorch -> HF (lm_head.weight included) -> Alpha
    for (const auto& [n, t] : back.named_parameters()) CHECK_MESSAGE(same_bytes(t, model->parameter(n)), n);
    CHECK(worst_logit_error(back, j) < 1e-4);
  }
}
