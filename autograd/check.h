// Finite checking on the tape ("check mode", issue 9): while a CheckFinite scope is alive, every op recorded on
// the tape has its parameter inputs and its output checked (forward), and every gradient a backward closure
// produces is checked (backward); the first non-finite value is kept with the op's name, its tape node and
// the direction. The trainer re-runs a step that went non-finite in this mode to name the op that did it.
// Also a test hook that makes a named op produce a NaN, so the guard's detection paths can be exercised.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"

namespace alpha::ag {

struct NonFiniteOrigin {
  std::string direction;  // "forward" or "backward"
  std::string op;         // the name the op recorded itself under, e.g. "matmul", "log"
  int64_t node = -1;      // its index on the tape (recording order, 0 = first op of the forward)
  std::string what;       // "output f32[2,3]", "gradient for input 0 f32[16,16]", "parameter input 1 f32[16]"
  // "forward op 'log' (node 3, output f32[2,3])"
  std::string str() const;
};

// Turns check mode on for its lifetime (scopes do not nest) and starts with no origin recorded.
class CheckFinite {
 public:
  CheckFinite();
  ~CheckFinite();
  CheckFinite(const CheckFinite&) = delete;
  CheckFinite& operator=(const CheckFinite&) = delete;
  // The first non-finite value seen since the scope began, if any.
  const std::optional<NonFiniteOrigin>& first() const;
};

// True when every element is finite (any float dtype, any strides; integer tensors are always finite).
// Reads the host copy (syncs from the GPU when the tensor lives there).
bool all_finite(const Tensor& t);

// Test hook: while armed, every forward output (backward = false) or every gradient (backward = true) that
// the op named `op` produces gets a NaN in its first element (a fresh copy; views never write through to the
// tensor they view). Thread-local like the tape. inject_nonfinite("", ...) disarms.
void inject_nonfinite(const std::string& op, bool backward);
void clear_injection();

namespace detail {
// Called by the tape (autograd/tape.cpp); cheap no-ops unless check mode or an injection is on.
bool hooks_active();
void on_forward(const char* op, Tensor& out, const std::vector<Tensor>& inputs, int64_t node);
void on_backward(const char* op, int64_t node, size_t input, Tensor& grad);
}  // namespace detail

}  // namespace alpha::ag
