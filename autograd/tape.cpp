#include "autograd/tape.h"

#include <unordered_map>

#include "autograd/check.h"
#include "core/backend.h"
#include "core/ops.h"

namespace alpha::ag {

namespace {

struct Node {
  const char* op;
  Tensor out;
  std::vector<Tensor> inputs;
  BackwardFn backward;
};

thread_local std::vector<Node> t_tape;
thread_local bool t_grad_enabled = true;

// Only a GPU copy is current (e.g. a small grad computed there).
bool device_only(const Tensor& t) { return t.storage()->device() != nullptr && !t.storage()->host_valid(); }

// Adds g into t's grad slot; first contribution is stored as is (never mutated in place later). Two grads that
// live only on the GPU are added there whatever their size (grad accumulation): the size threshold would read
// both back to add them on the CPU. Same float adds either way.
void accumulate(Tensor& t, Tensor g) {
  if (g.shape() != t.shape()) g = ops::sum_to(g, t.shape());
  Tensor cur = t.grad();
  if (!cur.defined()) return t.set_grad(g);
  Tensor sum;
  if (Backend* be = active_backend(); be && device_only(cur) && device_only(g) && cur.dtype() == g.dtype()) {
    sum = be->add(cur, g);
    if (sum.defined()) ++dispatch_stats().gpu_ops;
  }
  t.set_grad(sum.defined() ? sum : ops::add(cur, g));
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
NoGrad::NoGrad() : prev_(t_grad_enabled) { t_grad_enabled = false; }
NoGrad::~NoGrad() { t_grad_enabled = prev_; }

Tensor record(const char* op, Tensor out, std::vector<Tensor> inputs, BackwardFn backward) {
  if (!t_grad_enabled) return out;
  bool any = false;
  for (const Tensor& t : inputs) any = any || (t.defined() && t.requires_grad());
  if (!any) return out;
  if (detail::hooks_active()) detail::on_forward(op, out, inputs, static_cast<int64_t>(t_tape.size()));  // check.h
  out.set_requires_grad(true);
  out.set_is_leaf(false);
  t_tape.push_back(Node{op, out, std::move(inputs), std::move(backward)});
  return out;
}

void backward(const Tensor& loss, double seed_value) { backward(loss, seed_value, LeafReadyFn{}); }

void backward(const Tensor& loss, double seed_value, const LeafReadyFn& on_leaf_ready) {
  ALPHA_CHECK(loss.defined() && loss.numel() == 1, ShapeError, "[backward] loss must have one element, got {}",
              loss.defined() ? loss.str() : "undefined");
  ALPHA_CHECK(loss.requires_grad(), ValueError, "[backward] loss does not require grad (nothing was recorded)");
  std::vector<Node> tape;
  tape.swap(t_tape);  // the tape is consumed even if a backward closure throws
  NoGrad no_grad;     // backward closures use plain ops; nothing they do is recorded
  // Each leaf's last use in the walk (the lowest tape index that takes it as an input).
  std::unordered_map<const void*, size_t> last_use;
  if (on_leaf_ready) {
    for (size_t i = 0; i < tape.size(); ++i)
      for (const Tensor& in : tape[i].inputs)
        if (in.defined() && in.requires_grad() && in.is_leaf()) last_use.try_emplace(in.impl(), i);
  }
  Tensor seed = Tensor::full(loss.shape(), seed_value, loss.dtype());
  Tensor root = loss;
  accumulate(root, seed);
  for (size_t i = tape.size(); i-- > 0;) {
    Node& n = tape[i];
    Tensor gout = n.out.grad();
    if (!gout.defined()) continue;  // output did not reach the loss
    std::vector<Tensor> grads = n.backward(gout);
    ALPHA_CHECK(grads.size() == n.inputs.size(), Error, "[backward] op '{}' returned {} grads for {} inputs",
                n.op, grads.size(), n.inputs.size());
    for (size_t k = 0; k < grads.size(); ++k) {
      Tensor& in = n.inputs[k];
      if (!in.defined() || !in.requires_grad() || !grads[k].defined()) continue;
      if (detail::hooks_active()) detail::on_backward(n.op, static_cast<int64_t>(i), k, grads[k]);
      accumulate(in, std::move(grads[k]));
    }
    if (on_leaf_ready) {
      for (const Tensor& in : n.inputs) {
        auto it = in.defined() ? last_use.find(in.impl()) : last_use.end();
        if (it != last_use.end() && it->second == i) {
          last_use.erase(it);  // an input listed twice on one node is reported once
          on_leaf_ready(in);
        }
      }
    }
    if (!n.out.is_leaf()) n.out.set_grad(Tensor());  // intermediate grads are not kept: frees memory
    tape[i] = Node{};  // drop saved activations as soon as they are used
  }
}

size_t tape_size() { return t_tape.size(); }
void clear_tape() { t_tape.clear(); }

}  // namespace alpha::ag
