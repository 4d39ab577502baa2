// optim/muon: Newton-Schulz and Muon + AdamW steps replayed against PyTorch (tests/make_muon_fixtures.py), which
// parameters Muon takes, state save/restore, and bad options. Resume through `alpha train` is in
// tests/train/checkpoint/test_checkpoint_resume.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "core/tensor.h"
#include "optim/muon.h"

using namespace alpha;
using json = nlohmann::json;

namespace {

json load_fixture() {
  const std::string path = std::string(ALPHA_FIXTURES_DIR) + "/optim_muon.json";
  std::ifstream f(path);
  REQUIRE_MESSAGE(f.good(), "missing fixture " << path << " (run /usr/bin/python3 tests/make_muon_fixtures.py)");
  return json::parse(f);
}

std::vector<float> to_floats(const json& j) {
  std::vector<float> v;
  for (const auto& x : j) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

// Largest |got - want| over the elements, relative to the reference's largest magnitude.
double max_err(const Tensor& got, const std::vector<float>& want) {
  const std::vector<double> g = got.to_f64_vector();
  REQUIRE(g.size() == want.size());
  double scale = 1e-30, err = 0;
  for (float w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < g.size(); ++i) err = std::max(err, std::fabs(g[i] - want[i]));
  return err / scale;
}

std::array<double, 3> coeffs(const json& j) { return {j[0].get<double>(), j[1].get<double>(), j[2].get<double>()}; }

struct Run {
  std::vector<Tensor> params;
  std::vector<bool> mask;
  std::unique_ptr<Muon> opt;
};

Run build_run(const json& run) {
  Run r;
  for (const auto& p : run["params"]) {
    r.params.push_back(Tensor::from_vector(to_floats(p["init"]), p["shape"].get<std::vector<int64_t>>()));
    r.params.back().set_requires_grad(true);
    r.mask.push_back(p["muon"].get<bool>());
  }
  const json& m = run["muon"];
  const json& a = run["adamw"];
  MuonOptions mo;
  mo.lr = m["lr"];
  mo.base_lr = m["base_lr"];
  mo.momentum = m["momentum"];
  mo.weight_decay = m["weight_decay"];
  mo.nesterov = m["nesterov"];
  mo.ns_steps = m["ns_steps"];
  mo.ns_coefficients = coeffs(m["coefficients"]);
  r.opt = std::make_unique<Muon>(r.params, r.mask, AdamWOptions{a["beta1"], a["beta2"], a["eps"], a["weight_decay"]}, mo);
  return r;
}

void set_grads(Run& r, const json& step) {
  for (size_t i = 0; i < r.params.size(); ++i)
    r.params[i].set_grad(Tensor::from_vector(to_floats(step["grads"][i]), r.params[i].shape()));
}

}  // namespace

TEST_CASE("Newton-Schulz matches modded-nanogpt's zeropower_via_newtonschulz5 (f32) on square, tall and wide G") {
  const json fx = load_fixture();
  REQUIRE(fx["newton_schulz"].size() == 5);
  for (const auto& c : fx["newton_schulz"]) {
    const Shape shape = c["shape"].get<std::vector<int64_t>>();
    const Tensor g = Tensor::from_vector(to_floats(c["g"]), shape);
    const Tensor out = newton_schulz(g, c["steps"].get<int64_t>(), coeffs(c["coefficients"]));
    CHECK(out.shape() == shape);
    const double e = max_err(out, to_floats(c["out"]));
    INFO("shape " << shape_str(shape) << " steps " << c["steps"] << ": max error " << e);
    CHECK(e < 2e-5);
  }
}

TEST_CASE("Newton-Schulz in f16 (optim.muon.ns_dtype) stays within f16 rounding of the f32 reference") {
  const json fx = load_fixture();
  for (const auto& c : fx["newton_schulz"]) {
    const Shape shape = c["shape"].get<std::vector<int64_t>>();
    const Tensor g = Tensor::from_vector(to_floats(c["g"]), shape);
    const Tensor out = newton_schulz(g, c["steps"].get<int64_t>(), coeffs(c["coefficients"]), DType::f16);
    CHECK(out.dtype() == DType::f32);
    CHECK(out.shape() == shape);
    const double e = max_err(out, to_floats(c["out"]));
    INFO("shape " << shape_str(shape) << ": f16 error " << e);
    CHECK(e < 2e-2);
    CHECK(e > 1e-5);  // it did round through f16
  }
  CHECK_THROWS_AS(newton_schulz(Tensor::zeros({2, 2}), 5, {3.4445, -4.7750, 2.0315}, DType::f64), DTypeError);
}

TEST_CASE("Newton-Schulz output is close to orthogonal: singular values of X X^T near 1 (X wide)") {
  Rng rng(3);
  std::vector<float> gv(16 * 40);
  for (float& x : gv) x = static_cast<float>(rng.normal());
  const Tensor g = Tensor::from_vector(gv, {16, 40});
  const Tensor x = newton_schulz(g, 5, {3.4445, -4.7750, 2.0315});
  const std::vector<double> v = x.to_f64_vector();
  // Diagonal of X X^T: the row norms^2; modded-nanogpt's coefficients put the singular values in ~[0.7, 1.2].
  for (int64_t r = 0; r < 16; ++r) {
    double s = 0;
    for (int64_t k = 0; k < 40; ++k) s += v[static_cast<size_t>(r * 40 + k)] * v[static_cast<size_t>(r * 40 + k)];
    CHECK(s > 0.4);
    CHECK(s < 1.5);
  }
}

TEST_CASE("Muon + AdamW match the PyTorch reference step for step (nesterov with decay, plain momentum)") {
  const json fx = load_fixture();
  REQUIRE(fx["runs"].size() == 2);
  for (const auto& run : fx["runs"]) {
    Run r = build_run(run);
    int step_no = 0;
    for (const auto& step : run["steps"]) {
      ++step_no;
      set_grads(r, step);
      r.opt->step(step["lr"].get<double>());
      for (size_t i = 0; i < r.params.size(); ++i) {
        INFO("nesterov " << run["muon"]["nesterov"] << " step " << step_no << " param " << run["params"][i]["name"]);
        CHECK(max_err(r.params[i], to_floats(step["params"][i])) < 2e-6);
        CHECK(max_err(r.opt->exp_avg()[i], to_floats(step["state"][i])) < 1e-6);
      }
    }
    // Muon's second slot stays zero; AdamW's holds v.
    for (size_t i = 0; i < r.params.size(); ++i) {
      const std::vector<double> v = r.opt->exp_avg_sq()[i].to_f64_vector();
      const bool all_zero = std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; });
      CHECK(all_zero == r.mask[i]);
    }
  }
}

TEST_CASE("Muon restored from saved state (params, momentum, step count) continues bit for bit") {
  const json fx = load_fixture();
  const json& run = fx["runs"][0];
  Run a = build_run(run);
  set_grads(a, run["steps"][0]);
  a.opt->step(1e-2);
  // b: a fresh optimizer given a's params, state and step count.
  Run b = build_run(run);
  for (size_t i = 0; i < a.params.size(); ++i) {
    b.params[i].copy_from(a.params[i]);
    b.opt->exp_avg()[i].copy_from(a.opt->exp_avg()[i]);
    b.opt->exp_avg_sq()[i].copy_from(a.opt->exp_avg_sq()[i]);
  }
  b.opt->set_step_count(a.opt->step_count());
  for (Run* r : {&a, &b}) {
    set_grads(*r, run["steps"][1]);
    r->opt->step(6e-3);
  }
  for (size_t i = 0; i < a.params.size(); ++i) {
    CHECK(a.params[i].to_f64_vector() == b.params[i].to_f64_vector());
    CHECK(a.opt->exp_avg()[i].to_f64_vector() == b.opt->exp_avg()[i].to_f64_vector());
  }
}

TEST_CASE("muon_eligible: 2-D params inside a numbered block only") {
  const Tensor m = Tensor::zeros({4, 4}), v = Tensor::zeros({4});
  CHECK(muon_eligible("transformer.h.0.attn.c_attn.weight", m));
  CHECK(muon_eligible("transformer.h.11.mlp.c_proj.weight", m));
  CHECK(muon_eligible("model.layers.3.self_attn.q_proj.weight", m));
  CHECK_FALSE(muon_eligible("transformer.h.0.attn.c_attn.bias", v));
  CHECK_FALSE(muon_eligible("transformer.h.0.ln_1.weight", v));
  CHECK_FALSE(muon_eligible("transformer.wte.weight", m));
  CHECK_FALSE(muon_eligible("transformer.wpe.weight", m));
  CHECK_FALSE(muon_eligible("lm_head.weight", m));
  CHECK_FALSE(muon_eligible("model.embed_tokens.weight", m));
  CHECK_FALSE(muon_eligible("h2.weight", m));  // digits inside a component do not count
}

TEST_CASE("Muon rejects bad options, non-matrix Muon params and bad inputs to Newton-Schulz") {
  Tensor w = Tensor::zeros({4, 4}), b = Tensor::zeros({4});
  auto make = [&](MuonOptions mo, std::vector<bool> mask = {true, false}) {
    return Muon({w, b}, std::move(mask), AdamWOptions{}, mo);
  };
  CHECK_NOTHROW(make(MuonOptions{}));
  MuonOptions mo;
  mo.momentum = 1.0;
  CHECK_THROWS_WITH_AS(make(mo), doctest::Contains("[muon] momentum must be in [0, 1)"), ValueError);
  mo = {};
  mo.ns_steps = 0;
  CHECK_THROWS_WITH_AS(make(mo), doctest::Contains("[muon] ns_steps must be in [1, 100]"), ValueError);
  mo = {};
  mo.lr = -1;
  CHECK_THROWS_WITH_AS(make(mo), doctest::Contains("[muon] lr must be >= 0"), ValueError);
  mo = {};
  mo.base_lr = 0;
  CHECK_THROWS_WITH_AS(make(mo), doctest::Contains("[muon] base_lr must be > 0"), ValueError);
  mo = {};
  mo.ns_coefficients[1] = NAN;
  CHECK_THROWS_WITH_AS(make(mo), doctest::Contains("[muon] ns_coefficients must be finite"), ValueError);
  CHECK_THROWS_WITH_AS(make(MuonOptions{}, {true, true}), doctest::Contains("Muon takes 2-D matrices only"), ShapeError);
  CHECK_THROWS_WITH_AS(make(MuonOptions{}, {true}), doctest::Contains("[muon] 2 params but a mask of 1"), ValueError);
  CHECK_THROWS_AS(newton_schulz(Tensor::zeros({2, 2, 2}), 5, {3.4445, -4.7750, 2.0315}), ShapeError);
  CHECK_THROWS_AS(newton_schulz(Tensor::zeros({2, 2}), 0, {3.4445, -4.7750, 2.0315}), ValueError);
  // A grad of the wrong shape on a Muon param: nothing changes (AdamW's validation runs first).
  Muon opt({w, b}, {true, false}, AdamWOptions{}, MuonOptions{});
  w.set_grad(Tensor::ones({4, 3}));
  b.set_grad(Tensor::ones({4}));
  CHECK_THROWS_AS(opt.step(1e-3), ShapeError);
  CHECK(opt.step_count() == 0);
  CHECK(b.to_f64_vector() == std::vector<double>(4, 0.0));
}
