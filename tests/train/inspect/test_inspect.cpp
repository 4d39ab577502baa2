// White-box inspection (issue 19): Alpha's activations agree with PyTorch's layer by layer (committed fixture, so no
// torch is needed here), the statistics, attention and logit lens are right, `alpha inspect` and `--compare` work on
// real checkpoints and exports, training writes `inspect` records without changing the run, f16 and lavapipe work.
//
// The fixture tests/fixtures/export_tiny_activations.json is PyTorch's (float64) view of export_tiny.safetensors:
//   /usr/bin/python3 scripts/torch_activations.py tests/fixtures/export_tiny.safetensors
//       --tokens 10,9,3,3,0,5,8,1 --out tests/fixtures/export_tiny_activations.json   (one line)
#include <cmath>
#include <limits>

#include "tests/test_util.h"

#include "checkpoint/safetensors.h"
#include "data/tokenizer.h"
#include "inspect/inspect.h"
#include "loop/device.h"
#include "metrics/metrics_read.h"

using namespace alpha;
using namespace alpha::test;

namespace {

const fs::path kTinyExport = fs::path(ALPHA_FIXTURES_DIR) / "export_tiny.safetensors";

// The fixture export as a GPT (its alpha.model metadata gives the shape; no tokenizer is recorded in it).
GPT load_tiny_export(bool f16 = false) {
  nlohmann::json meta;
  read_safetensors(kTinyExport.string(), &meta);
  const auto j = nlohmann::json::parse(meta["alpha.model"].get<std::string>());
  GPTConfig mc{j["n_layer"], j["n_head"], j["n_embd"], j["block_size"], j["vocab_size"], 0.0, j["bias"]};
  mc.f16 = f16;
  Rng unused(0);
  GPT m(mc, unused);
  const CharTokenizer tok({'a'});  // checked only against a tokenizer recorded in the file
  load_safetensors_into(m, kTinyExport.string(), tok);
  return m;
}

struct TorchFixture {
  std::vector<int32_t> tokens;
  std::vector<Activation> acts;
  nlohmann::json attention;
};

TorchFixture torch_fixture() {
  const auto j = nlohmann::json::parse(read_file(fs::path(ALPHA_FIXTURES_DIR) / "export_tiny_activations.json"));
  TorchFixture f{j["tokens"].get<std::vector<int32_t>>(), {}, j["attention"]};
  for (const auto& a : j["activations"]) {
    Activation x{a["name"], a["shape"].get<Shape>(), {}, {}};
    for (const auto& v : a["values"]) x.values.push_back(v.get<float>());
    f.acts.push_back(std::move(x));
  }
  return f;
}

}  // namespace

TEST_CASE("Alpha's activations agree with PyTorch's layer by layer on a small GPT (fixture from torch_activations.py)") {
  const TorchFixture f = torch_fixture();
  GPT m = load_tiny_export();
  const std::vector<Activation> ours = record_forward(m, f.tokens);
  REQUIRE(ours.size() == f.acts.size());
  REQUIRE(ours.size() == 3 + 9 * 2);  // embed, 9 points per layer, ln_f, logits
  for (size_t i = 0; i < ours.size(); ++i) {
    CAPTURE(ours[i].name);
    CHECK(ours[i].name == f.acts[i].name);  // same points, same forward order
    CHECK(ours[i].shape == f.acts[i].shape);
  }
  const CompareResult c = compare_activations(ours, f.acts, 1e-5, 0);
  CHECK_MESSAGE(!c.differ, "first difference at ", c.first, ": ", c.max_abs_diff, " ", c.detail);
  CHECK(c.per_tensor.size() == ours.size());
  CHECK(c.max_abs_diff < 1e-5);
  // Attention probabilities recomputed on the CPU from q, k equal torch's softmax(q k^T / sqrt(D)).
  const int64_t H = m.config().n_head, T = static_cast<int64_t>(f.tokens.size());
  for (int64_t l = 0; l < m.config().n_layer; ++l) {
    const Activation* qkv = nullptr;
    for (const Activation& a : ours)
      if (a.name == "h." + std::to_string(l) + ".attn.qkv") qkv = &a;
    REQUIRE(qkv != nullptr);
    const std::vector<float> p = attention_probs(*qkv, H);
    double worst = 0;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t k = 0; k < T; ++k)
          worst = std::max(worst, std::abs(p[(h * T + i) * T + k] - f.attention[l]["heads"][h][i][k].get<double>()));
    CHECK(worst < 1e-5);
  }

  SUBCASE("a change in one layer is named as the first differing activation") {
    Tensor w = m.parameter("transformer.h.1.mlp.c_fc.weight");
    w.mutable_data<float>()[3] += 0.05f;
    const CompareResult d = compare_activations(record_forward(m, f.tokens), f.acts, 1e-5, 0);
    CHECK(d.differ);
    CHECK(d.first == "h.1.mlp.act");  // everything before it still agrees
    CHECK(d.max_abs_diff > 1e-4);
  }
}

TEST_CASE("activation statistics: mean, std, max |x|, near-zero and f16-saturation fractions") {
  const std::vector<float> v = {0.0f, 5e-5f, -2.0f, 70000.0f, 1.0f, std::numeric_limits<float>::infinity(), 3.0f, -3.0f};
  const ActStats all = act_stats(v.data(), 8);
  CHECK(all.frac_zero == doctest::Approx(2.0 / 8));
  CHECK(all.frac_f16_sat == doctest::Approx(2.0 / 8));  // 70000 and inf
  CHECK(std::isinf(all.max_abs));
  CHECK(to_json(all)["max_abs"].is_null());  // JSON has no inf
  const ActStats s = act_stats(v.data() + 2, 3);  // -2, 70000, 1
  CHECK(s.mean == doctest::Approx(69999.0 / 3));
  const double m = 69999.0 / 3;
  CHECK(s.std == doctest::Approx(std::sqrt(((-2 - m) * (-2 - m) + (70000 - m) * (70000 - m) + (1 - m) * (1 - m)) / 3)));
  CHECK(s.max_abs == 70000);
  CHECK(s.frac_zero == 0);
  // A tensor (f16 storage) gives the statistics of its values.
  const Tensor t = Tensor::from_vector(std::vector<float>{1, -1, 2, -2}, {2, 2}).to(DType::f16);
  const ActStats ts = act_stats(t);
  CHECK(ts.mean == 0);
  CHECK(ts.std == doctest::Approx(std::sqrt(2.5)));
}

TEST_CASE("logit lens: the last layer reads the model's own next-token prediction; earlier layers differ") {
  const TorchFixture f = torch_fixture();
  GPT m = load_tiny_export();
  const std::vector<Activation> acts = record_forward(m, f.tokens);
  const Activation& logits = acts.back();
  REQUIRE(logits.name == "logits");
  const int64_t V = m.config().vocab_size, T = static_cast<int64_t>(f.tokens.size());
  const std::vector<LensEntry> last = logit_lens(m, acts[acts.size() - 3], 3);  // h.1.resid
  REQUIRE(acts[acts.size() - 3].name == "h.1.resid");
  REQUIRE(last.size() == static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const float* r = logits.values.data() + t * V;
    const auto argmax = static_cast<int32_t>(std::max_element(r, r + V) - r);
    CHECK(last[t].ids[0] == argmax);
    CHECK(last[t].probs.size() == 3);
    CHECK(last[t].probs[0] >= last[t].probs[1]);
    CHECK(last[t].probs[1] >= last[t].probs[2]);
    double z = 0;  // the softmax probability of the top token, from the logits themselves
    for (int64_t v = 0; v < V; ++v) z += std::exp(double(r[v]) - double(r[argmax]));
    CHECK(last[t].probs[0] == doctest::Approx(1.0 / z).epsilon(1e-5));
  }
  const std::vector<LensEntry> first = logit_lens(m, acts[0], 3);  // embed
  bool any_other = false;
  for (int64_t t = 0; t < T; ++t) any_other = any_other || first[t].probs[0] != last[t].probs[0];
  CHECK(any_other);
}

TEST_CASE("f16 forward: recorded activations are f16-rounded values near the f32 ones") {
  const TorchFixture f = torch_fixture();
  GPT m16 = load_tiny_export(/*f16=*/true);
  const std::vector<Activation> a16 = record_forward(m16, f.tokens);
  REQUIRE(a16.size() == f.acts.size());
  const CompareResult loose = compare_activations(a16, f.acts, 2e-2, 2e-2);
  CHECK_MESSAGE(!loose.differ, loose.first, " ", loose.max_abs_diff);
  CHECK(compare_activations(a16, f.acts, 1e-6, 0).differ);  // f16 rounding is visible at a tight tolerance
  for (const Activation& a : a16) CHECK(a.stats.frac_f16_sat == 0);
}

TEST_CASE("training writes inspect records every metrics.inspect_interval steps and at the end, without changing the run") {
  TempDir d1, d2;
  REQUIRE(cli({"train", tiny_config(d1.path), "--quiet", "--set", "metrics.inspect_interval=5"}) == kExitOk);
  REQUIRE(cli({"train", tiny_config(d2.path), "--quiet", "--set", "metrics.inspect_interval=0"}) == kExitOk);
  const auto recs = of_type(d1.path / "run" / "metrics.jsonl", "inspect");
  REQUIRE(recs.size() == 3);
  CHECK(recs[0]["step"] == 5);
  CHECK(recs[1]["step"] == 10);
  CHECK(recs[2]["step"] == 12);
  CHECK(of_type(d2.path / "run" / "metrics.jsonl", "inspect").empty());
  for (const auto& r : read_jsonl(d1.path / "run" / "metrics.jsonl")) CHECK(validate_record(r) == "");  // docs/metrics.md
  nlohmann::json bad = recs[0];
  bad["params"]["transformer.wte.weight"].erase("update_ratio");
  CHECK(validate_record(bad).find("update_ratio") != std::string::npos);
  // Inspection only reads: the losses and final weights are bit-identical to the run without it.
  CHECK(records(d1.path / "run" / "metrics.jsonl", "step", "loss") == records(d2.path / "run" / "metrics.jsonl", "step", "loss"));
  check_same_tensors(ckpt(d1.path / "run", 12), ckpt(d2.path / "run", 12));
  const RunCheckpoint ck = ckpt(d1.path / "run", 12);
  Rng unused(0);
  GPT m(ck.model, unused);
  for (const auto& r : recs) {
    REQUIRE(r["params"].size() == m.named_parameters().size());
    for (const auto& [name, t] : m.named_parameters()) {
      CAPTURE(name);
      const auto& p = r["params"][name];
      CHECK(p["grad_norm"].get<double>() > 0);
      CHECK(p["weight_norm"].get<double>() > 0);
      CHECK(p["update_ratio"].get<double>() > 0);
      CHECK(p["update_ratio"].get<double>() < 0.5);
    }
    for (const char* a : {"embed", "h.0.attn.out", "h.0.mlp.act", "h.0.resid", "logits"}) {
      CAPTURE(a);
      REQUIRE(r["activations"].contains(a));
      CHECK(r["activations"][a]["std"].get<double>() > 0);
    }
  }
  // The last record's weight norms are those of the final checkpoint's weights.
  restore_run(ck, m, nullptr);
  for (const auto& [name, t] : m.named_parameters()) {
    double s = 0;
    for (float v : t.to_f32_vector()) s += double(v) * v;
    CHECK(recs[2]["params"][name]["weight_norm"].get<double>() == doctest::Approx(std::sqrt(s)).epsilon(1e-6));
  }
}

TEST_CASE("alpha inspect: report on a run dir (saved for the dash), --compare against its export and another step") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet", "--set", "checkpoint.interval=6", "--set",
               "checkpoint.keep_last=5"}) == kExitOk);
  const fs::path run = d.path / "run";
  std::string err;
  REQUIRE(cli({"inspect", run.string(), "--prompt", "the quick", "--top-k", "3"}, &err) == kExitOk);
  const auto rep = nlohmann::json::parse(read_file(run / "inspect.json"));
  CHECK(rep["tokens"].size() == 8);  // 9 characters: the last block_size (8) are inspected, with a note
  CHECK(err.find("inspecting its last 8") != std::string::npos);
  CHECK(rep["activations"].size() == 3 + 9);
  CHECK(rep["attention"].size() == 1);
  CHECK(rep["attention"][0]["heads"].size() == 2);
  for (const auto& row : rep["attention"][0]["heads"][1]) {
    double sum = 0;
    for (const auto& p : row) sum += p.get<double>();
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
  REQUIRE(rep["logit_lens"].size() == 2);  // embed, h.0.resid
  CHECK(rep["logit_lens"][1]["layer"] == "h.0.resid");
  CHECK(rep["logit_lens"][1]["top"].size() == 8);
  CHECK(rep["logit_lens"][1]["top"][0].size() == 3);
  CHECK(err.find("inspect.json") != std::string::npos);

  const std::string ck12 = (run / checkpoint_file_name(12)).string(), ck6 = (run / checkpoint_file_name(6)).string();
  const std::string exported = (d.path / "m.safetensors").string();
  REQUIRE(cli({"export", ck12, "--format", "safetensors", exported}) == kExitOk);
  CHECK(cli({"inspect", ck12, "--prompt", "the quick", "--compare", exported}) == kExitOk);
  CHECK(cli({"inspect", exported, "--prompt", "lazy dog", "--compare", run.string()}) == kExitOk);
  CHECK(cli({"inspect", ck12, "--prompt", "the quick", "--compare", ck6}) == kExitDiffer);
  // --precision applies to MODEL only: f16 storage against the f32 export differs exactly, agrees loosely.
  CHECK(cli({"inspect", ck12, "--prompt", "the quick", "--precision", "f16", "--compare", exported, "--atol", "0",
             "--rtol", "0"}) == kExitDiffer);
  CHECK(cli({"inspect", ck12, "--prompt", "the quick", "--precision", "f16", "--compare", exported, "--atol", "0.05",
             "--rtol", "0.05"}) == kExitOk);
  // Usage and checkpoint errors.
  CHECK(cli({"inspect", ck12}, &err) == kExitUsage);
  CHECK(err.find("--prompt") != std::string::npos);
  CHECK(cli({"inspect", ck12, "--prompt", "\xE2\x82\xAC"}, &err) == kExitUsage);  // not in the char vocabulary
  CHECK(cli({"inspect", (d.path / "nope.alph").string(), "--prompt", "the"}) == kExitCheckpoint);
  CHECK(cli({"inspect", ck12, "--prompt", "the", "--compare", (d.path / "nope.safetensors").string()}) == kExitCheckpoint);
}

TEST_CASE("inspection on lavapipe (every op on the GPU) records what the CPU records") {
  const TorchFixture f = torch_fixture();
  std::vector<Activation> gpu;
  {
    DeviceScope scope("vulkan", 0, 0);  // thresholds 0: even these tiny ops run on the Vulkan device
    REQUIRE(scope.gpu());
    GPT m = load_tiny_export();
    gpu = record_forward(m, f.tokens);
  }
  const CompareResult c = compare_activations(gpu, f.acts, 1e-4, 1e-4);
  CHECK_MESSAGE(!c.differ, c.first, " ", c.max_abs_diff);
}

TEST_CASE("inspect records of an f16 run (unscaled gradients) and of a lavapipe run match the f32 CPU run's at step 1") {
  auto step1 = [](const std::vector<std::string>& extra) {
    TempDir d;
    std::vector<std::string> args = {"train", tiny_config(d.path), "--quiet", "--set", "model.dropout=0",
                                     "--set", "train.max_steps=2", "--set", "metrics.inspect_interval=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    REQUIRE(cli(args) == kExitOk);
    const auto recs = of_type(d.path / "run" / "metrics.jsonl", "inspect");
    REQUIRE(recs.size() == 2);
    return recs[0];  // step 1: the same initial weights in every run
  };
  const nlohmann::json cpu = step1({}), f16 = step1({"--set", "model.precision=f16"}),
                       gpu = step1({"--set", "device=vulkan", "--set", "dispatch.threshold=0", "--set",
                                    "dispatch.matmul_threshold=0"});
  for (const auto& [name, p] : cpu["params"].items()) {
    CAPTURE(name);
    const double g = p["grad_norm"].get<double>();
    CHECK(gpu["params"][name]["grad_norm"].get<double>() == doctest::Approx(g).epsilon(1e-3));
    CHECK(f16["params"][name]["grad_norm"].get<double>() == doctest::Approx(g).epsilon(0.05));  // loss scale removed
    CHECK(gpu["params"][name]["update_ratio"].get<double>() == doctest::Approx(p["update_ratio"].get<double>()).epsilon(1e-2));
  }
  for (const auto& [name, s] : cpu["activations"].items()) {
    CAPTURE(name);
    CHECK(gpu["activations"][name]["std"].get<double>() == doctest::Approx(s["std"].get<double>()).epsilon(1e-3));
    CHECK(f16["activations"][name]["std"].get<double>() == doctest::Approx(s["std"].get<double>()).epsilon(0.02));
  }
}

TEST_CASE("arch llama: training writes parameter-only inspect records; alpha inspect refuses it with a usage error") {
  TempDir d;
  REQUIRE(cli({"train", tiny_config(d.path), "--quiet", "--set", "model.arch=llama", "--set", "model.bias=false",
               "--set", "train.max_steps=2", "--set", "metrics.inspect_interval=1"}) == kExitOk);
  const auto recs = of_type(d.path / "run" / "metrics.jsonl", "inspect");
  REQUIRE(recs.size() == 2);
  CHECK(!recs[0]["params"].empty());
  CHECK(recs[0]["activations"].empty());  // no observer points in the llama forward yet
  CHECK(validate_record(recs[0]) == "");
  std::string err;
  CHECK(cli({"inspect", (d.path / "run").string(), "--prompt", "the"}, &err) == kExitUsage);
  CHECK(err.find("llama") != std::string::npos);
}
