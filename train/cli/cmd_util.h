// Shared by the inference subcommands (sample, eval): option parsing with clear usage errors, and loading a
// checkpoint's model and tokenizer (a damaged tokenizer is a checkpoint error, exit 4).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "cli/cli.h"
#include "model/gpt.h"
#include "loop/run_checkpoint.h"
#include "data/tokenizer.h"

namespace alpha {

struct CmdArgError : Error {
  using Error::Error;
};

// `--name VALUE` / `--name=VALUE` options from `known`, positionals, and --help.
struct CmdArgs {
  std::string cmd, error;
  bool help = false;
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;

  CmdArgs(std::string command, const std::vector<std::string>& args, const std::set<std::string>& known)
      : cmd(std::move(command)) {
    for (size_t i = 0; i < args.size() && error.empty(); ++i) {
      const std::string& a = args[i];
      if (a == "--help" || a == "-h") {
        help = true;
      } else if (a.rfind("--", 0) == 0) {
        const size_t eq = a.find('=');
        const std::string name = a.substr(0, eq);
        if (!known.count(name)) {
          error = "unknown option \"" + a + "\" for " + cmd;
        } else if (eq != std::string::npos) {
          values[name] = a.substr(eq + 1);
        } else if (i + 1 < args.size()) {
          values[name] = args[++i];
        } else {
          error = name + " needs a value";
        }
      } else {
        positional.push_back(a);
      }
    }
  }
  int usage(const std::string& msg) const {
    std::fprintf(stderr, "error: [cli] %s (see alpha %s --help)\n", msg.c_str(), cmd.c_str());
    return kExitUsage;
  }
  std::string get(const std::string& name, const std::string& def) const {
    auto it = values.find(name);
    return it == values.end() ? def : it->second;
  }
  int64_t get_int(const std::string& name, int64_t def, int64_t min) const {
    auto it = values.find(name);
    if (it == values.end()) return def;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || v < min)
      throw CmdArgError(name + " needs an integer >= " + std::to_string(min) + ", got \"" + it->second + "\"");
    return v;
  }
  double get_double(const std::string& name, double def) const {
    auto it = values.find(name);
    if (it == values.end()) return def;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0') throw CmdArgError(name + " needs a number, got \"" + it->second + "\"");
    return v;
  }
};

struct LoadedModel {
  RunCheckpoint ck;
  std::unique_ptr<Tokenizer> tokenizer;
  GPT model;
};

// `path` is a checkpoint file or a run's out_dir (its `latest` checkpoint).
inline LoadedModel load_model_for_inference(const std::string& arg) {
  const std::string path = std::filesystem::is_directory(arg) ? find_resume_checkpoint(arg, "latest") : arg;
  RunCheckpoint ck = load_run_checkpoint(path);
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = tokenizer_from_json(ck.tokenizer);
  } catch (const ValueError& e) {
    throw CheckpointError(fmt::format("[checkpoint] \"{}\": bad tokenizer: {}", path, e.what()));
  }
  Rng unused(0);
  GPT model(ck.model, unused);
  restore_run(ck, model, nullptr);
  return LoadedModel{std::move(ck), std::move(tok), std::move(model)};
}

}  // namespace alpha
