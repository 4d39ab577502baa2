// `alpha inspect MODEL --prompt "..."`: one forward pass, white-box (train/inspect/inspect.h): activation statistics
// per layer and sub-block, attention per head, the logit lens; a table or --json. `--compare B` runs a second model
// (checkpoint or `alpha export` safetensors) on the same tokens and names the first activation that differs.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/safetensors.h"
#include "cli/cli.h"
#include "cli/cmd_util.h"
#include "config/config.h"
#include "config/json_limits.h"
#include "inspect/inspect.h"
#include "loop/device.h"
#include "loop/run_checkpoint.h"

namespace alpha {

namespace fs = std::filesystem;

namespace {

constexpr const char* kInspectHelp = R"(usage: alpha inspect MODEL --prompt TEXT [--json] [--top-k K] [--device cpu|auto|vulkan|vulkan:N]
                     [--precision f32|f16] [--save FILE] [--compare B [--atol A] [--rtol R]]

One forward pass of MODEL (an ALPH checkpoint, a run's out_dir for its latest checkpoint, or a .safetensors file
from `alpha export`) on the prompt, white-box:
  - per layer and sub-block (ln_1, attn.qkv, attn.y, attn.out, resid_mid, ln_2, mlp.act, mlp.out, resid) the
    activation mean, std, max |x|, fraction near zero (|x| < 1e-4) and fraction at f16 saturation (|x| >= 65504);
  - per layer and head the attention pattern (probabilities recomputed on the CPU from q and k);
  - the logit lens: the top-K next tokens read from every layer's residual stream through the final LayerNorm
    and the LM head (key logit_lens in the JSON).
A table on the terminal, or all of it as JSON with --json (docs/inspect.md). With a run's out_dir the report is
also saved as OUT_DIR/inspect.json, where `alpha dash` shows its attention maps and logit lens; --save FILE
saves it elsewhere.

--compare B runs B (another checkpoint or safetensors export, at its own precision: --precision applies to MODEL)
on the same tokens and compares every activation in forward order: the first whose values differ by more than atol + rtol * |b| is named with its max abs diff.
defaults: --top-k 5, --device cpu, --precision: the run's model.precision (f32 for safetensors), --atol 1e-4,
          --rtol 1e-3
exit codes: 0 ok (with --compare: the activations agree), 1 runtime error, 2 usage error, 4 checkpoint error,
            7 the compared models' activations differ
)";

struct InspectModel {
  std::unique_ptr<GPT> model;
  std::unique_ptr<Tokenizer> tok;  // null for a safetensors file without a recorded tokenizer
  std::string what;                // "runs/x/ckpt-00000100.alph (step 100)"
  std::string run_dir;             // set when MODEL was a run's out_dir
};

bool is_safetensors(const std::string& p) { return p.size() >= 12 && p.substr(p.size() - 12) == ".safetensors"; }

// A checkpoint (or run dir's latest) with the run's precision and attention; or an `alpha export` safetensors file,
// whose alpha.model metadata gives the shape (else `fallback`'s, the model it is compared with).
InspectModel load_inspect_model(const std::string& arg, const std::string& precision, const InspectModel* fallback) {
  InspectModel m;
  Rng unused(0);
  if (is_safetensors(arg)) {
    nlohmann::json meta;
    read_safetensors(arg, &meta);
    GPTConfig mc;
    if (meta.is_object() && meta.contains("alpha.model")) {
      try {
        const std::string text = meta["alpha.model"].get<std::string>();
        ALPHA_CHECK(json_nesting_depth(text) <= kMaxJsonDepth, CheckpointError, "[inspect] \"{}\": deep metadata", arg);
        const auto j = nlohmann::json::parse(text);
        mc = GPTConfig{json_i64(j.at("n_layer")), json_i64(j.at("n_head")), json_i64(j.at("n_embd")),
                       json_i64(j.at("block_size")), json_i64(j.at("vocab_size")), 0.0, j.at("bias").get<bool>()};
      } catch (const nlohmann::json::exception& e) {
        throw CheckpointError(fmt::format("[inspect] \"{}\": bad alpha.model metadata: {}", arg, e.what()));
      }
      ALPHA_CHECK(mc.n_layer >= 1 && mc.n_layer <= 1000 && mc.n_head >= 1 && mc.n_embd >= 1 && mc.n_embd <= 65536 &&
                      mc.n_embd % mc.n_head == 0 && mc.block_size >= 1 && mc.block_size <= (1 << 20) &&
                      mc.vocab_size >= 1 && mc.vocab_size <= (1 << 24),
                  CheckpointError, "[inspect] \"{}\": alpha.model metadata out of range", arg);
    } else if (fallback) {
      mc = fallback->model->config();
      mc.f16 = false;
    } else {
      throw CheckpointError(fmt::format(
          "[inspect] \"{}\" has no alpha.model metadata (not from `alpha export`): compare it with --compare", arg));
    }
    if (meta.is_object() && meta.contains("alpha.tokenizer")) {
      try {
        m.tok = tokenizer_from_json(nlohmann::json::parse(meta["alpha.tokenizer"].get<std::string>()));
      } catch (const std::exception& e) {
        throw CheckpointError(fmt::format("[inspect] \"{}\": bad alpha.tokenizer metadata: {}", arg, e.what()));
      }
    }
    mc.f16 = precision == "f16";
    m.model = std::make_unique<GPT>(mc, unused);
    const Tokenizer* tok = m.tok ? m.tok.get() : fallback && fallback->tok ? fallback->tok.get() : nullptr;
    ALPHA_CHECK(tok != nullptr, CheckpointError, "[inspect] \"{}\" records no tokenizer to encode the prompt with", arg);
    load_safetensors_into(*m.model, arg, *tok);
    m.what = arg;
    return m;
  }
  const std::string path = fs::is_directory(arg) ? find_resume_checkpoint(arg, "latest") : arg;
  if (fs::is_directory(arg)) m.run_dir = arg;
  const RunCheckpoint ck = load_run_checkpoint(path);
  try {
    m.tok = tokenizer_from_json(ck.tokenizer);
  } catch (const ValueError& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad tokenizer: {}", path, e.what()));
  }
  GPTConfig mc = ck.model;
  ALPHA_CHECK(!mc.llama(), ConfigError, "[inspect] \"{}\" is a model.arch llama model: inspection covers gpt2 only so far",
              path);
  mc.fused_attention = ck.config.model.attention == "fused";
  mc.f16 = precision.empty() ? ck.config.model.precision == "f16" : precision == "f16";
  m.model = std::make_unique<GPT>(mc, unused);
  restore_run(ck, *m.model, nullptr);
  m.what = fmt::format("{} (step {})", path, ck.state.step);
  return m;
}

std::string printable(std::string s) {
  for (char& c : s)
    if (c == '\n') c = '|';
    else if (static_cast<unsigned char>(c) < 32) c = ' ';
  return s;
}

void print_table(const InspectModel& m, const nlohmann::json& r) {
  const GPTConfig& mc = m.model->config();
  std::printf("alpha inspect: %s, %lld layers, %lld heads, %s, %zu prompt tokens\n\n", m.what.c_str(),
              static_cast<long long>(mc.n_layer), static_cast<long long>(mc.n_head), mc.f16 ? "f16" : "f32",
              r["tokens"].size());
  std::printf("%-18s %-14s %10s %10s %10s %8s %9s\n", "activation", "shape", "mean", "std", "max|x|", "~0 %", "f16sat %");
  auto num = [](const nlohmann::json& v) { return v.is_number() ? fmt::format("{:10.4g}", v.get<double>()) : "       n/a"; };
  for (const auto& a : r["activations"]) {
    std::string shape;
    for (const auto& d : a["shape"]) shape += (shape.empty() ? "" : "x") + std::to_string(d.get<int64_t>());
    std::printf("%-18s %-14s %s %s %s %8.2f %9.4f\n", a["name"].get<std::string>().c_str(), shape.c_str(),
                num(a["mean"]).c_str(), num(a["std"]).c_str(), num(a["max_abs"]).c_str(),
                100 * a["frac_zero"].get<double>(), 100 * a["frac_f16_sat"].get<double>());
  }
  const size_t T = r["tokens"].size();
  std::printf("\nattention of the last position (\"%s\"): top keys per head (position:token weight)\n",
              printable(r["text"][T - 1].get<std::string>()).c_str());
  for (const auto& layer : r["attention"]) {
    int h = 0;
    for (const auto& head : layer["heads"]) {
      const auto& row = head[T - 1];
      std::vector<size_t> order(T);
      for (size_t i = 0; i < T; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return row[a].get<double>() > row[b].get<double>(); });
      std::string line;
      for (size_t i = 0; i < std::min<size_t>(3, T); ++i)
        line += fmt::format("  {}:{:<4} {:.2f}", order[i], "\"" + printable(r["text"][order[i]].get<std::string>()) + "\"",
                            row[order[i]].get<double>());
      std::printf("  h.%lld head %d:%s\n", static_cast<long long>(layer["layer"].get<int64_t>()), h++, line.c_str());
    }
  }
  const size_t show = std::min<size_t>(T, 8);
  std::printf("\nlogit lens: top-1 next token (probability) from each layer's residual stream, last %zu positions\n", show);
  std::printf("%-10s", "layer");
  for (size_t t = T - show; t < T; ++t) std::printf(" %-11s", ("\"" + printable(r["text"][t].get<std::string>()) + "\"").c_str());
  std::printf("\n");
  for (const auto& l : r["logit_lens"]) {
    std::printf("%-10s", l["layer"].get<std::string>().c_str());
    for (size_t t = T - show; t < T; ++t) {
      const auto& top = l["top"][t][0];
      std::printf(" %-11s", fmt::format("{:.5} {:.2f}", "\"" + printable(top["text"].get<std::string>()) + "\"",
                                         top["p"].get<double>()).c_str());
    }
    std::printf("\n");
  }
}

int run_compare(const CmdArgs& a, InspectModel& ma, const std::vector<int32_t>& ids, bool json) {
  const double atol = a.get_double("--atol", 1e-4), rtol = a.get_double("--rtol", 1e-3);
  if (!(atol >= 0) || !(rtol >= 0)) return a.usage("--atol and --rtol must be >= 0");
  // B runs at its own precision (its run's model.precision; f32 for safetensors): --precision f16 with an export
  // as B shows where f16 storage departs from f32.
  InspectModel mb = load_inspect_model(a.get("--compare", ""), "", &ma);
  ALPHA_CHECK(mb.model->config().vocab_size == ma.model->config().vocab_size &&
                  static_cast<int64_t>(ids.size()) <= mb.model->config().block_size,
              CheckpointError, "[inspect] {} does not fit the prompt of {} (vocab_size {} vs {}, block_size {})",
              mb.what, ma.what, mb.model->config().vocab_size, ma.model->config().vocab_size, mb.model->config().block_size);
  const CompareResult c = compare_activations(record_forward(*ma.model, ids), record_forward(*mb.model, ids), atol, rtol);
  if (json) {
    nlohmann::json j = {{"a", ma.what}, {"b", mb.what}, {"tokens", ids}, {"atol", atol}, {"rtol", rtol},
                        {"differ", c.differ}, {"first", c.first}, {"max_abs_diff", c.max_abs_diff}, {"detail", c.detail}};
    j["per_tensor"] = nlohmann::json::array();
    for (const auto& [n, d] : c.per_tensor) j["per_tensor"].push_back({{"name", n}, {"max_abs_diff", d}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("A: %s\nB: %s\n%zu prompt tokens, tolerance |a - b| <= %g + %g |b|\n", ma.what.c_str(), mb.what.c_str(),
                ids.size(), atol, rtol);
    for (const auto& [n, d] : c.per_tensor) std::printf("  %-18s max |a - b| %.3g\n", n.c_str(), d);
    if (c.differ)
      std::printf("first difference: %s: %s\n", c.first.c_str(),
                  c.detail.empty() ? fmt::format("max |a - b| {:.6g}", c.max_abs_diff).c_str() : c.detail.c_str());
    else
      std::printf("all %zu activations agree (max |a - b| %.3g)\n", c.per_tensor.size(), c.max_abs_diff);
  }
  return c.differ ? kExitDiffer : kExitOk;
}

}  // namespace

int cmd_inspect(const std::vector<std::string>& args) {
  // --json takes no value: rewritten to "--json=1" before parsing.
  std::vector<std::string> fixed;
  for (const std::string& s : args) fixed.push_back(s == "--json" ? "--json=1" : s);
  const CmdArgs a("inspect", fixed,
                  {"--prompt", "--json", "--top-k", "--device", "--precision", "--save", "--compare", "--atol", "--rtol"});
  if (a.help) {
    std::fputs(kInspectHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return a.usage(a.error);
  if (a.positional.size() != 1) return a.usage("inspect needs exactly one MODEL (checkpoint, run dir or .safetensors)");
  if (!a.values.count("--prompt") || a.get("--prompt", "").empty()) return a.usage("inspect needs --prompt TEXT");
  const bool json = a.values.count("--json") > 0;
  const std::string precision = a.get("--precision", ""), prompt = a.get("--prompt", "");
  if (!precision.empty() && precision != "f32" && precision != "f16") return a.usage("--precision must be f32 or f16");
  int64_t top_k = 5;
  try {
    top_k = a.get_int("--top-k", 5, 1);
    a.get_double("--atol", 0);
    a.get_double("--rtol", 0);
  } catch (const CmdArgError& e) {
    return a.usage(e.what());
  }
  DeviceScope scope(a.get("--device", "cpu"));
  InspectModel m = load_inspect_model(a.positional[0], precision, nullptr);
  ALPHA_CHECK(m.tok != nullptr, CheckpointError, "[inspect] \"{}\" records no tokenizer to encode the prompt with",
              a.positional[0]);
  std::vector<int32_t> ids;
  try {
    ids = m.tok->encode(prompt);
  } catch (const ValueError& e) {
    return a.usage(std::string("the prompt cannot be encoded with the model's tokenizer: ") + e.what());
  }
  if (ids.empty()) return a.usage("the prompt encodes to no tokens");
  const auto block = static_cast<size_t>(m.model->config().block_size);
  if (ids.size() > block) {
    std::fprintf(stderr, "note: the prompt is %zu tokens; inspecting its last %zu (block_size)\n", ids.size(), block);
    ids.erase(ids.begin(), ids.end() - static_cast<int64_t>(block));
  }
  if (a.values.count("--compare")) return run_compare(a, m, ids, json);

  const Tokenizer& tok = *m.tok;
  nlohmann::json report =
      inspect_report(*m.model, ids, top_k, [&](int32_t t) { return tok.decode(std::vector<int32_t>{t}); });
  report["source"] = m.what;
  const std::string save = a.get("--save", m.run_dir.empty() ? "" : (fs::path(m.run_dir) / "inspect.json").string());
  if (!save.empty()) {
    write_file_atomic(save, report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    std::fprintf(stderr, "saved %s (alpha dash shows its attention maps and logit lens)\n", save.c_str());
  }
  if (json) std::printf("%s\n", report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  else print_table(m, report);
  return kExitOk;
}

}  // namespace alpha
