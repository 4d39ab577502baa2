// The numerics guard (issue 9, train/loop/guard.h, docs/reliability.md): the tape names the op behind the first
// non-finite value, the spike detector never sees a NaN, and tiny CPU training runs with injected faults
// (ALPHA_GUARD_INJECT) skip, roll back or stop as configured without damaging params, m, v or checkpoints.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "autograd/check.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "loop/guard.h"
#include "metrics/metrics_read.h"
#include "loop/run_checkpoint.h"
#include "data/tokenizer.h"
#include "loop/trainer.h"
#include "tests/test_util.h"

using namespace alpha;
using namespace alpha::test;
namespace fs = std::filesystem;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor param(const std::vector<float>& v, const Shape& s) {
  Tensor t = Tensor::from_vector(v, s);
  t.set_requires_grad(true);
  return t;
}

// Every line of a guarded run must pass the documented schema (docs/metrics.md), guard records included.
void check_schema(const fs::path& metrics) {
  for (const auto& r : read_jsonl(metrics)) {
    CAPTURE(r.dump());
    CHECK(validate_record(r) == "");
  }
}

Config load(const std::string& cfg_path, const std::vector<std::string>& sets) { return load_config(cfg_path, sets); }

}  // namespace

// ---- the tape names the op ----

TEST_CASE("tape check mode: log of a negative number is named as forward op 'log' (node 1, output f32[2,3])") {
  Tensor x = param({1, 2, 3, 4, -5, 6}, {2, 3});
  ag::CheckFinite check;
  Tensor y = ag::log(ag::scale(x, 2.0));  // node 0: scale, node 1: log
  Tensor loss = ag::sum_all(y);
  ag::backward(loss);
  REQUIRE(check.first().has_value());
  CHECK(check.first()->direction == "forward");
  CHECK(check.first()->op == "log");
  CHECK(check.first()->node == 1);
  CHECK(check.first()->str() == "forward op 'log' (node 1, output f32[2,3])");
}

TEST_CASE("tape check mode: a division by zero is named as forward op 'div' (node 0)") {
  Tensor a = param({1, 2, 3}, {3});
  Tensor b = param({1, 0, 2}, {3});
  ag::CheckFinite check;
  Tensor loss = ag::sum_all(ag::div(a, b));
  REQUIRE(check.first().has_value());
  CHECK(check.first()->str() == "forward op 'div' (node 0, output f32[3])");
  ag::clear_tape();
  (void)loss;
}

TEST_CASE("tape check mode: sqrt(0) is finite forward but its gradient is inf: named as backward op 'sqrt' (node 0)") {
  Tensor x = param({0, 1, 4, 9}, {4});
  ag::CheckFinite check;
  Tensor loss = ag::sum_all(ag::sqrt(x));  // node 0: sqrt, node 1: sum_all
  CHECK(!check.first().has_value());       // the forward is finite
  CHECK(std::isfinite(loss.item()));
  ag::backward(loss);
  REQUIRE(check.first().has_value());
  CHECK(check.first()->direction == "backward");
  CHECK(check.first()->op == "sqrt");
  CHECK(check.first()->node == 0);
  CHECK(check.first()->what == "gradient for input 0 f32[4]");
}

TEST_CASE("tape check mode: a NaN parameter is named as parameter input 1 of the first op that reads it") {
  Tensor x = param({1, 2, 3, 4}, {2, 2});
  Tensor w = param({1, kNaN, 0, 1}, {2, 2});
  ag::CheckFinite check;
  Tensor loss = ag::sum_all(ag::matmul(x, w));
  REQUIRE(check.first().has_value());
  CHECK(check.first()->str() == "forward op 'matmul' (node 0, parameter input 1 f32[2,2])");
  ag::clear_tape();
  (void)loss;
}

TEST_CASE("tape: outside check mode nothing is recorded; an injected NaN poisons a copy, never the viewed tensor") {
  Tensor x = param({1, 2, 3, 4}, {2, 2});
  {
    Tensor loss = ag::sum_all(ag::log(ag::scale(x, -1.0)));  // NaN, but no check scope
    ag::backward(loss);
  }
  ag::CheckFinite check;
  CHECK(!check.first().has_value());  // a new scope starts clean
  ag::inject_nonfinite("transpose", /*backward=*/false);
  Tensor t = ag::transpose(x, 0, 1);  // a view of x: the injection must copy
  ag::clear_injection();
  CHECK(std::isnan(t.to_f64_vector()[0]));
  CHECK(x.to_f64_vector() == std::vector<double>{1, 2, 3, 4});
  REQUIRE(check.first().has_value());
  CHECK(check.first()->op == "transpose");
  ag::clear_tape();
}

// ---- spike detector ----

TEST_CASE("spike detector: NaN and +-inf never enter the window (mean and std of 20 losses unchanged); z > 6 flags") {
  SpikeDetector d(/*window=*/50, /*zscore=*/6.0);
  std::vector<double> seen;
  for (int i = 0; i < 20; ++i) {
    const double l = 2.0 + 0.01 * std::sin(i);
    if (i == 9) CHECK(std::isnan(d.zscore(2.0)));  // 9 losses: still warming up (10 needed)
    d.add(l);
    seen.push_back(l);
  }
  const double m = d.mean(), s = d.stddev();
  double em = 0, ev = 0;  // the test's own statistics over the same values
  for (double v : seen) em += v;
  em /= 20;
  for (double v : seen) ev += (v - em) * (v - em);
  CHECK(m == doctest::Approx(em).epsilon(1e-14));
  CHECK(s == doctest::Approx(std::sqrt(ev / 20)).epsilon(1e-12));
  for (double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) d.add(bad);
  CHECK(d.count() == 20);
  CHECK(d.mean() == m);  // bit-identical: nothing entered
  CHECK(d.stddev() == s);
  CHECK(std::isnan(d.zscore(NAN)));
  CHECK(!d.is_spike(NAN));
  CHECK(!d.is_spike(INFINITY));  // a non-finite loss is the non-finite check's business, not a spike
  CHECK(d.is_spike(2.0 + 7 * s));
  CHECK(!d.is_spike(2.0 + 5 * s));
  CHECK(!d.is_spike(2.0 - 50 * s));  // only upward spikes
}

TEST_CASE("spike detector: the window keeps the last 10 of 30 losses; threshold 0 turns detection off") {
  SpikeDetector d(10, 6.0);
  for (int i = 0; i < 30; ++i) d.add(i < 20 ? 100.0 + i : 1.0 + 0.001 * i);
  CHECK(d.count() == 10);
  CHECK(d.mean() == doctest::Approx(1.0 + 0.001 * 24.5));
  SpikeDetector off(10, 0.0);
  for (int i = 0; i < 10; ++i) off.add(1.0 + 0.001 * i);
  CHECK(!off.is_spike(1e6));
}

// ---- guard decisions ----

TEST_CASE("guard decisions: skip, 3 bad in a row stop (max_bad_steps 3), a good step resets, rollback needs a checkpoint") {
  GuardConfig g;
  g.max_bad_steps = 3;
  NumericsGuard guard(g, GuardState{});
  CHECK(guard.check_update(1, 2.0, 1.0, false).action == GuardAction::apply);
  guard.commit_good(1, 2.0);
  GuardVerdict v = guard.check_update(2, NAN, NAN, false);
  CHECK(v.action == GuardAction::skip);
  CHECK(v.event == "nonfinite_loss");
  CHECK(v.diagnose);
  v = guard.check_update(3, 2.0, INFINITY, false);
  CHECK(v.action == GuardAction::skip);
  CHECK(v.event == "nonfinite_grad");
  CHECK(!v.diagnose);  // only the first of a streak is re-run
  CHECK(guard.state().bad_in_row == 2);
  guard.commit_good(4, 2.0);
  CHECK(guard.state().bad_in_row == 0);
  for (int s = 5; s < 7; ++s) CHECK(guard.check_update(s, NAN, 1.0, false).action == GuardAction::skip);
  CHECK(guard.check_update(7, NAN, 1.0, false).action == GuardAction::stop);
  CHECK(guard.state() == GuardState{5, 4, 0, 0, 3, 1.0});

  g.policy = "rollback";
  g.rollback_lr_factor = 0.5;
  NumericsGuard rb(g, GuardState{});
  CHECK(rb.check_update(1, NAN, 1.0, /*has_checkpoint=*/false).action == GuardAction::skip);
  CHECK(rb.check_update(2, NAN, 1.0, /*has_checkpoint=*/true).action == GuardAction::rollback);
  rb.on_rollback(2);
  CHECK(rb.lr_scale() == 0.5);
  rb.commit_good(1, 2.0);  // redoing a step before the bad one does not end the streak
  CHECK(rb.state().bad_in_row == 2);
  rb.commit_good(3, 2.0);
  CHECK(rb.state().bad_in_row == 0);

  // An update that was applied already (GPU AdamW) cannot be skipped: rollback with a checkpoint, else stop.
  CHECK(rb.check_update(4, NAN, 1.0, true, /*vetoable=*/false).action == GuardAction::rollback);
  NumericsGuard applied(GuardConfig{}, GuardState{});
  CHECK(applied.check_update(1, 2.0, NAN, true, /*vetoable=*/false).action == GuardAction::stop);
}

TEST_CASE("guard decisions: a non-finite parameter stops under skip and stop, rolls back under rollback") {
  std::vector<std::pair<std::string, Tensor>> named = {{"a", Tensor::from_vector(std::vector<float>{1, 2}, {2})},
                                                       {"b", Tensor::from_vector(std::vector<float>{1, kNaN}, {2})}};
  for (const char* policy : {"skip", "stop", "rollback"}) {
    CAPTURE(policy);
    GuardConfig g;
    g.policy = policy;
    NumericsGuard guard(g, GuardState{});
    const GuardVerdict v = guard.check_params(4, named, /*has_checkpoint=*/true);
    CHECK(v.event == "nonfinite_param");
    CHECK(v.detail == "parameter \"b\" f32[2] after the update");
    CHECK(v.action == (std::string(policy) == "rollback" ? GuardAction::rollback : GuardAction::stop));
  }
  GuardConfig every3;
  every3.param_check_interval = 3;
  NumericsGuard g3(every3, GuardState{});
  CHECK(g3.check_params(4, named, true).action == GuardAction::apply);  // 4 is not a multiple of 3
  CHECK(g3.check_params(6, named, true).action == GuardAction::stop);
}

TEST_CASE("guard decisions: a spike (z > 6 after 10 losses) warns and applies, or skips with spike_action skip") {
  for (const char* action : {"warn", "skip"}) {
    CAPTURE(action);
    GuardConfig g;
    g.spike_action = action;
    NumericsGuard guard(g, GuardState{});
    for (int s = 1; s <= 10; ++s) {
      REQUIRE(guard.check_update(s, 2.0 + 0.01 * (s % 3), 1.0, false).action == GuardAction::apply);
      guard.commit_good(s, 2.0 + 0.01 * (s % 3));
    }
    const GuardVerdict v = guard.check_update(11, 5.0, 1.0, false);
    CHECK(v.event == "spike");
    CHECK(v.zscore > 6);
    CHECK(v.action == (std::string(action) == "warn" ? GuardAction::warn : GuardAction::skip));
    CHECK(guard.state().spikes == 1);
  }
}

// ---- training runs with injected faults ----

TEST_CASE("skip: a NaN loss at update 6 of 6 leaves params, m, v and the AdamW step count of update 5 bit-identical") {
  TempDir d;
  Inject inject("forward:gelu@6");
  const std::string cfg = tiny_config(d.path);
  std::string err;
  REQUIRE_MESSAGE(cli({"train", cfg, "--set", "train.max_steps=6", "--set", "checkpoint.interval=1", "--set",
                       "checkpoint.keep_last=100"}, &err) == kExitOk, err);
  const fs::path run = d.path / "run";
  const RunCheckpoint c5 = ckpt(run, 5), c6 = ckpt(run, 6);
  check_same_tensors(c5, c6);
  CHECK(c5.optimizer_step == 5);
  CHECK(c6.optimizer_step == 5);
  CHECK(c6.state.step == 6);
  CHECK(c6.state.guard == GuardState{1, 1, 0, 0, 1, 1.0});
  CHECK(c5.state.guard == GuardState{});
  const auto guards = of_type(run / "metrics.jsonl", "guard");
  REQUIRE(guards.size() == 1);
  CHECK(guards[0]["step"] == 6);
  CHECK(guards[0]["event"] == "nonfinite_loss");
  CHECK(guards[0]["action"] == "skip");
  CHECK(guards[0]["skipped"] == 1);
  CHECK(guards[0]["loss"].is_null());
  const std::string origin = guards[0]["origin"];
  CHECK(origin.rfind("forward op 'gelu' (node ", 0) == 0);
  CHECK(err.find("[guard] step 6: non-finite loss (nan): update skipped (1 bad in a row); first non-finite value: "
                 "forward op 'gelu'") != std::string::npos);
  check_schema(run / "metrics.jsonl");
}

TEST_CASE("skip: a NaN gradient (backward matmul) at update 6 is named and training goes on to update 10") {
  TempDir d;
  Inject inject("backward:matmul@6");
  std::string err;
  REQUIRE_MESSAGE(cli({"train", tiny_config(d.path), "--quiet", "--set", "train.max_steps=10"}, &err) == kExitOk, err);
  const fs::path m = d.path / "run" / "metrics.jsonl";
  const auto guards = of_type(m, "guard");
  REQUIRE(guards.size() == 1);
  CHECK(guards[0]["event"] == "nonfinite_grad");
  CHECK(guards[0]["loss"].is_number());  // the forward was fine
  CHECK(guards[0]["grad_norm"].is_null());
  const std::string origin = guards[0]["origin"];
  CHECK(origin.rfind("backward op 'matmul' (node ", 0) == 0);
  CHECK(origin.find("gradient for input") != std::string::npos);
  const auto losses = records(m, "step", "loss");
  REQUIRE(losses.size() == 10);
  for (size_t i = 6; i < 10; ++i) CHECK(std::isfinite(losses[i]));
  CHECK(ckpt(d.path / "run", 10).optimizer_step == 9);
  check_schema(m);
}

TEST_CASE("rollback: NaN at update 7 reloads checkpoint 4, skips batches 5-7, LR x0.5, completes 10 steps") {
  TempDir d, clean;
  const std::vector<std::string> sets = {"--set", "checkpoint.interval=4", "--set", "checkpoint.keep_last=100",
                                         "--set", "guard.policy=rollback", "--set", "guard.rollback_lr_factor=0.5"};
  auto args = [&](const TempDir& t, int64_t steps) {
    std::vector<std::string> a = {"train", tiny_config(t.path), "--quiet", "--set", "train.max_steps=" + std::to_string(steps)};
    a.insert(a.end(), sets.begin(), sets.end());
    return a;
  };
  std::string err;
  REQUIRE_MESSAGE(cli(args(clean, 13)) == kExitOk, "clean run");
  {
    Inject inject("forward:gelu@7");
    REQUIRE_MESSAGE(cli(args(d, 10), &err) == kExitOk, err);
  }
  const fs::path run = d.path / "run", m = run / "metrics.jsonl";
  const auto guards = of_type(m, "guard");
  REQUIRE(guards.size() == 1);
  CHECK(guards[0]["step"] == 7);
  CHECK(guards[0]["action"] == "rollback");
  CHECK(guards[0]["to_step"] == 4);
  CHECK(guards[0]["lr_scale"] == 0.5);
  // Step records: 1..6, then 5..10 again after the rollback, at half the scheduled LR.
  const auto steps = records(m, "step", "step"), lrs = records(m, "step", "lr");
  REQUIRE(steps == std::vector<double>{1, 2, 3, 4, 5, 6, 5, 6, 7, 8, 9, 10});
  CHECK(lrs[6] == doctest::Approx(0.5 * lrs[4]).epsilon(1e-12));
  CHECK(lrs[7] == doctest::Approx(0.5 * lrs[5]).epsilon(1e-12));
  const RunCheckpoint c10 = ckpt(run, 10);
  CHECK(c10.optimizer_step == 10);  // 6 updates, back to 4, then 6 more
  CHECK(c10.state.guard == GuardState{1, 0, 1, 0, 0, 0.5});
  // The data stream was not rewound: 13 batches drawn (7 before the rollback, 6 after), like 13 clean steps.
  CHECK(c10.state.data == ckpt(clean.path / "run", 13).state.data);
  check_schema(m);
}

TEST_CASE("stop: NaN at updates 7-9 with max_bad_steps 3 stops after 3 bad steps in a row; checkpoint 5 byte-identical") {
  TempDir d;
  Inject inject("forward:gelu@7-9");
  const std::string cfg_path = tiny_config(d.path);
  const Config cfg = load(cfg_path, {"train.max_steps=12", "checkpoint.interval=5", "guard.policy=stop",
                                     "guard.max_bad_steps=3"});
  const fs::path run = d.path / "run";
  std::string before;
  TrainOptions opt;
  opt.quiet = true;
  opt.after_step = [&](int64_t step) {
    if (step == 6) before = read_file(run / checkpoint_file_name(5));
  };
  const TrainResult r = run_training(cfg, opt);
  CHECK(r.numerics_stop);
  CHECK(r.steps == 8);  // 7 and 8 were skipped, 9 stopped
  REQUIRE(!before.empty());
  CHECK(read_file(run / checkpoint_file_name(5)) == before);
  CHECK(read_file(run / "latest") == checkpoint_file_name(5) + "\n");
  int ckpts = 0;
  for (const auto& e : fs::directory_iterator(run)) ckpts += e.path().extension() == ".alph";
  CHECK(ckpts == 1);
  const auto guards = of_type(run / "metrics.jsonl", "guard");
  REQUIRE(guards.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(guards[i]["step"] == 7 + i);
    CHECK(guards[i]["bad_in_row"] == 1 + i);
    CHECK(guards[i]["action"] == (i < 2 ? "skip" : "stop"));
  }
  const auto ends = of_type(run / "metrics.jsonl", "end");
  REQUIRE(ends.size() == 1);
  CHECK(ends[0]["status"] == "numerics_stop");
  check_schema(run / "metrics.jsonl");
}

TEST_CASE("stop: `alpha train` exits with code 5 and names the op; the default policy skip stops after 5 bad in a row") {
  TempDir d;
  Inject inject("forward:gelu@3-20");
  std::string err;
  CHECK(cli({"train", tiny_config(d.path), "--set", "checkpoint.interval=2"}, &err) == kExitNumerics);
  CHECK(err.find("first non-finite value: forward op 'gelu'") != std::string::npos);
  CHECK(err.find("stopped by the numerics guard after 6 steps") != std::string::npos);  // 3..6 skipped, 7 stops
  CHECK(read_file(d.path / "run" / "latest") == checkpoint_file_name(2) + "\n");
}

TEST_CASE("a non-finite parameter after update 6 rolls back to checkpoint 4 under rollback, exits 5 under skip") {
  for (const char* policy : {"rollback", "skip"}) {
    CAPTURE(policy);
    TempDir d;
    Inject inject("param@6");
    std::string err;
    const int rc = cli({"train", tiny_config(d.path), "--quiet", "--set", "train.max_steps=8", "--set",
                        "checkpoint.interval=4", "--set", std::string("guard.policy=") + policy}, &err);
    const fs::path run = d.path / "run";
    const auto guards = of_type(run / "metrics.jsonl", "guard");
    REQUIRE(guards.size() == 1);
    CHECK(guards[0]["event"] == "nonfinite_param");
    const std::string origin = guards[0]["origin"];
    CHECK(origin.rfind("parameter \"transformer.wte.weight\"", 0) == 0);
    if (std::string(policy) == "rollback") {
      CHECK(rc == kExitOk);
      CHECK(guards[0]["to_step"] == 4);
      const RunCheckpoint c8 = ckpt(run, 8);
      for (const auto& [name, t] : c8.file.tensors) CHECK_MESSAGE(ag::all_finite(t), name);
    } else {
      CHECK(rc == kExitNumerics);
      CHECK(read_file(run / "latest") == checkpoint_file_name(4) + "\n");
    }
    check_schema(run / "metrics.jsonl");
  }
}

// ---- checkpoints ----

TEST_CASE("the checkpoint writer refuses NaN in AdamW m or v; a checkpoint without guard counters loads as zeros") {
  TempDir d;
  Config cfg;
  cfg.out_dir = (d.path / "run").string();
  cfg.model.n_layer = 1;
  cfg.model.n_head = 2;
  cfg.model.n_embd = 8;
  cfg.model.block_size = 8;
  cfg.model.bias = true;
  auto tok = train_tokenizer("char", corpus());
  Rng rng(1);
  GPT model(GPTConfig{1, 2, 8, 8, 30, 0.0, true}, rng);
  AdamW opt(model.parameters(), AdamWOptions{});
  TrainState st;
  st.step = 1;
  st.guard = GuardState{3, 2, 1, 4, 0, 0.25};
  const std::string path = save_run_checkpoint(cfg, *tok, model, opt, st);
  CHECK(load_run_checkpoint(path).state.guard == st.guard);  // counters round-trip

  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    Tensor t = which == 0 ? opt.exp_avg()[1] : opt.exp_avg_sq()[1];
    t.mutable_data<float>()[0] = INFINITY;
    st.step = 2;
    CHECK_THROWS_WITH_AS(save_run_checkpoint(cfg, *tok, model, opt, st),
                         doctest::Contains(which == 0 ? "AdamW exp_avg of" : "AdamW exp_avg_sq of"), CheckpointError);
    CHECK(!fs::exists(d.path / "run" / checkpoint_file_name(2)));
    CHECK(read_file(d.path / "run" / "latest") == checkpoint_file_name(1) + "\n");
    t.mutable_data<float>()[0] = 0;
  }

  CheckpointFile f = read_checkpoint(path);  // a pre-issue-9 header: no "guard" object
  f.meta.erase("guard");
  const std::string old_path = (d.path / "old.alph").string();
  write_checkpoint(old_path, f.meta, f.tensors);
  CHECK(load_run_checkpoint(old_path).state.guard == GuardState{});
}

TEST_CASE("guard config: defaults (skip, 5 bad in a row, factor 1, window 100, z 6, warn, every step); bad values refused") {
  const Config d = load_config_text("{}", {}, "<test>");
  CHECK(d.guard == GuardConfig{"skip", 5, 1.0, 100, 6.0, "warn", 1});
  for (const char* bad : {"guard.policy=retry", "guard.max_bad_steps=0", "guard.rollback_lr_factor=0",
                          "guard.rollback_lr_factor=1.5", "guard.spike_window=1", "guard.spike_zscore=-1",
                          "guard.spike_action=stop", "guard.param_check_interval=-1"}) {
    CAPTURE(bad);
    const std::string key = std::string(bad).substr(0, std::string(bad).find('='));
    CHECK_THROWS_WITH_AS(load_config_text("{}", {bad}, "<test>"), doctest::Contains(("\"" + key + "\"").c_str()), ConfigError);
  }
  CHECK(load_config_text("{}", {"guard.policy=rollback", "guard.rollback_lr_factor=0.25"}, "<test>").guard.rollback_lr_factor == 0.25);
}
