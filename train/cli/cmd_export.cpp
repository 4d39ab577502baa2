// `alpha export CHECKPOINT --format safetensors OUT`: a training checkpoint's model weights as a GPT-2-named
// safetensors file (train/checkpoint/safetensors.h says what is written), with the model config and tokenizer as metadata.
// `alpha export CHECKPOINT --hf DIR`: a Hugging Face model directory (train/checkpoint/hf.h).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "loop/run_checkpoint.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"

namespace alpha {

namespace {

constexpr const char* kExportHelp = R"(usage: alpha export CHECKPOINT --format safetensors OUT
       alpha export CHECKPOINT --hf DIR

Writes the model weights of CHECKPOINT (an ALPH checkpoint, e.g. OUT_DIR/ckpt-00001000.alph) to OUT in the
safetensors format with GPT-2 (Hugging Face) tensor names: wte.weight, wpe.weight, h.N.ln_1.weight,
h.N.attn.c_attn.weight (Conv1D layout: transposed, (in, out)), ..., ln_f.bias. Models trained with
model.bias = false get all-zero biases. The file loads with `"init_from": "OUT"` in a config.

--hf DIR writes a Hugging Face model directory that transformers loads as GPT2LMHeadModel: model.safetensors
(GPT2LMHeadModel names, transformer.h.N.attn.c_attn.weight ...), config.json (GPT2Config keys) and, for gpt2
and bpe tokenizers, vocab.json + merges.txt + tokenizer_config.json. It loads with `"init_from": "DIR"`.
exit codes: 0 ok, 1 runtime error, 2 usage error, 4 checkpoint error
)";

int usage(const std::string& msg) {
  std::fprintf(stderr, "error: [cli] %s (see alpha export --help)\n", msg.c_str());
  return kExitUsage;
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  std::string format, hf_dir;
  std::vector<std::string> pos;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(kExportHelp, stdout);
      return kExitOk;
    } else if (args[i] == "--format") {
      if (i + 1 >= args.size()) return usage("--format needs a value");
      format = args[++i];
    } else if (args[i].rfind("--format=", 0) == 0) {
      format = args[i].substr(9);
    } else if (args[i] == "--hf") {
      if (i + 1 >= args.size()) return usage("--hf needs a directory");
      hf_dir = args[++i];
    } else if (args[i].rfind("--hf=", 0) == 0) {
      hf_dir = args[i].substr(5);
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usage("unknown option \"" + args[i] + "\" for export");
    } else {
      pos.push_back(args[i]);
    }
  }
  if (!hf_dir.empty()) {
    if (!format.empty()) return usage("--hf and --format exclude each other");
    if (pos.size() != 1) return usage("export --hf DIR needs CHECKPOINT alone");
  } else {
    if (pos.size() != 2) return usage("export needs CHECKPOINT and OUT");
    if (format != "safetensors") return usage("--format must be safetensors (got \"" + format + "\")");
  }
  const RunCheckpoint ck = load_run_checkpoint(pos[0]);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = tokenizer_from_json(ck.tokenizer);
  } catch (const ValueError& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad tokenizer: {}", pos[0], e.what()));
  }
  Rng unused(0);
  GPT model(ck.model, unused);
  restore_run(ck, model, nullptr);
  const std::string& out = hf_dir.empty() ? pos[1] : hf_dir;
  if (hf_dir.empty()) export_safetensors(out, model, tok.get());
  else export_hf(out, model, tok.get());
  std::fprintf(stderr, "exported step %lld of %s to %s\n", static_cast<long long>(ck.state.step), pos[0].c_str(),
               out.c_str());
  return kExitOk;
}

}  // namespace alpha
