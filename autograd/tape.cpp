#include "autograd/tape.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <unordered_set>

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

// Deferred leaf gradients (defer_leaf_grads): jobs in registration order, and every contribution to a leaf that
// has a job pending, queued in walk order (a job's j-th result, or a gradient the walk computed after it).
struct Deferred {
  Tensor leaf;
  Tensor grad;      // a gradient from the walk, or
  int64_t job = -1;  // result `out` of jobs[job], or
  size_t out = 0;
  std::function<Tensor(Tensor)> fused;  // a gradient added by its op (contribute_fused)
};
std::atomic<bool> g_defer_enabled{true};
thread_local bool t_deferring = false;
thread_local std::vector<std::function<std::vector<Tensor>()>> t_jobs;
thread_local std::vector<Deferred> t_deferred;
thread_local std::unordered_set<const void*> t_pending;  // leaves with a job pending
thread_local int64_t t_jobs_run = 0;

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

// fn(the gradient so far, handed over) becomes t's gradient (contribute_fused).
void apply_fused(Tensor& t, const std::function<Tensor(Tensor)>& fn) {
  Tensor cur = t.grad();
  if (cur.defined()) t.set_grad(Tensor());
  Tensor g = fn(std::move(cur));
  ALPHA_CHECK(g.defined() && g.shape() == t.shape(), Error, "[backward] a fused gradient for {} came back as {}",
              t.str(), g.defined() ? g.str() : "undefined");
  t.set_grad(g);
}

// A leaf with a deferred job pending takes later contributions after it, in order.
void contribute(Tensor& t, Tensor g) {
  if (t_deferring && t_pending.count(t.impl())) return t_deferred.push_back(Deferred{t, std::move(g), -1, 0, {}});
  accumulate(t, std::move(g));
}

// Runs the deferred jobs back to back (the backend told that they may run side by side), then adds every queued
// contribution in walk order.
void run_deferred() {
  if (t_jobs.empty()) return;
  std::vector<std::vector<Tensor>> results(t_jobs.size());
  {
    Backend* be = active_backend();
    if (be) be->set_concurrent(true);
    struct Reset {  // a throwing job still ends the backend's concurrent mode
      Backend* be;
      ~Reset() {
        try {
          if (be) be->set_concurrent(false);
        } catch (...) {
        }
      }
    } reset{be};
    for (size_t j = 0; j < t_jobs.size(); ++j) results[j] = t_jobs[j]();
    t_jobs_run += static_cast<int64_t>(t_jobs.size());
    reset.be = nullptr;
    if (be) be->set_concurrent(false);
  }
  for (Deferred& d : t_deferred) {
    if (d.fused) {
      apply_fused(d.leaf, d.fused);
      continue;
    }
    if (d.job >= 0) {
      std::vector<Tensor>& r = results[static_cast<size_t>(d.job)];
      ALPHA_CHECK(d.out < r.size(), Error, "[backward] a deferred job returned {} grads for {} leaves", r.size(),
                  d.out + 1);
      d.grad = std::move(r[d.out]);  // the slot's handle is then the only one (contribute_fused may reuse it)
    }
    if (d.grad.defined()) accumulate(d.leaf, std::move(d.grad));
  }
}

void clear_deferred() {
  t_deferring = false;
  t_jobs.clear();
  t_deferred.clear();
  t_pending.clear();
}

}  // namespace

bool deferring_leaf_grads() { return t_deferring; }

void defer_leaf_grads(std::vector<Tensor> leaves, std::function<std::vector<Tensor>()> job) {
  ALPHA_CHECK(t_deferring, Error, "[backward] defer_leaf_grads outside a deferring backward");
  const auto j = static_cast<int64_t>(t_jobs.size());
  t_jobs.push_back(std::move(job));
  for (size_t k = 0; k < leaves.size(); ++k) {
    if (!leaves[k].defined()) continue;
    ALPHA_CHECK(leaves[k].is_leaf(), Error, "[backward] only leaf gradients can be deferred");
    t_pending.insert(leaves[k].impl());
    t_deferred.push_back(Deferred{leaves[k], Tensor(), j, k, {}});
  }
}

void set_defer_leaf_grads(bool on) { g_defer_enabled = on; }

namespace {
// On unless ALPHA_FUSED_ACCUMULATION=0: the vk kernel gives the separate add's bits on lavapipe and on the H200
// (test_vk "layernorm residual", docs/PERFORMANCE.md session 27).
bool fuse_from_env() {
  const char* e = std::getenv("ALPHA_FUSED_ACCUMULATION");
  return !(e && std::string(e) == "0");
}
std::atomic<bool> g_fuse_accumulation{fuse_from_env()};
thread_local bool t_in_backward = false;
}  // namespace

Tensor take_grad(const Tensor& input) {
  if (!t_in_backward || !g_fuse_accumulation || detail::hooks_active() || !input.defined()) return {};
  if (t_deferring && t_pending.count(input.impl())) return {};  // later contributions queue behind its job
  Tensor g = input.grad();
  if (!g.defined() || g.shape() != input.shape()) return {};
  Tensor slot = input;  // a handle on the same impl: clears the input's grad slot
  slot.set_grad(Tensor());
  return g;
}

bool contribute_fused(const Tensor& input, std::function<Tensor(Tensor acc)> fn) {
  if (!t_in_backward || !g_fuse_accumulation || detail::hooks_active() || !input.defined() || !input.requires_grad())
    return false;
  Tensor t = input;
  if (t_deferring && t_pending.count(t.impl())) {
    t_deferred.push_back(Deferred{t, Tensor(), -1, 0, std::move(fn)});
    return true;
  }
  apply_fused(t, fn);
  return true;
}

void set_fuse_grad_accumulation(bool on) { g_fuse_accumulation = on; }
bool fuse_grad_accumulation() { return g_fuse_accumulation; }
int64_t deferred_jobs_run() { return t_jobs_run; }

namespace {
thread_local double t_expected_seed = 0.0;
}
ExpectSeed::ExpectSeed(double seed) : prev_(t_expected_seed) { t_expected_seed = seed; }
ExpectSeed::~ExpectSeed() { t_expected_seed = prev_; }
double expected_seed() { return t_expected_seed; }

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
  // Deferred jobs are dropped if a closure throws; the tape is gone either way.
  struct DeferScope {
    ~DeferScope() { clear_deferred(); }
  } defer_scope;
  clear_deferred();
  t_deferring = g_defer_enabled && !on_leaf_ready && !detail::hooks_active() && active_backend() != nullptr;
  struct InBackward {  // take_grad works only inside the walk
    InBackward() { t_in_backward = true; }
    ~InBackward() { t_in_backward = false; }
  } in_backward;
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
      contribute(in, std::move(grads[k]));
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
  run_deferred();
}

size_t tape_size() { return t_tape.size(); }
void clear_tape() { t_tape.clear(); }

}  // namespace alpha::ag
