// Determinism (issue 9): same seed, same device -> bit-identical parameters and Adam moments after 200 steps
// (CPU and lavapipe with every op on the GPU); every reduction kernel gives identical bits on repeated runs;
// no shader uses atomics (whose ordering would make float sums run-dependent).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "checkpoint/checkpoint.h"
#include "cli/cli.h"
#include "loop/run_checkpoint.h"
#include "tests/test_util.h"
#include "tests/vk_test_util.h"

using namespace alpha;
using namespace alpha::test;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSteps = 200;

// Trains kSteps from `seed` in a fresh folder and returns its final checkpoint (dropout on: the RNG streams count).
// gpu_steps: step records whose backend ran most ops on the GPU.
RunCheckpoint train(const std::vector<std::string>& sets, int seed, std::vector<double>* losses,
                    int64_t* gpu_steps = nullptr) {
  TempDir d;
  std::vector<std::string> args = {"train", tiny_config(d.path), "--quiet", "--set", "seed=" + std::to_string(seed),
                                   "--set", "train.max_steps=" + std::to_string(kSteps), "--set",
                                   "train.eval_interval=100", "--set", "optim.decay_steps=200", "--set",
                                   "train.sample_tokens=0", "--set", "checkpoint.interval=1000"};
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  std::string err;
  REQUIRE_MESSAGE(cli(args, &err) == kExitOk, err);
  *losses = records(d.path / "run" / "metrics.jsonl", "step", "loss");
  if (gpu_steps) {
    *gpu_steps = 0;
    for (const auto& l : read_jsonl(d.path / "run" / "metrics.jsonl"))
      if (l["type"] == "step" && l.contains("backend"))
        *gpu_steps += l["backend"]["gpu_ops"].get<int64_t>() > 0 && l["backend"]["gpu_op_fraction"].get<double>() > 0.5;
  }
  return load_run_checkpoint((d.path / "run" / checkpoint_file_name(kSteps)).string());
}

// Number of tensors (params, m, v) whose bytes differ; -1 when the checkpoints do not even list the same tensors.
int differing_tensors(const RunCheckpoint& a, const RunCheckpoint& b) {
  if (a.file.tensors.size() != b.file.tensors.size()) return -1;
  int n = 0;
  for (size_t i = 0; i < a.file.tensors.size(); ++i) {
    if (a.file.tensors[i].first != b.file.tensors[i].first) return -1;
    n += !same_bytes(a.file.tensors[i].second, b.file.tensors[i].second);
  }
  return n;
}

void check_two_runs(const std::vector<std::string>& sets, const std::string& device) {
  std::vector<double> la, lb, lc;
  int64_t gpu_steps = 0;
  const RunCheckpoint a = train(sets, 5, &la, &gpu_steps), b = train(sets, 5, &lb);
  if (device != "cpu") CHECK(gpu_steps == kSteps);  // it really ran on the GPU
  REQUIRE(la.size() == static_cast<size_t>(kSteps));
  CHECK(la == lb);
  const int diff = differing_tensors(a, b);
  MESSAGE(device << ": 2 runs x " << kSteps << " steps, seed 5: " << a.file.tensors.size() << " tensors (params, m, v), "
                 << diff << " differ");
  CHECK(diff == 0);
  CHECK(a.file.tensors.size() >= 3);
  // Control: another seed changes them, so the comparison above can fail.
  const RunCheckpoint c = train(sets, 6, &lc);
  CHECK(differing_tensors(a, c) > 0);
}

// Bit-identical tensors of any dtype.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  const auto va = ca.to_f64_vector(), vb = cb.to_f64_vector();
  return std::memcmp(va.data(), vb.data(), va.size() * sizeof(double)) == 0;
}

std::string strip_comments(const std::string& s) {
  static const std::regex comments(R"(//[^\n]*|/\*[\s\S]*?\*/)");
  return std::regex_replace(s, comments, " ");
}

}  // namespace

TEST_CASE("determinism, CPU: 2 runs x 200 steps with the same seed give bit-identical params, m and v") {
  check_two_runs({"device=cpu"}, "cpu");
}

TEST_CASE("determinism, lavapipe (every op on the GPU): 2 runs x 200 steps give bit-identical params, m and v") {
  check_two_runs({"device=vulkan", "dispatch.threshold=0", "dispatch.matmul_threshold=0"}, "lavapipe");
}

TEST_CASE("determinism: every GPU reduction kernel gives identical bits on 3 repeated runs") {
  using namespace alpha::vktest;
  GpuScope g;
  const Tensor x = randn({300, 700}, 1), dy = randn({300, 700}, 2);
  const Tensor w = randn({700}, 3), b = randn({700}, 4);
  std::vector<int32_t> tv(300), iv(2000);
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<int32_t>((i * 37) % 700);
  for (size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<int32_t>((i * 13) % 50);  // many repeats per row
  const Tensor targets = Tensor::from_vector(tv, {300}), idx = Tensor::from_vector(iv, {2000});
  const Tensor demb = randn({2000, 64}, 5);
  const Tensor a = randn({96, 3000}, 6), bm = randn({3000, 80}, 7);

  // Each case: its outputs, computed from scratch on the GPU.
  const std::vector<std::pair<std::string, std::function<std::vector<Tensor>()>>> cases = {
      {"sum over rows (dim 0)", [&] { return std::vector<Tensor>{ops::sum(x, 0)}; }},
      {"sum over columns (dim 1)", [&] { return std::vector<Tensor>{ops::sum(x, 1)}; }},
      {"layernorm backward dx, dw, db", [&] {
         const auto f = ops::layernorm(x, w, b, 1e-5);
         const auto gr = ops::layernorm_backward(dy, x, w, f.mean, f.rstd, true);
         return std::vector<Tensor>{f.y, gr.dx, gr.dw, gr.db};
       }},
      {"cross-entropy loss, lse and backward", [&] {
         const auto f = ops::cross_entropy(x, targets);
         return std::vector<Tensor>{f.loss, f.lse, ops::cross_entropy_backward(x, targets, f.lse, 1.0, f.count)};
       }},
      {"embedding backward (repeated rows)", [&] { return std::vector<Tensor>{ops::embedding_backward(demb, idx, 50)}; }},
      {"softmax and softmax backward", [&] {
         const Tensor y = ops::softmax(x, false);
         return std::vector<Tensor>{y, ops::softmax_backward(dy, y)};
       }},
      {"matmul (K = 3000)", [&] { return std::vector<Tensor>{ops::matmul(a, bm)}; }},
  };
  for (const auto& [name, run] : cases) {
    CAPTURE(name);
    const int64_t before = dispatch_stats().gpu_ops;
    const auto first = run();
    CHECK_MESSAGE(dispatch_stats().gpu_ops > before, "did not run on the GPU");
    for (int rep = 0; rep < 2; ++rep) {
      const auto again = run();
      REQUIRE(again.size() == first.size());
      for (size_t i = 0; i < first.size(); ++i) CHECK_MESSAGE(same_bits(first[i], again[i]), "output " << i);
    }
  }
  MESSAGE(cases.size() << " reduction cases x 3 runs on the GPU: identical bits");
  expect_clean();
}

TEST_CASE("determinism: no shader under spirv/ adds with atomics (only uint arrival counters pick a last workgroup)") {
  const fs::path dir = fs::path(ALPHA_SOURCE_DIR) / "spirv";
  static const std::regex atomic_call(R"(\batomic\w*\s*\(|GL_EXT_shader_atomic)");
  // The one allowed form: a workgroup counts its arrival on a uint counter, and the last one to arrive does a
  // fixed-order sum (sum.comp); which workgroup that is changes no bit of the result.
  static const std::regex counter_call(R"(atomicAdd\s*\(\s*counters\s*\[[^\]]*\]\s*,\s*1u\s*\))");
  static const std::regex counter_decl(R"(buffer\s+\w+\s*\{\s*uint\s+counters\s*\[\s*\]\s*;\s*\})");
  int files = 0, hits = 0, counters = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".comp" && ext != ".glsl") continue;
    ++files;
    const std::string code = strip_comments(read_file(e.path()));
    const bool declares_counters = std::regex_search(code, counter_decl);
    for (auto it = std::sregex_iterator(code.begin(), code.end(), atomic_call); it != std::sregex_iterator(); ++it) {
      const std::string rest = code.substr(static_cast<size_t>(it->position()), 64);
      if (declares_counters && std::regex_search(rest, counter_call, std::regex_constants::match_continuous)) {
        ++counters;
        continue;
      }
      ++hits;
      FAIL_CHECK(e.path().filename().string() << " uses " << it->str());
    }
  }
  MESSAGE(files << " shader sources scanned, " << hits << " atomics, " << counters << " arrival counters");
  CHECK(files >= 10);
  CHECK(hits == 0);
  CHECK(counters == 1);  // sum.comp LAST
  // The scan itself finds an atomic (so the zero above can fail), and ignores one in a comment.
  const std::string probe = strip_comments("// atomicAdd(x, 1) in a comment\nvoid f() { atomicAdd(buf[0], 1.0); }");
  CHECK(std::distance(std::sregex_iterator(probe.begin(), probe.end(), atomic_call), std::sregex_iterator()) == 1);
}
