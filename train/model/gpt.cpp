#include "model/gpt.h"

#include <cmath>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"

namespace alpha {

Tensor GPT::add_param(const std::string& name, const Shape& shape, double std, Rng& rng, double fill) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.mutable_data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = std > 0 ? static_cast<float>(rng.normal() * std) : static_cast<float>(fill);
  t.set_requires_grad(true).set_name(name);
  params_.emplace_back(name, t);
  return t;
}

GPT::GPT(const GPTConfig& cfg, Rng& rng) : cfg_(cfg) {
  ALPHA_CHECK(cfg.n_embd % cfg.n_head == 0, ValueError, "[gpt] n_embd {} is not divisible by n_head {}", cfg.n_embd,
              cfg.n_head);
  ALPHA_CHECK(cfg.vocab_size > 0 && cfg.block_size > 0 && cfg.n_layer > 0, ValueError,
              "[gpt] vocab_size, block_size and n_layer must be positive");
  ALPHA_CHECK(cfg.arch == "gpt2" || cfg.arch == "llama", ValueError, "[gpt] arch must be gpt2 or llama, got \"{}\"",
              cfg.arch);
  if (cfg.llama()) {
    llama_init(rng);
    return;
  }
  const int64_t C = cfg.n_embd, V = cfg.vocab_size;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layer));
  wte_ = add_param("transformer.wte.weight", {V, C}, 0.02, rng);
  wpe_ = add_param("transformer.wpe.weight", {cfg.block_size, C}, 0.02, rng);
  for (int64_t l = 0; l < cfg.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    Block b;
    b.ln1_w = add_param(p + "ln_1.weight", {C}, 0, rng, 1.0);
    if (cfg.bias) b.ln1_b = add_param(p + "ln_1.bias", {C}, 0, rng);
    b.attn_w = add_param(p + "attn.c_attn.weight", {3 * C, C}, 0.02, rng);
    if (cfg.bias) b.attn_b = add_param(p + "attn.c_attn.bias", {3 * C}, 0, rng);
    b.proj_w = add_param(p + "attn.c_proj.weight", {C, C}, proj_std, rng);
    if (cfg.bias) b.proj_b = add_param(p + "attn.c_proj.bias", {C}, 0, rng);
    b.ln2_w = add_param(p + "ln_2.weight", {C}, 0, rng, 1.0);
    if (cfg.bias) b.ln2_b = add_param(p + "ln_2.bias", {C}, 0, rng);
    b.fc_w = add_param(p + "mlp.c_fc.weight", {4 * C, C}, 0.02, rng);
    if (cfg.bias) b.fc_b = add_param(p + "mlp.c_fc.bias", {4 * C}, 0, rng);
    b.fc2_w = add_param(p + "mlp.c_proj.weight", {C, 4 * C}, proj_std, rng);
    if (cfg.bias) b.fc2_b = add_param(p + "mlp.c_proj.bias", {C}, 0, rng);
    blocks_.push_back(b);
  }
  lnf_w_ = add_param("transformer.ln_f.weight", {C}, 0, rng, 1.0);
  if (cfg.bias) lnf_b_ = add_param("transformer.ln_f.bias", {C}, 0, rng);
}

std::vector<Tensor> GPT::parameters() const {
  std::vector<Tensor> out;
  for (const auto& [n, t] : params_) out.push_back(t);
  return out;
}

Tensor GPT::parameter(const std::string& name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  throw ValueError(fmt::format("[gpt] no parameter named \"{}\"", name));
}

int64_t GPT::num_parameters(bool include_position_embedding) const {
  int64_t n = 0;
  for (const auto& [name, t] : params_) n += t.numel();
  return include_position_embedding || !wpe_.defined() ? n : n - wpe_.numel();
}

double GPT::flops_per_token(int64_t T) const {
  // PaLM appendix B: 6N for the weights plus 12 * L * C * T for attention scores and values.
  const double N = static_cast<double>(num_parameters(false));
  return 6.0 * N + 12.0 * static_cast<double>(cfg_.n_layer * cfg_.n_embd * T);
}

// Hands x to the observer as "h.<layer>.<what>" (layer < 0: just "<what>") and returns it.
const Tensor& GPT::observe(int64_t layer, const char* what, const Tensor& x) const {
  if (observer_) observer_(layer < 0 ? std::string(what) : fmt::format("h.{}.{}", layer, what), x);
  return x;
}

Tensor GPT::linear16(const Tensor& x, const Tensor& w, const Tensor& b) {
  return x.dtype() == DType::f16 && w.dtype() == DType::f32 ? ag::linear_master(x, w, b) : ag::linear(x, w, b);
}

// f16 mode: the norms read f16 copies of their f32 parameters and hand f32 gradients back (deferred, tape.h).
Tensor GPT::norm16(const Tensor& x, const Tensor& w, const Tensor& b) {
  return x.dtype() == DType::f16 && w.dtype() == DType::f32 ? ag::layernorm_master(x, w, b) : ag::layernorm(x, w, b);
}

Tensor GPT::block_forward(const Block& b, const Tensor& x, bool training, Rng& rng, int64_t layer) const {
  const int64_t B = x.size(0), T = x.size(1), C = cfg_.n_embd, H = cfg_.n_head, D = C / H;
  const double p = cfg_.dropout;
  // Attention: (B, T, C) -> qkv (B, T, 3C) -> q, k, v (B, H, T, D) -> y (B, T, C)
  const int64_t l = layer;
  Tensor h = observe(l, "ln_1", norm16(x, b.ln1_w, b.ln1_b));
  Tensor qkv = observe(l, "attn.qkv", linear16(h, b.attn_w, b.attn_b));
  Tensor y;
  if (cfg_.fused_attention) {
    // One op reading the heads in place from qkv (f16 in f16 mode: y and qkv's gradient are f16 too).
    y = ag::attention_qkv(qkv, H, /*causal=*/true, p, rng, training);
  } else {
    auto head = [&](int64_t i) { return ag::transpose(ag::reshape(ag::narrow(qkv, 2, i * C, C), {B, T, H, D}), 1, 2); };
    Tensor q = head(0), k = head(1), v = head(2);
    Tensor att = ag::scale(ag::matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
    att = ag::dropout(ag::softmax(att, /*causal=*/true), p, rng, training);
    y = ag::matmul(att, v);                                              // (B, H, T, D)
    y = ag::reshape(ag::contiguous(ag::transpose(y, 1, 2)), {B, T, C});  // (B, T, C)
  }
  observe(l, "attn.y", y);
  Tensor x1 = residual(l, "attn.out", x, y, b.proj_w, b.proj_b, training, rng);
  observe(l, "resid_mid", x1);
  // MLP: (B, T, C) -> (B, T, 4C) -> (B, T, C)
  Tensor h2 = observe(l, "ln_2", norm16(x1, b.ln2_w, b.ln2_b));
  Tensor m = observe(l, "mlp.act", ag::gelu(linear16(h2, b.fc_w, b.fc_b)));
  return observe(l, "resid", residual(l, "mlp.out", x1, m, b.fc2_w, b.fc2_b, training, rng));
}

// r + dropout(linear16(x, w, b)), with the linear's output observed as "h.<layer>.<what>". Without dropout (or an
// observer, which needs that output) one node: the add rides in the GEMM's epilogue (ag::linear_master_residual).
Tensor GPT::residual(int64_t layer, const char* what, const Tensor& r, const Tensor& x, const Tensor& w,
                     const Tensor& b, bool training, Rng& rng) const {
  const double p = cfg_.dropout;
  if (!observer_ && (p == 0.0 || !training) && x.dtype() == DType::f16 && w.dtype() == DType::f32 &&
      r.dtype() == DType::f16)
    return ag::linear_master_residual(x, w, b, r);
  const Tensor a = observe(layer, what, linear16(x, w, b));
  return ag::add(r, ag::dropout(a, p, rng, training));
}

Tensor GPT::forward(const Tensor& idx, bool training, Rng& rng) const {
  ALPHA_CHECK(idx.dim() == 2, ShapeError, "[gpt] idx must be (B, T), got {}", idx.str());
  const int64_t T = idx.size(1);
  ALPHA_CHECK(T >= 1 && T <= cfg_.block_size, ShapeError, "[gpt] sequence length {} exceeds block_size {}", T,
              cfg_.block_size);
  if (cfg_.llama()) return llama_forward(idx, training, rng);
  // f16 mode: f16 copies of the embeddings; the tied head takes wte itself (linear16: an f32 gradient).
  auto w = [&](const Tensor& t) { return cfg_.f16 && t.defined() ? ag::cast(t, DType::f16) : t; };
  Tensor tok = ag::embedding_cast(wte_, idx, cfg_.f16 ? DType::f16 : wte_.dtype());  // (B, T, C)
  Tensor pos = ag::narrow(w(wpe_), 0, 0, T);                             // (T, C), broadcast over B
  Tensor x = observe(-1, "embed", ag::dropout(ag::add(tok, pos), cfg_.dropout, rng, training));
  for (size_t l = 0; l < blocks_.size(); ++l) x = block_forward(blocks_[l], x, training, rng, static_cast<int64_t>(l));
  x = observe(-1, "ln_f", norm16(x, lnf_w_, lnf_b_));
  return observe(-1, "logits", linear16(x, wte_, Tensor()));  // tied LM head: (B, T, C) @ (V, C)^T -> (B, T, V)
}

KVCache GPT::make_cache(int64_t B) const {
  const int64_t H = cfg_.llama() ? cfg_.kv_heads() : cfg_.n_head, D = cfg_.n_embd / cfg_.n_head;
  KVCache c;
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    c.k.push_back(Tensor::zeros({B, H, cfg_.block_size, D}));
    c.v.push_back(Tensor::zeros({B, H, cfg_.block_size, D}));
  }
  return c;
}

Tensor GPT::block_forward_cached(const Block& b, const Tensor& x, Tensor& k_cache, Tensor& v_cache,
                                 int64_t start) const {
  const int64_t B = x.size(0), Tn = x.size(1), C = cfg_.n_embd, H = cfg_.n_head, D = C / H, Tk = start + Tn;
  // Same math as block_forward with q for the Tn new positions and k, v over all Tk cached ones.
  Tensor h = ag::layernorm(x, b.ln1_w, b.ln1_b);
  Tensor qkv = ag::linear(h, b.attn_w, b.attn_b);  // (B, Tn, 3C)
  auto head = [&](int64_t i) { return ag::transpose(ag::reshape(ag::narrow(qkv, 2, i * C, C), {B, Tn, H, D}), 1, 2); };
  k_cache.narrow(2, start, Tn).copy_from(head(1));
  v_cache.narrow(2, start, Tn).copy_from(head(2));
  Tensor k = k_cache.narrow(2, 0, Tk), v = v_cache.narrow(2, 0, Tk);  // (B, H, Tk, D)
  Tensor y;  // (B, H, Tn, D); row i sees keys j <= i + start
  if (cfg_.fused_attention) {
    Rng unused;  // no dropout at inference
    y = ag::attention(head(0), k, v, /*causal=*/true, 0.0, unused, /*training=*/false);
  } else {
    Tensor att = ag::scale(ag::matmul(head(0), k, false, true), 1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, Tn, Tk)
    y = ag::matmul(ag::softmax(att, /*causal=*/true), v);
  }
  y = ag::reshape(ag::contiguous(ag::transpose(y, 1, 2)), {B, Tn, C});  // (B, Tn, C)
  Tensor x1 = ag::add(x, ag::linear(y, b.proj_w, b.proj_b));
  Tensor m = ag::gelu(ag::linear(ag::layernorm(x1, b.ln2_w, b.ln2_b), b.fc_w, b.fc_b));
  return ag::add(x1, ag::linear(m, b.fc2_w, b.fc2_b));
}

Tensor GPT::forward_cached(const Tensor& idx_new, KVCache& cache) const {
  ALPHA_CHECK(idx_new.dim() == 2, ShapeError, "[gpt] idx must be (B, T), got {}", idx_new.str());
  const int64_t Tn = idx_new.size(1), start = cache.length;
  ALPHA_CHECK(static_cast<int64_t>(cache.k.size()) == cfg_.n_layer && cache.k[0].size(0) == idx_new.size(0),
              ShapeError, "[gpt] KV cache does not fit idx {} (make it with make_cache(B))", idx_new.str());
  ALPHA_CHECK(Tn >= 1 && start + Tn <= cfg_.block_size, ShapeError,
              "[gpt] cached length {} + {} new positions exceeds block_size {}", start, Tn, cfg_.block_size);
  if (cfg_.llama()) return llama_forward_cached(idx_new, cache);
  ag::NoGrad no_grad;
  Tensor x = ag::add(ag::embedding(wte_, idx_new), ag::narrow(wpe_, 0, start, Tn));  // (B, Tn, C)
  for (size_t l = 0; l < blocks_.size(); ++l) x = block_forward_cached(blocks_[l], x, cache.k[l], cache.v[l], start);
  cache.length = start + Tn;
  x = ag::layernorm(x, lnf_w_, lnf_b_);
  return ag::linear(x, wte_, Tensor());  // (B, Tn, V)
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets, bool training, Rng& rng) const {
  ALPHA_CHECK(targets.shape() == idx.shape(), ShapeError, "[gpt] targets {} do not match idx {}", targets.str(),
              idx.str());
  return loss_of(forward(idx, training, rng), targets);
}

Tensor GPT::loss_of(const Tensor& logits, const Tensor& targets) const {
  const bool fits = logits.dim() == 3 && targets.dim() == 2 && targets.size(0) == logits.size(0) &&
                    targets.size(1) == logits.size(1);
  ALPHA_CHECK(fits, ShapeError, "[gpt] targets {} do not match logits {}", targets.str(), logits.str());
  return ag::cross_entropy(ag::reshape(logits, {-1, cfg_.vocab_size}), targets.reshape({-1}));
}

}  // namespace alpha
