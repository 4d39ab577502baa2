// Element-wise ops. Gradients come back in the broadcast shape; the tape sums them to each input's shape.
#include "core/ops.h"
#include "autograd/ops.h"
#include "autograd/tape.h"

namespace alpha::ag {

Tensor add(const Tensor& a, const Tensor& b) {
  return record("add", ops::add(a, b), {a, b}, [](const Tensor& g) { return std::vector<Tensor>{g, g}; });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  return record("sub", ops::sub(a, b), {a, b}, [](const Tensor& g) { return std::vector<Tensor>{g, ops::neg(g)}; });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  return record("mul", ops::mul(a, b), {a, b}, [a, b, ga, gb](const Tensor& g) {
    return std::vector<Tensor>{ga ? ops::mul(g, b) : Tensor(), gb ? ops::mul(g, a) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  const bool gb = b.requires_grad();
  return record("div", ops::div(a, b), {a, b}, [a, b, gb](const Tensor& g) {
    Tensor ga = ops::div(g, b);  // d(a/b)/da = 1/b
    Tensor gbv = gb ? ops::neg(ops::div(ops::mul(ga, a), b)) : Tensor();  // d/db = -a/b^2
    return std::vector<Tensor>{ga, gbv};
  });
}

Tensor neg(const Tensor& x) {
  return record("neg", ops::neg(x), {x}, [](const Tensor& g) { return std::vector<Tensor>{ops::neg(g)}; });
}

Tensor exp(const Tensor& x) {
  Tensor y = ops::exp(x);
  return record("exp", y, {x}, [y](const Tensor& g) { return std::vector<Tensor>{ops::mul(g, y)}; });
}

Tensor log(const Tensor& x) {
  return record("log", ops::log(x), {x}, [x](const Tensor& g) { return std::vector<Tensor>{ops::div(g, x)}; });
}

Tensor sqrt(const Tensor& x) {
  Tensor y = ops::sqrt(x);
  return record("sqrt", y, {x}, [y](const Tensor& g) {
    return std::vector<Tensor>{ops::scale(ops::div(g, y), 0.5)};  // d sqrt(x) = 1 / (2 sqrt(x))
  });
}

Tensor scale(const Tensor& x, double s) {
  return record("scale", ops::scale(x, s), {x}, [s](const Tensor& g) { return std::vector<Tensor>{ops::scale(g, s)}; });
}

Tensor add_scalar(const Tensor& x, double s) {
  return record("add_scalar", ops::add_scalar(x, s), {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
}

}  // namespace alpha::ag
