// optim/: AdamW and clip_grad_norm replayed against PyTorch fixtures (tests/make_optim_fixtures.py), learning-rate
// schedules against the script's reference values, and the direct behaviours (no decay on 1-D params, skipped
// params, checkpoint resume, thread-count independence, errors).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/parallel.h"
#include "core/tensor.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/schedule.h"

using namespace alpha;
using json = nlohmann::json;

namespace {

json load_fixture(const std::string& name) {
  const std::string path = std::string(ALPHA_FIXTURES_DIR) + "/" + name;
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "missing fixture " << path << " (run /usr/bin/python3 tests/make_optim_fixtures.py)");
  return json::parse(f);
}

Shape to_shape(const json& j) { return j.get<std::vector<int64_t>>(); }

std::vector<float> to_floats(const json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));  // fixture values are exact f32
  return v;
}

// Element-wise relative error, the denominator floored at `floor_frac` of the reference's largest magnitude so an
// element that is near zero by cancellation does not turn one rounding difference into a huge ratio.
double max_rel_err(const Tensor& got, const std::vector<float>& want, double floor_frac) {
  const std::vector<double> g = got.to_f64_vector();
  REQUIRE(g.size() == want.size());
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  const double floor = std::max(floor_frac * scale, 1e-30);
  double err = 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double w = want[i];
    err = std::max(err, std::fabs(g[i] - w) / std::max(std::fabs(w), floor));
  }
  return err;
}

Tensor f32(const std::vector<float>& v, const Shape& s) { return Tensor::from_vector(v, s); }

struct ReplayErrors {
  double norm = 0, clip = 0, param = 0, exp_avg = 0, exp_avg_sq = 0;
  int steps = 0;
};

// Replays tests/fixtures/optim_adamw.json: each step sets the recorded grads, clips them with clip_grad_norm
// (checked against torch's clip_grad_norm_), then steps AdamW and compares params, m and v with torch's.
// torch_clipped: step on torch's clipped grads instead of ours, which isolates AdamW from the clip's rounding
// (torch's norm is an f32 reduction, ours a double one, so the clipped grads can differ by an ulp).
ReplayErrors replay_adamw_fixture(bool torch_clipped, double floor_frac) {
  const json fx = load_fixture("optim_adamw.json");
  const json& o = fx["options"];
  std::vector<Tensor> params;
  for (const auto& p : fx["params"]) params.push_back(f32(to_floats(p["init"]), to_shape(p["shape"])));
  AdamW opt(params, {o["beta1"].get<double>(), o["beta2"].get<double>(), o["eps"].get<double>(),
                     o["weight_decay"].get<double>()});
  const double max_norm = o["max_norm"].get<double>();
  ReplayErrors e;
  for (const auto& s : fx["steps"]) {
    ++e.steps;
    for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(f32(to_floats(s["grads"][i]), params[i].shape()));
    const double norm = clip_grad_norm(params, max_norm);
    const double want_norm = s["norm"].get<double>();
    e.norm = std::max(e.norm, std::fabs(norm - want_norm) / want_norm);
    CHECK((norm > max_norm) == s["clipped"].get<bool>());
    for (size_t i = 0; i < params.size(); ++i) {
      e.clip = std::max(e.clip, max_rel_err(params[i].grad(), to_floats(s["clipped_grads"][i]), 1e-6));
      if (torch_clipped) params[i].set_grad(f32(to_floats(s["clipped_grads"][i]), params[i].shape()));
    }

    opt.step(s["lr"].get<double>());
    CHECK(opt.step_count() == e.steps);
    for (size_t i = 0; i < params.size(); ++i) {
      const double ep = max_rel_err(params[i], to_floats(s["params"][i]), floor_frac);
      const double em = max_rel_err(opt.exp_avg()[i], to_floats(s["exp_avg"][i]), floor_frac);
      const double ev = max_rel_err(opt.exp_avg_sq()[i], to_floats(s["exp_avg_sq"][i]), floor_frac);
      CHECK_MESSAGE(ep <= 1e-5, "step " << e.steps << " param " << i << " rel err " << ep);
      CHECK_MESSAGE(em <= 1e-5, "step " << e.steps << " exp_avg " << i << " rel err " << em);
      CHECK_MESSAGE(ev <= 1e-5, "step " << e.steps << " exp_avg_sq " << i << " rel err " << ev);
      e.param = std::max(e.param, ep);
      e.exp_avg = std::max(e.exp_avg, em);
      e.exp_avg_sq = std::max(e.exp_avg_sq, ev);
    }
  }
  MESSAGE("vs torch " << fx["torch_version"].get<std::string>() << std::string(torch_clipped ? " (on torch's clipped grads)" : " (on our clipped grads)")
                      << ": max rel err norm " << e.norm << ", clipped grads " << e.clip << ", params " << e.param
                      << ", exp_avg " << e.exp_avg << ", exp_avg_sq " << e.exp_avg_sq);
  return e;
}

}  // namespace

TEST_CASE("AdamW matches torch.optim.AdamW step for step on the same grads") {
  // Element-wise relative error (floor 1e-6 of the largest magnitude): AdamW alone agrees to float rounding.
  const ReplayErrors e = replay_adamw_fixture(/*torch_clipped=*/true, 1e-6);
  CHECK(e.steps == 5);
}

TEST_CASE("clip_grad_norm + AdamW match torch's clip_grad_norm_ + AdamW over the fixture") {
  // Our clip's last-ulp differences from torch's f32 norm pass through m's cancellations (elements ~100x below
  // their terms), so the relative error floor is 1e-2 of each tensor's largest magnitude here.
  const ReplayErrors e = replay_adamw_fixture(/*torch_clipped=*/false, 1e-2);
  CHECK(e.steps == 5);
  CHECK(e.norm <= 1e-6);
  CHECK(e.clip <= 1e-6);
}

TEST_CASE("schedules match the reference values at every step, boundaries included") {
  const json fx = load_fixture("optim_schedule.json");
  int cases = 0;
  for (const auto& c : fx["cases"]) {
    ScheduleOptions so;
    so.kind = parse_schedule(c["kind"].get<std::string>());
    so.lr = c["lr"].get<double>();
    so.min_lr = c["min_lr"].get<double>();
    so.warmup_steps = c["warmup_steps"].get<int64_t>();
    so.decay_steps = c["decay_steps"].get<int64_t>();
    so.wsd_decay_fraction = c["wsd_decay_fraction"].get<double>();
    const auto steps = c["steps"].get<std::vector<int64_t>>();
    const auto values = c["values"].get<std::vector<double>>();
    REQUIRE(steps.size() == values.size());
    double worst = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const double got = lr_at(so, steps[k]);
      worst = std::max(worst, std::fabs(got - values[k]) / std::max(std::fabs(values[k]), so.lr));
    }
    CHECK_MESSAGE(worst <= 1e-12, schedule_name(so.kind) << " warmup " << so.warmup_steps << " decay "
                                                         << so.decay_steps << " rel err " << worst);
    ++cases;
  }
  CHECK(cases >= 10);
}

TEST_CASE("schedule names round-trip and unknown names raise") {
  for (ScheduleKind k : {ScheduleKind::constant, ScheduleKind::cosine, ScheduleKind::linear, ScheduleKind::wsd})
    CHECK(parse_schedule(schedule_name(k)) == k);
  CHECK_THROWS_AS(parse_schedule("Cosine"), ValueError);
  CHECK_THROWS_AS(parse_schedule(""), ValueError);
}

TEST_CASE("clip_grad_norm returns the pre-clip norm and leaves small grads untouched") {
  Tensor a = f32({3, 4}, {2});
  Tensor b = f32({12}, {1, 1});
  Tensor c = f32({5}, {1});  // no grad: contributes nothing
  const Tensor ga = f32({3, 4}, {2}), gb = f32({12}, {1, 1});
  a.set_grad(ga);
  b.set_grad(gb);
  CHECK(clip_grad_norm({a, b, c}, 20.0) == doctest::Approx(13.0).epsilon(1e-12));  // sqrt(9 + 16 + 144)
  CHECK(a.grad().same(ga));
  CHECK(b.grad().same(gb));
  CHECK(!c.grad().defined());
  CHECK(a.grad().to_f32_vector() == std::vector<float>{3, 4});
  // max_norm <= 0 disables clipping.
  CHECK(clip_grad_norm({a, b}, 0.0) == doctest::Approx(13.0).epsilon(1e-12));
  CHECK(a.grad().same(ga));
  // Exactly at max_norm: not above, so not clipped.
  CHECK(clip_grad_norm({a, b}, 13.0) == doctest::Approx(13.0).epsilon(1e-12));
  CHECK(a.grad().same(ga));
}

TEST_CASE("clip_grad_norm scales grads above max_norm out of place, f32 and f64") {
  Tensor a = f32({3, 4}, {2});
  Tensor b = Tensor::from_vector(std::vector<double>{12}, {1});
  const Tensor ga = f32({3, 4}, {2});
  const Tensor gb = Tensor::from_vector(std::vector<double>{12}, {1});
  a.set_grad(ga);
  b.set_grad(gb);
  const double norm = clip_grad_norm({a, b}, 6.5);
  CHECK(norm == doctest::Approx(13.0).epsilon(1e-12));
  const double coef = 6.5 / (13.0 + 1e-6);  // torch's clip_coef
  CHECK(!a.grad().same(ga));
  CHECK(!b.grad().same(gb));
  CHECK(ga.to_f32_vector() == std::vector<float>{3, 4});  // the old grad tensors are not modified
  CHECK(gb.to_f64_vector() == std::vector<double>{12});
  CHECK(a.grad().dtype() == DType::f32);
  CHECK(b.grad().dtype() == DType::f64);
  const auto va = a.grad().to_f64_vector();
  CHECK(va[0] == doctest::Approx(3 * coef).epsilon(1e-6));
  CHECK(va[1] == doctest::Approx(4 * coef).epsilon(1e-6));
  CHECK(b.grad().to_f64_vector()[0] == doctest::Approx(12 * coef).epsilon(1e-12));
  // The clipped set now has norm just under max_norm.
  CHECK(clip_grad_norm({a, b}, 0.0) == doctest::Approx(6.5).epsilon(1e-6));
}

TEST_CASE("clip_grad_norm reads non-contiguous grads") {
  Tensor a = f32({0, 0, 0, 0}, {2, 2});
  a.set_grad(f32({1, 2, 3, 4}, {2, 2}).transpose(0, 1));
  CHECK(clip_grad_norm({a}, 0.0) == doctest::Approx(std::sqrt(30.0)).epsilon(1e-12));
  clip_grad_norm({a}, std::sqrt(30.0) / 2);
  const auto g = a.grad().to_f64_vector();  // transposed order: 1, 3, 2, 4, each halved
  CHECK(g[1] == doctest::Approx(1.5).epsilon(1e-5));
  CHECK(g[2] == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("AdamW applies weight decay only to params with dim() >= 2") {
  // Zero grads make the Adam update exactly 0 (m = v = 0), so only the decay can move a param.
  Tensor w = f32({1, -2, 3, 4}, {2, 2});
  Tensor cube = f32({2, 2}, {1, 1, 2});
  Tensor bias = f32({1, -2, 3, 4}, {4});
  Tensor scalar = Tensor::scalar(5.0);
  std::vector<Tensor> ps{w, cube, bias, scalar};
  for (Tensor& p : ps) p.set_grad(Tensor::zeros(p.shape()));
  AdamW opt(ps, {0.9, 0.95, 1e-8, 0.1});
  opt.step(0.5);  // decay factor 1 - 0.5 * 0.1 = 0.95
  const float f = static_cast<float>(1.0 - 0.5 * 0.1);
  CHECK(w.to_f32_vector() == std::vector<float>{1 * f, -2 * f, 3 * f, 4 * f});
  CHECK(cube.to_f32_vector() == std::vector<float>{2 * f, 2 * f});
  CHECK(bias.to_f32_vector() == std::vector<float>{1, -2, 3, 4});
  CHECK(scalar.item() == 5.0);
}

TEST_CASE("AdamW first step moves each element by about lr against its grad sign") {
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) = lr * sign(g) (no decay on 1-D).
  Tensor p = f32({1, 1, 1}, {3});
  p.set_grad(f32({2, -0.5, 1e-3}, {3}));
  AdamW opt({p}, {0.9, 0.99, 1e-8, 0.1});
  opt.step(0.01);
  const auto v = p.to_f64_vector();
  CHECK(v[0] == doctest::Approx(0.99).epsilon(1e-6));
  CHECK(v[1] == doctest::Approx(1.01).epsilon(1e-6));
  CHECK(v[2] == doctest::Approx(1 - 0.01 * 1e-3 / (1e-3 + 1e-8)).epsilon(1e-6));
  CHECK(opt.exp_avg()[0].to_f64_vector()[0] == doctest::Approx(0.2).epsilon(1e-6));
  CHECK(opt.exp_avg_sq()[0].to_f64_vector()[1] == doctest::Approx(0.01 * 0.25).epsilon(1e-6));
}

TEST_CASE("AdamW skips params without grads, zero_grad clears grads") {
  Tensor a = f32({1, 2, 3, 4}, {2, 2});
  Tensor b = f32({1, 2}, {2});
  a.set_grad(f32({1, 1, 1, 1}, {2, 2}));
  AdamW opt({a, b}, {});
  opt.step(0.1);
  CHECK(opt.step_count() == 1);
  CHECK(a.to_f32_vector() != std::vector<float>{1, 2, 3, 4});
  CHECK(b.to_f32_vector() == std::vector<float>{1, 2});
  CHECK(opt.exp_avg()[1].to_f32_vector() == std::vector<float>{0, 0});
  CHECK(opt.exp_avg_sq()[1].to_f32_vector() == std::vector<float>{0, 0});
  opt.zero_grad();
  CHECK(!a.grad().defined());
  CHECK(!b.grad().defined());
  const auto before = a.to_f32_vector();
  opt.step(0.1);  // nothing has a grad: nothing moves, the step still counts
  CHECK(opt.step_count() == 2);
  CHECK(a.to_f32_vector() == before);
}

TEST_CASE("AdamW resumed from saved state (params, m, v, step count) continues identically") {
  const std::vector<float> init{0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f};
  auto grad_at = [](int k) {
    std::vector<float> g(6);
    for (int i = 0; i < 6; ++i) g[i] = std::sin(0.7f * static_cast<float>(k * 6 + i)) * 0.3f;
    return f32(g, {2, 3});
  };
  Tensor p = f32(init, {2, 3});
  AdamW a({p}, {0.9, 0.95, 1e-8, 0.1});
  for (int k = 0; k < 3; ++k) {
    p.set_grad(grad_at(k));
    a.step(1e-2);
  }
  // "Checkpoint" after 3 steps, restore into a fresh optimizer, then take step 4 on both.
  Tensor q = p.clone();
  AdamW b({q}, {0.9, 0.95, 1e-8, 0.1});
  b.exp_avg()[0] = a.exp_avg()[0].clone();
  b.exp_avg_sq()[0] = a.exp_avg_sq()[0].clone();
  b.set_step_count(a.step_count());
  p.set_grad(grad_at(3));
  q.set_grad(grad_at(3));
  a.step(1e-2);
  b.step(1e-2);
  CHECK(b.step_count() == 4);
  CHECK(q.to_f32_vector() == p.to_f32_vector());
  // Without the step count, bias correction differs and so does the result.
  Tensor r = f32(init, {2, 3});
  AdamW c({r}, {0.9, 0.95, 1e-8, 0.1});
  r.set_grad(grad_at(0));
  c.step(1e-2);
  Tensor r2 = f32(init, {2, 3});
  AdamW d({r2}, {0.9, 0.95, 1e-8, 0.1});
  d.set_step_count(10);
  r2.set_grad(grad_at(0));
  d.step(1e-2);
  CHECK(r.to_f32_vector() != r2.to_f32_vector());
}

TEST_CASE("AdamW results do not depend on the thread count") {
  const int64_t n = 100003;  // several parallel chunks plus a ragged tail
  std::vector<float> init(n), grad(n);
  for (int64_t i = 0; i < n; ++i) {
    init[i] = std::cos(0.001f * static_cast<float>(i));
    grad[i] = std::sin(0.37f * static_cast<float>(i));
  }
  const int saved = num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Tensor p = f32(init, {n});
    Tensor w = f32(init, {1, n});
    AdamW opt({p, w}, {});
    for (int k = 0; k < 2; ++k) {
      p.set_grad(f32(grad, {n}));
      w.set_grad(f32(grad, {1, n}));
      opt.step(1e-3);
    }
    auto r = p.to_f32_vector();
    const auto rw = w.to_f32_vector();
    r.insert(r.end(), rw.begin(), rw.end());
    results.push_back(r);
  }
  set_num_threads(saved);
  CHECK(results[0] != std::vector<float>(init.begin(), init.end()));
  CHECK(results[1] == results[0]);
  CHECK(results[2] == results[0]);
}

TEST_CASE("AdamW rejects bad params, grads, options and state") {
  CHECK_THROWS_AS(AdamW({Tensor::zeros({2, 2}, DType::f64)}, {}), DTypeError);
  CHECK_THROWS_AS(AdamW({Tensor::zeros({2, 3}).transpose(0, 1)}, {}), ValueError);
  CHECK_THROWS_AS(AdamW({Tensor()}, {}), ValueError);
  Tensor shared = Tensor::zeros({3});
  CHECK_THROWS_AS(AdamW({shared, shared}, {}), ValueError);
  CHECK_THROWS_AS(AdamW({Tensor::zeros({3})}, {1.0, 0.99, 1e-8, 0.1}), ValueError);
  CHECK_THROWS_AS(AdamW({Tensor::zeros({3})}, {0.9, -0.1, 1e-8, 0.1}), ValueError);
  CHECK_THROWS_AS(AdamW({Tensor::zeros({3})}, {0.9, 0.99, -1.0, 0.1}), ValueError);
  CHECK_THROWS_AS(AdamW({Tensor::zeros({3})}, {0.9, 0.99, 1e-8, std::nan("")}), ValueError);

  Tensor a = Tensor::zeros({2});
  Tensor b = Tensor::zeros({5, 4});
  AdamW opt({a, b}, {});
  b.set_grad(Tensor::zeros({4, 5}));
  CHECK_THROWS_WITH_AS(opt.step(0.1), "[adamw] grad of param 1 is [4,5], param is [5,4]", ShapeError);
  CHECK(opt.step_count() == 0);  // a failed step changes nothing
  b.set_grad(Tensor::zeros({5, 4}, DType::f64));
  CHECK_THROWS_AS(opt.step(0.1), DTypeError);
  b.set_grad(Tensor::zeros({5, 4}));
  CHECK_THROWS_AS(opt.step(-0.1), ValueError);
  CHECK_THROWS_AS(opt.step(std::nan("")), ValueError);
  CHECK_THROWS_AS(opt.set_step_count(-1), ValueError);
  opt.exp_avg_sq()[1] = Tensor::zeros({4, 5});  // a bad checkpoint restore
  CHECK_THROWS_AS(opt.step(0.1), ValueError);
  opt.exp_avg_sq()[1] = Tensor::zeros({5, 4});
  opt.step(0.1);
  CHECK(opt.step_count() == 1);
}

TEST_CASE("clip_grad_norm and lr_at reject bad inputs") {
  Tensor a = Tensor::zeros({2});
  a.set_grad(Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}));
  CHECK_THROWS_AS(clip_grad_norm({a}, 1.0), DTypeError);
  a.set_grad(Tensor::zeros({2}));
  CHECK_THROWS_AS(clip_grad_norm({a}, std::nan("")), ValueError);

  ScheduleOptions o;
  CHECK_THROWS_AS(lr_at(o, -1), ValueError);
  o.wsd_decay_fraction = 1.5;
  CHECK_THROWS_AS(lr_at(o, 0), ValueError);
  o = ScheduleOptions{};
  o.warmup_steps = -1;
  CHECK_THROWS_AS(lr_at(o, 0), ValueError);
  o = ScheduleOptions{};
  o.lr = std::nan("");
  CHECK_THROWS_AS(lr_at(o, 0), ValueError);
  o = ScheduleOptions{};
  o.min_lr = -1e-4;
  CHECK_THROWS_AS(lr_at(o, 0), ValueError);
}
