// optim.device "gpu" in the trainer: tiny GPT runs on lavapipe with the GPU AdamW against the CPU AdamW (losses,
// params, exact resume, one host read per step), the guard's skip of a non-finite update, and f16 loss scaling.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend.h"
#include "test_util.h"
#include "cli/cli.h"
#include "loop/guard.h"
#include "loop/run_checkpoint.h"
#include "vk_test_util.h"

using namespace alpha;
using vktest::rel_err;
using namespace alpha::test;

namespace {

// Params of a finished run's checkpoint, by name.
std::vector<std::pair<std::string, Tensor>> checkpoint_tensors(const fs::path& run, int64_t step) {
  return load_run_checkpoint((run / checkpoint_file_name(step)).string()).file.tensors;
}

const std::vector<std::string> kGpuRun = {"--set", "device=vulkan", "--set", "dispatch.threshold=0", "--set",
                                          "dispatch.matmul_threshold=0", "--set", "train.log_interval=1"};

int train(const TempDir& d, std::vector<std::string> sets, std::string* err) {
  std::vector<std::string> args = {"train", tiny_config(d.path), "--quiet"};
  args.insert(args.end(), kGpuRun.begin(), kGpuRun.end());
  for (const auto& s : sets) args.insert(args.end(), {"--set", s});
  return cli(args, err);
}

// Two runs' step losses, CPU and GPU optimizer: n each, equal within 1e-5 relative, and falling (it learned).
void check_losses_match(const fs::path& ma, const fs::path& mb, size_t n) {
  const auto la = records(ma, "step", "loss"), lb = records(mb, "step", "loss");
  REQUIRE(la.size() == n);
  REQUIRE(lb.size() == n);
  for (size_t i = 0; i < la.size(); ++i) CHECK(std::abs(la[i] - lb[i]) <= 1e-5 * std::abs(la[i]));
  CHECK(la.back() < la.front() - 0.1);
}

}  // namespace

TEST_CASE("optim.device gpu: a tiny GPT trains 20 steps on lavapipe like optim.device cpu, one host read per step") {
  TempDir a, b;
  std::string err;
  // No inspect records: an inspected step (here the last) reads activations and parameters back by design.
  const std::vector<std::string> common = {"train.max_steps=20", "train.eval_interval=100", "optim.decay_steps=20",
                                           "train.sample_tokens=0", "metrics.inspect_interval=0"};
  auto with = [&](std::string dev) {
    std::vector<std::string> s = common;
    s.push_back("optim.device=" + dev);
    return s;
  };
  REQUIRE_MESSAGE(train(a, with("cpu"), &err) == kExitOk, err);
  REQUIRE_MESSAGE(train(b, with("gpu"), &err) == kExitOk, err);
  const fs::path ma = a.path / "run" / "metrics.jsonl", mb = b.path / "run" / "metrics.jsonl";
  check_losses_match(ma, mb, 20);
  const auto ga = records(ma, "step", "grad_norm"), gb = records(mb, "step", "grad_norm");
  for (size_t i = 0; i < ga.size(); ++i) CHECK(std::abs(ga[i] - gb[i]) <= 1e-4 * ga[i]);
  const auto ta = checkpoint_tensors(a.path / "run", 20), tb = checkpoint_tensors(b.path / "run", 20);
  REQUIRE(ta.size() == tb.size());
  double worst = 0;
  int identical = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    CAPTURE(ta[i].first);
    CHECK(ta[i].first == tb[i].first);
    CHECK(rel_err(tb[i].second, ta[i].second) <= 1e-4);
    worst = std::max(worst, rel_err(tb[i].second, ta[i].second));
    identical += same_bytes(tb[i].second, ta[i].second);
  }
  MESSAGE("after 20 steps: " << identical << " of " << ta.size() << " tensors bit-identical, worst rel err " << worst);
  CHECK(identical * 10 >= static_cast<int>(ta.size()) * 9);
  // Host reads and bytes per step (the first step uploads the model, so look at the steady state).
  int64_t up[2] = {0, 0}, down[2] = {0, 0}, reads[2] = {0, 0};
  int k = 0;
  for (const fs::path& m : {ma, mb}) {
    std::vector<nlohmann::json> steps;
    for (const auto& l : read_jsonl(m))
      if (l["type"] == "step") steps.push_back(l["backend"]);
    REQUIRE(steps.size() == 20);
    for (size_t i = 1; i < steps.size(); ++i) {
      REQUIRE(steps[i].contains("host_reads"));
      if (k == 1) {
        CHECK(steps[i]["host_reads"].get<int64_t>() == 1);  // the loss + grad norm, read together
        CHECK(steps[i]["bytes_down"].get<int64_t>() == 16);
      }
    }
    up[k] = steps[10]["bytes_up"].get<int64_t>();
    down[k] = steps[10]["bytes_down"].get<int64_t>();
    reads[k] = steps[10]["host_reads"].get<int64_t>();
    ++k;
  }
  MESSAGE("per step, optim.device cpu: " << reads[0] << " host reads, " << up[0] << " B up, " << down[0]
                                         << " B down; gpu: " << reads[1] << " reads, " << up[1] << " B up, " << down[1]
                                         << " B down");
  CHECK(reads[0] > reads[1]);
  CHECK(down[0] > 100 * down[1]);
}

TEST_CASE("optim.device gpu: resume is bit-exact, and checkpoints resume under optim.device cpu too") {
  TempDir a, b, c;
  std::string err;
  const std::vector<std::string> base = {"optim.device=gpu", "train.eval_interval=100", "train.sample_tokens=0",
                                         "train.grad_accum=2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> s = base;
    s.insert(s.end(), extra.begin(), extra.end());
    return s;
  };
  REQUIRE_MESSAGE(train(a, with({"train.max_steps=8"}), &err) == kExitOk, err);
  REQUIRE_MESSAGE(train(b, with({"train.max_steps=3"}), &err) == kExitOk, err);
  std::vector<std::string> args = {"train", (b.path / "cfg.json").string(), "--quiet", "--resume"};
  args.insert(args.end(), kGpuRun.begin(), kGpuRun.end());
  for (const auto& s : with({"train.max_steps=8"})) args.insert(args.end(), {"--set", s});
  REQUIRE_MESSAGE(cli(args, &err) == kExitOk, err);
  CHECK(records(a.path / "run" / "metrics.jsonl", "step", "loss") ==
        records(b.path / "run" / "metrics.jsonl", "step", "loss"));
  const auto ta = checkpoint_tensors(a.path / "run", 8), tb = checkpoint_tensors(b.path / "run", 8);
  REQUIRE(ta.size() == tb.size());
  int moments = 0;
  for (size_t i = 0; i < ta.size(); ++i) {
    CAPTURE(ta[i].first);
    CHECK(ta[i].first == tb[i].first);
    CHECK(same_bytes(ta[i].second, tb[i].second));
    moments += ta[i].first.rfind("adamw.", 0) == 0;
  }
  CHECK(moments > 0);

  // The GPU optimizer's step-3 checkpoint resumed with the CPU AdamW continues like the GPU run.
  fs::copy(b.path / "run" / checkpoint_file_name(3), c.path / "ckpt.alph");
  tiny_config(c.path);
  args = {"train", (c.path / "cfg.json").string(), "--quiet", "--resume", (c.path / "ckpt.alph").string()};
  args.insert(args.end(), kGpuRun.begin(), kGpuRun.end());
  std::vector<std::string> cpu_sets = base;
  cpu_sets[0] = "optim.device=cpu";
  cpu_sets.push_back("train.max_steps=8");
  for (const auto& s : cpu_sets) args.insert(args.end(), {"--set", s});
  REQUIRE_MESSAGE(cli(args, &err) == kExitOk, err);
  const auto lc = records(c.path / "run" / "metrics.jsonl", "step", "loss");
  const auto la = records(a.path / "run" / "metrics.jsonl", "step", "loss");
  REQUIRE(lc.size() == 5);
  for (size_t i = 0; i < lc.size(); ++i) CHECK(std::abs(lc[i] - la[i + 3]) <= 1e-5 * la[i + 3]);
}

TEST_CASE("optim.device gpu on a CPU run is refused with exit 2") {
  TempDir d;
  std::string err;
  CHECK(cli({"train", tiny_config(d.path), "--quiet", "--set", "optim.device=gpu"}, &err) == kExitUsage);
  CHECK_MESSAGE(err.find("\"optim.device\" is \"gpu\"") != std::string::npos, err);
  CHECK(cli({"train", tiny_config(d.path), "--quiet", "--set", "optim.device=tpu"}, &err) == kExitUsage);
}

TEST_CASE("optim.device gpu, guard skip: a NaN loss or grad at update 6 leaves params, m, v of update 5 bit-identical") {
  for (const std::string spec : {"forward:gelu@6", "backward:matmul@6"}) {
    CAPTURE(spec);
    const bool loss_fault = spec.rfind("forward", 0) == 0;
    Inject inject(spec);
    TempDir g, c;
    std::string err;
    const std::vector<std::string> sets = {"checkpoint.interval=1", "checkpoint.keep_last=100", "train.sample_tokens=0",
                                           "train.eval_interval=100", "guard.policy=skip", "optim.decay_steps=7"};
    auto with = [&](std::vector<std::string> extra) {
      extra.insert(extra.begin(), sets.begin(), sets.end());
      return extra;
    };
    // GPU: 6 updates (the last one bad, so its checkpoint is the final save), then resumed for a 7th.
    REQUIRE_MESSAGE(train(g, with({"optim.device=gpu", "train.max_steps=6"}), &err) == kExitOk, err);
    std::vector<std::string> args = {"train", (g.path / "cfg.json").string(), "--quiet", "--resume"};
    args.insert(args.end(), kGpuRun.begin(), kGpuRun.end());
    for (const auto& s : with({"optim.device=gpu", "train.max_steps=7"})) args.insert(args.end(), {"--set", s});
    REQUIRE_MESSAGE(cli(args, &err) == kExitOk, err);
    REQUIRE_MESSAGE(train(c, with({"optim.device=cpu", "train.max_steps=7"}), &err) == kExitOk, err);
    const fs::path run = g.path / "run";
    const RunCheckpoint c5 = ckpt(run, 5), c6 = ckpt(run, 6), c7 = ckpt(run, 7);
    check_same_tensors(c5, c6);
    CHECK(c5.optimizer_step == 5);
    CHECK(c6.optimizer_step == 5);
    CHECK(c7.optimizer_step == 6);  // training went on
    CHECK(c6.state.step == 6);
    CHECK(c6.state.guard == GuardState{1, 1, 0, 0, 1, 1.0});
    CHECK(c7.state.guard == GuardState{1, 1, 0, 0, 0, 1.0});
    const auto guards = of_type(run / "metrics.jsonl", "guard");
    REQUIRE(guards.size() == 1);
    CHECK(guards[0]["step"] == 6);
    CHECK(guards[0]["event"] == (loss_fault ? "nonfinite_loss" : "nonfinite_grad"));
    CHECK(guards[0]["action"] == "skip");
    const std::string origin = guards[0]["origin"];
    CHECK(origin.rfind(loss_fault ? "forward op 'gelu'" : "backward op 'matmul'", 0) == 0);
    // The CPU AdamW that skipped the same step: same guard record, same params after update 7.
    const auto cguards = of_type(c.path / "run" / "metrics.jsonl", "guard");
    REQUIRE(cguards.size() == 1);
    CHECK(cguards[0]["event"] == guards[0]["event"]);
    CHECK(cguards[0]["action"] == "skip");
    const RunCheckpoint cc7 = ckpt(c.path / "run", 7);
    CHECK(cc7.optimizer_step == 6);
    REQUIRE(cc7.file.tensors.size() == c7.file.tensors.size());
    for (size_t i = 0; i < c7.file.tensors.size(); ++i) {
      CAPTURE(c7.file.tensors[i].first);
      CHECK(rel_err(c7.file.tensors[i].second, cc7.file.tensors[i].second) <= 1e-4);
    }
    const auto steps_g = of_type(run / "metrics.jsonl", "step");
    const auto steps_c = of_type(c.path / "run" / "metrics.jsonl", "step");
    REQUIRE(steps_g.size() == 7);
    REQUIRE(steps_c.size() == 7);
    const double lg = steps_g[6]["loss"].get<double>(), lc = steps_c[6]["loss"].get<double>();
    CHECK(std::abs(lg - lc) <= 1e-5 * lc);
  }
}

TEST_CASE("f16 with optim.device gpu: losses and loss scale as with optim.device cpu; an overflow is skipped") {
  // A NaN gradient of a finite loss at update 5 (the cast back to the f32 masters) is an overflow for the
  // scaler: the update is skipped, the scale halved, and the numerics guard is not involved.
  Inject inject("backward:cast@5");
  TempDir a, b;
  std::string err;
  const std::vector<std::string> sets = {"model.precision=f16",     "train.max_steps=12",   "checkpoint.interval=1",
                                         "checkpoint.keep_last=100", "train.sample_tokens=0", "train.eval_interval=100"};
  for (const char* dev : {"cpu", "gpu"}) {
    std::vector<std::string> s = sets;
    s.push_back(std::string("optim.device=") + dev);
    REQUIRE_MESSAGE(train(dev == std::string("cpu") ? a : b, s, &err) == kExitOk, err);
  }
  const fs::path ma = a.path / "run" / "metrics.jsonl", mb = b.path / "run" / "metrics.jsonl";
  check_losses_match(ma, mb, 12);
  for (const fs::path& m : {ma, mb}) {
    CAPTURE(m);
    const auto scales = records(m, "step", "loss_scale"), skips = records(m, "step", "loss_scale_skips");
    const auto norms = records(m, "step", "grad_norm");
    REQUIRE(scales.size() == 12);
    for (size_t i = 0; i < 12; ++i) {
      CHECK(scales[i] == (i < 4 ? 65536.0 : 32768.0));
      CHECK(skips[i] == (i < 4 ? 0.0 : 1.0));
      CHECK((norms[i] == 0.0) == (i == 4));  // the skipped update's record reads 0
    }
    CHECK(of_type(m, "guard").empty());
  }
  const fs::path rb = b.path / "run";
  check_same_tensors(ckpt(rb, 4), ckpt(rb, 5));
  CHECK(ckpt(rb, 5).optimizer_step == 4);
  const RunCheckpoint ca = ckpt(a.path / "run", 12), cb = ckpt(rb, 12);
  CHECK(cb.optimizer_step == 11);
  CHECK(ca.optimizer_step == 11);
  CHECK(cb.state.loss_scale == LossScaleState{32768.0, 7, 1});
  CHECK(cb.state.loss_scale == ca.state.loss_scale);
  CHECK(cb.state.guard == GuardState{});
  REQUIRE(ca.file.tensors.size() == cb.file.tensors.size());
  for (size_t i = 0; i < ca.file.tensors.size(); ++i) {
    CAPTURE(ca.file.tensors[i].first);
    CHECK(rel_err(cb.file.tensors[i].second, ca.file.tensors[i].second) <= 1e-4);
  }
}

TEST_CASE("train.overlap_steps: the same bits as reading each step at its end, bad steps and a numerics stop too") {
  // With overlap each step's loss and grad norm are read during the next step's forward; a bad step abandons that
  // forward and takes the usual path. Both runs must agree on every record and tensor, down to the bits.
  struct Run {
    std::vector<std::string> sets;
    int rc;
  };
  const std::vector<std::string> f16 = {"model.precision=f16", "train.max_steps=12", "train.sample_tokens=0",
                                        "train.eval_interval=5", "checkpoint.interval=7", "optim.device=gpu",
                                        "metrics.inspect_interval=0"};
  // optim.lr 1e4: the weights blow up within a few steps, the loss goes non-finite; the guard skips such updates
  // and stops the run after 3 in a row.
  std::vector<std::string> blowup = f16;
  for (const char* s : {"optim.lr=1e4", "optim.warmup_steps=0", "guard.max_bad_steps=3", "model.precision=f32"})
    blowup.push_back(s);
  std::vector<std::string> accum = f16;  // two micro-batches: the step before is read before the first one's loss
  accum.push_back("train.grad_accum=2");
  for (const Run& r : {Run{f16, kExitOk}, Run{accum, kExitOk}, Run{blowup, kExitNumerics}}) {
    TempDir a, b;
    std::string err;
    std::vector<std::string> sa = r.sets, sb = r.sets;
    sa.push_back("train.overlap_steps=false");
    sb.push_back("train.overlap_steps=true");
    CHECK(train(a, sa, &err) == r.rc);
    CHECK(train(b, sb, &err) == r.rc);
    const fs::path ma = a.path / "run" / "metrics.jsonl", mb = b.path / "run" / "metrics.jsonl";
    const auto sa_ = of_type(ma, "step"), sb_ = of_type(mb, "step");  // JSON values: a NaN loss is null in both
    CHECK(sa_.size() >= 5);
    REQUIRE(sa_.size() == sb_.size());
    int overlapped = 0;
    for (size_t i = 0; i < sa_.size(); ++i) {
      CHECK(!sa_[i].contains("overlapped"));
      overlapped += sb_[i].value("overlapped", false);
    }
    MESSAGE(overlapped << " of " << sb_.size() << " steps overlapped");
    CHECK(overlapped >= 3);
    for (size_t i = 0; i < sa_.size(); ++i)
      for (const char* key : {"loss", "grad_norm", "lr", "step"}) {
        CAPTURE(key);
        CHECK(sa_[i][key] == sb_[i][key]);
      }
    CHECK(records(ma, "eval", "val_loss") == records(mb, "eval", "val_loss"));
    const auto ga = of_type(ma, "guard"), gb = of_type(mb, "guard");
    CHECK(ga.size() == gb.size());
    for (size_t i = 0; i < std::min(ga.size(), gb.size()); ++i) CHECK(ga[i]["step"] == gb[i]["step"]);
    if (r.rc == kExitOk) {
      CHECK(ga.empty());
      CHECK(records(ma, "step", "loss_scale") == records(mb, "step", "loss_scale"));
      for (int64_t step : {7, 12}) {
        CAPTURE(step);
        const auto ta = checkpoint_tensors(a.path / "run", step), tb = checkpoint_tensors(b.path / "run", step);
        REQUIRE(ta.size() == tb.size());
        for (size_t i = 0; i < ta.size(); ++i) CHECK(same_bytes(ta[i].second, tb[i].second));
      }
    } else {
      CHECK(ga.size() >= 3);  // the bad steps the guard recorded before it stopped
    }
  }
}
