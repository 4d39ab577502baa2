#include "autograd/check.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace alpha::ag {

namespace {

thread_local bool t_check = false;
thread_local std::optional<NonFiniteOrigin> t_first;
thread_local std::string t_inject_op;  // "" = no injection
thread_local bool t_inject_backward = false;

template <class T> bool finite_values(const Tensor& c) {
  const T* p = c.data<T>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

// A fresh copy of `t` with a NaN in element 0 (the original, possibly a view of a parameter, is untouched).
Tensor poisoned(const Tensor& t) {
  Tensor c = t.clone();
  if (c.numel() == 0) return c;
  if (c.dtype() == DType::f32) c.mutable_data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  if (c.dtype() == DType::f64) c.mutable_data<double>()[0] = std::numeric_limits<double>::quiet_NaN();
  return c;
}

void note(const char* direction, const char* op, int64_t node, std::string what) {
  if (!t_first) t_first = NonFiniteOrigin{direction, op, node, std::move(what)};
}

}  // namespace

std::string NonFiniteOrigin::str() const { return fmt::format("{} op '{}' (node {}, {})", direction, op, node, what); }

CheckFinite::CheckFinite() {
  t_check = true;
  t_first.reset();
}
CheckFinite::~CheckFinite() { t_check = false; }
const std::optional<NonFiniteOrigin>& CheckFinite::first() const { return t_first; }

bool all_finite(const Tensor& t) {
  if (!t.defined()) return true;
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) return true;
  const Tensor c = t.contiguous();
  return c.dtype() == DType::f32 ? finite_values<float>(c) : finite_values<double>(c);
}

void inject_nonfinite(const std::string& op, bool backward) {
  t_inject_op = op;
  t_inject_backward = backward;
}
void clear_injection() { t_inject_op.clear(); }

namespace detail {

bool hooks_active() { return t_check || !t_inject_op.empty(); }

void on_forward(const char* op, Tensor& out, const std::vector<Tensor>& inputs, int64_t node) {
  if (!t_inject_op.empty() && !t_inject_backward && t_inject_op == op) out = poisoned(out);
  if (!t_check || t_first) return;
  // A parameter that is already non-finite is the origin, not the first op that reads it.
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& in = inputs[k];
    if (in.defined() && in.is_leaf() && in.requires_grad() && !all_finite(in))
      return note("forward", op, node, fmt::format("parameter input {} {}", k, in.str()));
  }
  if (!all_finite(out)) note("forward", op, node, "output " + out.str());
}

void on_backward(const char* op, int64_t node, size_t input, Tensor& grad) {
  if (!t_inject_op.empty() && t_inject_backward && t_inject_op == op) grad = poisoned(grad);
  if (t_check && !t_first && !all_finite(grad))
    note("backward", op, node, fmt::format("gradient for input {} {}", input, grad.str()));
}

}  // namespace detail

}  // namespace alpha::ag
