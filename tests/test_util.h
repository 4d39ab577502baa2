// Helpers shared by the end-to-end test suites: temporary run folders, files, JSONL, and `alpha` run
// in-process with its stderr captured.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "cli/cli.h"
#include "loop/run_checkpoint.h"

namespace alpha::test {

namespace fs = std::filesystem;

// A fresh folder under /tmp, removed with everything in it when the test ends.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& prefix = "alpha_test") {
    path = fs::temp_directory_path() / (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  static inline int counter = 0;
};

inline void write_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
inline void append_file(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::app) << s; }
inline std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::ifstream f(p);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The `key` values of every record of `type` in a metrics file, in order.
inline std::vector<double> records(const fs::path& metrics, const std::string& type, const std::string& key) {
  std::vector<double> v;
  for (const auto& l : read_jsonl(metrics))
    if (l["type"] == type) v.push_back(l[key].get<double>());
  return v;
}

// Every record of `type` in a metrics file, in order.
inline std::vector<nlohmann::json> of_type(const fs::path& metrics, const std::string& type) {
  std::vector<nlohmann::json> out;
  for (const auto& r : read_jsonl(metrics))
    if (r["type"] == type) out.push_back(r);
  return out;
}

// Sets ALPHA_GUARD_INJECT (train/loop/guard.h's fault hook) for the scope of a test.
struct Inject {
  explicit Inject(const std::string& spec) { setenv("ALPHA_GUARD_INJECT", spec.c_str(), 1); }
  ~Inject() { unsetenv("ALPHA_GUARD_INJECT"); }
  Inject(const Inject&) = delete;
  Inject& operator=(const Inject&) = delete;
};

// Bit-identical f32 tensors (same dtype, shape and bytes).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.contiguous().data<float>(), b.contiguous().data<float>(), a.nbytes()) == 0;
}

// A small repetitive corpus the tiny models learn within a few steps (variant 1: other characters).
inline std::string corpus(int variant = 0) {
  std::string s;
  for (int i = 0; i < 60; ++i)
    s += (variant ? "PACK MY BOX WITH FIVE DOZEN LIQUOR JUGS " : "the quick brown fox jumps over the lazy dog ") +
         std::to_string(i % 7) + "\n";
  return s;
}

// Runs `alpha args...` in-process (argv[0] is added), capturing stderr into `err`.
inline int cli(std::vector<std::string> args, std::string* err = nullptr) {
  args.insert(args.begin(), "alpha");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::fflush(stderr);
  char buf[] = "/tmp/alpha_cli_errXXXXXX";
  const int fd = mkstemp(buf);
  const int saved = dup(2);
  dup2(fd, 2);
  const int rc = run_cli(static_cast<int>(argv.size()), argv.data());
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  if (err) *err = read_file(buf);
  fs::remove(buf);
  return rc;
}

// cfg.json + data.txt for a 1-layer, 16-wide model that trains 12 CPU steps in well under a second.
inline std::string tiny_config(const fs::path& dir, const std::string& extra = "") {
  write_file(dir / "data.txt", corpus());
  const std::string cfg = R"({"out_dir": ")" + (dir / "run").string() + R"(", "seed": 7, "device": "cpu",
    "model": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 8, "dropout": 0.1, "bias": true},
    "data": {"path": ")" + (dir / "data.txt").string() + R"("},
    "train": {"batch_size": 4, "max_steps": 12, "eval_interval": 6, "eval_iters": 2, "sample_tokens": 20},
    "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 12}, "checkpoint": {"interval": 100})" + extra + "}";
  write_file(dir / "cfg.json", cfg);
  return (dir / "cfg.json").string();
}

// Checkpoint `step` of the run in `run` (checkpoint_file_name's ckpt-<step>.alph).
inline RunCheckpoint ckpt(const fs::path& run, int64_t step) {
  return load_run_checkpoint((run / checkpoint_file_name(step)).string());
}

// Params, m and v of two checkpoints are bit-identical, tensor by tensor.
inline void check_same_tensors(const RunCheckpoint& a, const RunCheckpoint& b) {
  REQUIRE(a.file.tensors.size() == b.file.tensors.size());
  for (size_t i = 0; i < a.file.tensors.size(); ++i) {
    CAPTURE(a.file.tensors[i].first);
    CHECK(a.file.tensors[i].first == b.file.tensors[i].first);
    CHECK(same_bytes(a.file.tensors[i].second, b.file.tensors[i].second));
  }
}

}  // namespace alpha::test
