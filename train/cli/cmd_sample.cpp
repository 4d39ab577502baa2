// `alpha sample CHECKPOINT --prompt "..." ...`: streams text from a trained model to stdout, token by token,
// with the tokenizer stored in the checkpoint (sampling can never mismatch the vocabulary it was trained on).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/cmd_util.h"
#include "loop/device.h"
#include "loop/run_checkpoint.h"
#include "model/sample.h"

namespace alpha {

namespace {

constexpr const char* kSampleHelp = R"(usage: alpha sample CHECKPOINT [--prompt TEXT] [--max-new-tokens N] [--temperature T] [--top-k K]
                    [--top-p P] [--seed S] [--device cpu|auto|vulkan|vulkan:N]

Generates text from the model in CHECKPOINT (an ALPH checkpoint, or a run's out_dir for its latest one) with the tokenizer stored in it. The prompt is
printed first, then each new token as it is generated. A KV cache makes each new token cost one position.
defaults: --prompt "" (starts from token 0), --max-new-tokens 200, --temperature 1 (0 = greedy), --top-k 0 (all),
          --top-p 1 (all), --seed 1337, --device cpu. The same seed and options give the same text.
exit codes: 0 ok, 1 runtime error, 2 usage error (bad option or a prompt the tokenizer cannot encode),
            4 checkpoint error
)";

}  // namespace

int cmd_sample(const std::vector<std::string>& args) {
  CmdArgs a("sample", args, {"--prompt", "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed", "--device"});
  if (a.help) {
    std::fputs(kSampleHelp, stdout);
    return kExitOk;
  }
  if (!a.error.empty()) return a.usage(a.error);
  if (a.positional.size() != 1) return a.usage("sample needs exactly one CHECKPOINT");
  SampleOptions so;
  uint64_t seed = 1337;
  std::string prompt, device = "cpu";
  try {
    prompt = a.get("--prompt", "");
    device = a.get("--device", "cpu");
    so.max_new_tokens = a.get_int("--max-new-tokens", 200, 0);
    so.temperature = a.get_double("--temperature", 1.0);
    so.top_k = a.get_int("--top-k", 0, 0);
    so.top_p = a.get_double("--top-p", 1.0);
    seed = static_cast<uint64_t>(a.get_int("--seed", 1337, 0));
  } catch (const CmdArgError& e) {
    return a.usage(e.what());
  }
  if (!(so.temperature >= 0 && std::isfinite(so.temperature)))
    return a.usage("--temperature must be a finite number >= 0");
  if (!(so.top_p > 0 && so.top_p <= 1)) return a.usage("--top-p must be in (0, 1]");

  const LoadedModel lm = load_model_for_inference(a.positional[0]);
  std::vector<int32_t> ids;
  try {
    ids = lm.tokenizer->encode(prompt);
  } catch (const ValueError& e) {
    return a.usage(std::string("the prompt cannot be encoded with the checkpoint's tokenizer: ") + e.what());
  }
  DeviceScope scope(device);
  Rng rng(seed);
  // Streams the decoded text: decode everything so far and print what is new, holding back a trailing U+FFFD
  // (a multi-byte character split across byte-level BPE tokens) until the next token completes it.
  std::vector<int32_t> all = ids;
  size_t emitted = all.size();  // tokens whose text is on stdout
  std::string printed = lm.tokenizer->decode(ids);
  std::fwrite(printed.data(), 1, printed.size(), stdout);
  std::fflush(stdout);
  auto emit = [&](bool final) {
    std::string text = lm.tokenizer->decode(all);
    const std::string repl = "\xEF\xBF\xBD";
    if (!final && text.size() >= repl.size() && text.compare(text.size() - repl.size(), repl.size(), repl) == 0) return;
    std::string fresh = text.compare(0, printed.size(), printed) == 0
                            ? text.substr(printed.size())
                            : lm.tokenizer->decode(std::vector<int32_t>(all.begin() + static_cast<int64_t>(emitted), all.end()));
    std::fwrite(fresh.data(), 1, fresh.size(), stdout);
    std::fflush(stdout);
    printed = std::move(text);
    emitted = all.size();
  };
  generate(lm.model, ids, so, rng, [&](int32_t t) {
    all.push_back(t);
    emit(false);
  });
  emit(true);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace alpha
