// Data-parallel training end to end (issue 17): `mpirun -np 2 alpha train` against one process.
//  - equivalence: 2 ranks x batch B and 1 process x grad_accum 2 x B give the same loss curve (1e-6 relative,
//    50 steps) and eval losses, on the CPU and on a Vulkan device (lavapipe in CI, every op on the GPU), also
//    with the GPU optimizer (f16 AdamW, Muon);
//  - 2 ranks reproduce their own bits run to run, and an interrupted + resumed 2-rank run equals a straight one;
//  - faults: a rank killed by SIGKILL, a rank that throws, and a rank that hangs (watchdog) all end the job
//    with a non-zero status within seconds, and the checkpoint `latest` names loads and is complete.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "core/rng.h"
#include "tests/test_util.h"

using namespace alpha;
using namespace alpha::test;

namespace {

// A deterministic word soup (no external data): enough tokens for random windows.
std::string corpus() {
  static const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and",
                                "then", "sleeps", "under", "tree", "while", "birds", "sing", "loudly"};
  Rng rng(42);
  std::string s;
  for (int i = 0; i < 6000; ++i) {
    s += words[rng.below(18)];
    s += (rng.below(9) == 0) ? ".\n" : " ";
  }
  return s;
}

struct Run {
  int status = -1;  // exit status of the shell command (mpirun or alpha)
  double seconds = 0;
};

// Runs `alpha train` (ranks = 0: no mpirun) with a tiny model; extra is appended to the command line.
Run train(const fs::path& dir, const std::string& out, int ranks, const std::string& extra,
          const std::string& env = "") {
  const fs::path cfg = dir / "config.json";
  if (!fs::exists(cfg)) {
    write_file(dir / "corpus.txt", corpus());
    nlohmann::json j = {
        {"seed", 7},
        {"device", "cpu"},
        {"model", {{"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}, {"block_size", 32}, {"dropout", 0.0}}},
        {"data", {{"path", (dir / "corpus.txt").string()}, {"tokenizer", "char"}}},
        {"train", {{"batch_size", 4}, {"grad_accum", 1}, {"max_steps", 50}, {"eval_interval", 25},
                   {"eval_iters", 4}, {"log_interval", 1}, {"sample_tokens", 0}}},
        {"optim", {{"lr", 3e-3}, {"warmup_steps", 5}, {"decay_steps", 50}}},
        {"checkpoint", {{"interval", 10}}}};
    write_file(cfg, j.dump(2));
  }
  std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ALPHA_NUM_THREADS=1 " + env +
                    " timeout 120 ";
  if (ranks > 0) cmd += std::string(ALPHA_MPIEXEC) + " -np " + std::to_string(ranks) + " --oversubscribe ";
  cmd += std::string(ALPHA_BINARY) + " train " + cfg.string() + " --quiet --set out_dir=" + (dir / out).string() +
         " " + extra + " > " + (dir / (out + ".log")).string() + " 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
  return r;
}

std::string log_of(const fs::path& dir, const std::string& out) { return read_file(dir / (out + ".log")); }

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return m;
}

// tol: the losses' relative difference allowed. Grad accumulation and the all-reduce add a tied weight's
// contributions in another association; f16 copies of the weights turn those last-bit differences into rare f16
// rounding flips (~1e-5 of the loss over 50 steps), f32 runs stay within ~1e-7.
// steps: the run's length (50 by default; evals at its half and end, a checkpoint every 10 steps): the lavapipe runs
// with the GPU optimizer take 20 and keep every check (46 -> 27 s for their test case; the slowest of the ASan pass).
void check_equivalence(const std::string& device_args_in, double tol = 1e-6, int steps = 50) {
  TempDir dir("alpha_mpi_eq");
  const std::string device_args = device_args_in + fmt::format(" --set train.max_steps={} --set train.eval_interval={}"
                                                                " --set optim.decay_steps={}", steps, steps / 2, steps);
  REQUIRE(train(dir.path, "one", 0, "--set train.grad_accum=2 " + device_args).status == 0);
  const Run two = train(dir.path, "two", 2, device_args);
  REQUIRE_MESSAGE(two.status == 0, log_of(dir.path, "two"));
  const auto l1 = records(dir.path / "one/metrics.jsonl", "step", "loss");
  const auto l2 = records(dir.path / "two/metrics.jsonl", "step", "loss");
  REQUIRE(l1.size() == size_t(steps));
  REQUIRE(l2.size() == size_t(steps));
  CHECK(l1.front() != l1.back());  // it trains
  MESSAGE("max relative loss difference over " << steps << " steps (" << device_args << "): " << max_rel(l1, l2));
  CHECK(max_rel(l1, l2) <= tol);
  const auto v1 = records(dir.path / "one/metrics.jsonl", "eval", "val_loss");
  const auto v2 = records(dir.path / "two/metrics.jsonl", "eval", "val_loss");
  REQUIRE(v1.size() == 2);
  CHECK(max_rel(v1, v2) <= tol);
  // Per-rank figures reach the step records (rank 0 writes them).
  const auto recs = of_type(dir.path / "two/metrics.jsonl", "step");
  REQUIRE(recs.back().contains("ranks"));
  CHECK(recs.back()["ranks"].size() == 2);
  CHECK(recs.back()["world_size"] == 2);
  CHECK(recs.back()["allreduce_bytes"].get<int64_t>() > 0);
  CHECK(recs.back()["tokens_seen"] == steps * 2 * 4 * 32);
  // Same N, same bits: a second 2-rank run writes the same losses, and the same final checkpoint.
  REQUIRE(train(dir.path, "two_again", 2, device_args).status == 0);
  CHECK(records(dir.path / "two_again/metrics.jsonl", "step", "loss") == l2);
  const std::string last = fmt::format("ckpt-{:08d}.alph", steps);
  const RunCheckpoint a = load_run_checkpoint((dir.path / "two" / last).string());
  const RunCheckpoint b = load_run_checkpoint((dir.path / "two_again" / last).string());
  CHECK(a.state.data == b.state.data);
  CHECK(read_file(dir.path / "two" / last).size() > 0);
}

}  // namespace

TEST_CASE("2 CPU ranks x B equal 1 process x grad_accum 2 x B, and reproduce their bits") {
  check_equivalence("");
}

TEST_CASE("2 Vulkan ranks (lavapipe in CI) x B equal 1 process x grad_accum 2 x B") {
  // Every op on the Vulkan device (thresholds 0), or lavapipe's size thresholds would keep a tiny model on the CPU.
  check_equivalence("--set device=vulkan --set dispatch.threshold=0 --set dispatch.matmul_threshold=0");
}

TEST_CASE("2 Vulkan ranks with the GPU optimizer (f16 AdamW; Muon) equal 1 process x grad_accum 2") {
  // The all-reduced gradients reach the GPU optimizer from the host; its GPU-summed loss is summed over the ranks.
  const std::string gpu = "--set device=vulkan --set dispatch.threshold=0 --set dispatch.matmul_threshold=0 "
                          "--set optim.device=gpu ";
  check_equivalence(gpu + "--set model.precision=f16", 1e-4, 20);
  check_equivalence(gpu + "--set optim.name=muon", 1e-6, 20);
  // ZeRO's shards are host tensors: refused with a config error, not a wrong run.
  TempDir dir("alpha_mpi_gpu_zero");
  const Run r = train(dir.path, "z", 2, gpu + "--set optim.zero=1");
  CHECK(r.status == 2);
  CHECK(log_of(dir.path, "z").find("\"optim.zero\" 1 shards the host optimizer state") != std::string::npos);
}

TEST_CASE("dropout: each rank takes the single process's dropout stream for its micro-batches") {
  TempDir dir("alpha_mpi_dropout");
  const std::string d = "--set model.dropout=0.2 --set train.max_steps=20";
  REQUIRE(train(dir.path, "one", 0, d + " --set train.grad_accum=4").status == 0);
  REQUIRE(train(dir.path, "two", 2, d + " --set train.grad_accum=2").status == 0);
  const auto l1 = records(dir.path / "one/metrics.jsonl", "step", "loss");
  const auto l2 = records(dir.path / "two/metrics.jsonl", "step", "loss");
  REQUIRE(l1.size() == 20);
  CHECK(max_rel(l1, l2) <= 1e-6);
}

TEST_CASE("a 2-rank run stopped and resumed equals a straight one; the checkpoint is rank-count free") {
  TempDir dir("alpha_mpi_resume");
  REQUIRE(train(dir.path, "straight", 2, "--set train.max_steps=30").status == 0);
  REQUIRE(train(dir.path, "split", 2, "--set train.max_steps=20").status == 0);
  REQUIRE(train(dir.path, "split", 2, "--set train.max_steps=30 --resume").status == 0);
  const auto a = records(dir.path / "straight/metrics.jsonl", "step", "loss");
  const auto b = records(dir.path / "split/metrics.jsonl", "step", "loss");
  REQUIRE(a.size() == 30);
  REQUIRE(b.size() == 30);
  CHECK(a == b);
  // The same checkpoint resumed on 1 process with grad_accum 2 continues the same global batches.
  REQUIRE(train(dir.path, "split", 0, "--set train.max_steps=35 --set train.grad_accum=2 --resume").status == 0);
  CHECK(records(dir.path / "split/metrics.jsonl", "step", "loss").size() == 35);
}

TEST_CASE("a rank killed by SIGKILL ends the job non-zero within seconds; latest is a complete checkpoint") {
  TempDir dir("alpha_mpi_kill");
  const Run r = train(dir.path, "run", 2, "--set train.max_steps=1000", "ALPHA_DIST_INJECT=kill:1:25");
  CHECK(r.status != 0);
  CHECK(r.status != 124);  // not the test's timeout
  CHECK(r.seconds < 30);
  MESSAGE("killed rank: status " << r.status << " after " << r.seconds << " s");
  const std::string latest = find_resume_checkpoint((dir.path / "run").string(), "latest");
  const RunCheckpoint ck = load_run_checkpoint(latest);
  CHECK(ck.state.step == 20);
}

TEST_CASE("a rank that throws ends the job non-zero within seconds, with its error message") {
  TempDir dir("alpha_mpi_throw");
  const Run r = train(dir.path, "run", 2, "--set train.max_steps=1000", "ALPHA_DIST_INJECT=throw:1:5");
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(r.seconds < 30);
  CHECK(log_of(dir.path, "run").find("[dist] rank 1: injected fault at step 5") != std::string::npos);
}

TEST_CASE("a rank that hangs: the others' watchdog ends the job non-zero") {
  TempDir dir("alpha_mpi_hang");
  const Run r = train(dir.path, "run", 2, "--set train.max_steps=1000", "ALPHA_DIST_INJECT=hang:1:5 ALPHA_DIST_TIMEOUT_S=3");
  CHECK(r.status != 0);
  CHECK(r.status != 124);
  CHECK(r.seconds < 40);
  CHECK(log_of(dir.path, "run").find("waited more than 3 s") != std::string::npos);
}

TEST_CASE("optim.zero 1: the same bits as unsharded AdamW, whole checkpoints, half the AdamW state per rank") {
  TempDir dir("alpha_mpi_zero");
  REQUIRE(train(dir.path, "plain", 2, "--set train.max_steps=20").status == 0);
  const Run z = train(dir.path, "zero", 2, "--set train.max_steps=20 --set optim.zero=1");
  REQUIRE_MESSAGE(z.status == 0, log_of(dir.path, "zero"));
  CHECK(records(dir.path / "zero/metrics.jsonl", "step", "loss") ==
        records(dir.path / "plain/metrics.jsonl", "step", "loss"));
  check_same_tensors(ckpt(dir.path / "plain", 20), ckpt(dir.path / "zero", 20));  // params, m, v: rank 0 gathered
  const auto last = of_type(dir.path / "zero/metrics.jsonl", "step").back();
  const int64_t held0 = last["ranks"][0]["adamw_state_bytes"], held1 = last["ranks"][1]["adamw_state_bytes"];
  const int64_t full = of_type(dir.path / "plain/metrics.jsonl", "step").back()["ranks"][0]["adamw_state_bytes"];
  MESSAGE("AdamW state per rank: " << held0 << " and " << held1 << " bytes instead of " << full);
  CHECK(held0 + held1 == full);
  CHECK(held0 < full * 6 / 10);
  CHECK(held1 < full * 6 / 10);
  // Resume a sharded run from its step-10 checkpoint: the same as straight through (re-sharded on load).
  const std::string from10 = (dir.path / "zero" / checkpoint_file_name(10)).string();
  REQUIRE(train(dir.path, "zero", 2, "--set train.max_steps=20 --set optim.zero=1 --resume " + from10).status == 0);
  check_same_tensors(ckpt(dir.path / "plain", 20), ckpt(dir.path / "zero", 20));
}
