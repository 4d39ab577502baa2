// Finite-difference gradient checking shared by the autograd tests (test_gradcheck.cpp, test_gradcheck_llama.cpp).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/rng.h"

namespace alpha::test {

using Inputs = std::vector<Tensor>;
using Fn = std::function<Tensor(const Inputs&)>;

inline Tensor randn(const Shape& s, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (double& x : v) x = scale * rng.normal();
  return Tensor::from_vector(v, s);
}

inline Tensor rand_pos(const Shape& s, uint64_t seed) {  // in [0.5, 1.5): safe for log, sqrt, div
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(shape_numel(s)));
  for (double& x : v) x = 0.5 + rng.uniform();
  return Tensor::from_vector(v, s);
}

inline Tensor ints(const std::vector<int32_t>& v, const Shape& s) { return Tensor::from_vector(v, s); }

// Element pointer for row-major flat index i of a strided f64 tensor (views are perturbed in place).
inline double* elem(Tensor& t, int64_t i) {
  double* base = t.mutable_data<double>();
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (i % t.shape()[d]) * t.strides()[d];
    i /= t.shape()[d];
  }
  return base + off;
}

// Checks d/dx of L = sum(f(x) * R) (R fixed random, so every output element matters) against central
// differences, for every input. Inputs must be f64 leaves (views allowed, but not expanded ones).
// Returns the max error |analytic - numeric| / max(1, |analytic|, |numeric|).
inline double gradcheck(const std::string& name, const Fn& f, Inputs inputs, double tol = 1e-6, double eps = 1e-6) {
  INFO("gradcheck ", name);
  for (Tensor& t : inputs) {
    REQUIRE(t.dtype() == DType::f64);
    t.set_grad(Tensor());
    t.set_requires_grad(true);
  }
  const Tensor y = f(inputs);
  REQUIRE(y.requires_grad());
  const Tensor R = randn(y.shape(), 12345);
  ag::backward(ag::sum_all(ag::mul(y, R)));
  CHECK(ag::tape_size() == 0);
  const std::vector<double> rv = R.to_f64_vector();
  auto loss = [&] {
    ag::NoGrad ng;
    const std::vector<double> v = f(inputs).to_f64_vector();
    double s = 0.0;
    for (size_t i = 0; i < v.size(); ++i) s += v[i] * rv[i];
    return s;
  };
  double max_err = 0.0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    const Tensor g = x.grad();
    REQUIRE_MESSAGE(g.defined(), "input ", k, " got no gradient");
    REQUIRE(g.shape() == x.shape());
    CHECK(g.dtype() == DType::f64);
    const std::vector<double> ana = g.to_f64_vector();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double* p = elem(x, i);
      const double x0 = *p;
      *p = x0 + eps;
      const double lp = loss();
      *p = x0 - eps;
      const double lm = loss();
      *p = x0;
      const double num = (lp - lm) / (2 * eps);
      const double err = std::abs(num - ana[i]) / std::max({1.0, std::abs(num), std::abs(ana[i])});
      max_err = std::max(max_err, err);
    }
  }
  MESSAGE(name, ": max gradient error ", max_err);
  CHECK(max_err < tol);
  for (Tensor& t : inputs) t.set_requires_grad(false);
  return max_err;
}

}  // namespace alpha::test
