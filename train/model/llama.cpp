// Llama-style blocks for GPT (arch "llama"): pre-RMSNorm blocks of grouped-query causal attention with rotary
// position embeddings and a SwiGLU (or ReLU²) MLP, no biases, final RMSNorm, LM head tied to the token
// embedding or separate. Legend: B batch, T time, C n_embd, H n_head, Hkv n_kv_head, D = C / H, F MLP width.
//
// Parameter names are Hugging Face LlamaForCausalLM's state_dict keys (shapes as torch nn.Linear: (out, in)),
// so an export maps them 1:1 with no permutation (RoPE here is HF's rotate-half convention):
//   model.embed_tokens.weight                     (V, C)
//   model.layers.{i}.input_layernorm.weight       (C)
//   model.layers.{i}.self_attn.q_proj.weight      (H * D, C)
//   model.layers.{i}.self_attn.k_proj.weight      (Hkv * D, C)
//   model.layers.{i}.self_attn.v_proj.weight      (Hkv * D, C)
//   model.layers.{i}.self_attn.o_proj.weight      (C, H * D)
//   model.layers.{i}.self_attn.q_norm.weight      (D)   qk_norm only (Qwen3's / OLMo-2-style per-head names)
//   model.layers.{i}.self_attn.k_norm.weight      (D)   qk_norm only
//   model.layers.{i}.post_attention_layernorm.weight (C)
//   model.layers.{i}.mlp.gate_proj.weight         (F, C) swiglu only
//   model.layers.{i}.mlp.up_proj.weight           (F, C)
//   model.layers.{i}.mlp.down_proj.weight         (C, F)
//   model.norm.weight                             (C)
//   lm_head.weight                                (V, C) tie_embeddings false only (HF: tie_word_embeddings)
// HF config keys: hidden_size C, intermediate_size F, num_attention_heads H, num_key_value_heads Hkv,
// num_hidden_layers, max_position_embeddings block_size, rope_theta rope_base, rms_norm_eps norm_eps (1e-5),
// attention_bias false, mlp_bias false, hidden_act "silu" (relu2 has no HF Llama equivalent).
#include <cmath>
#include <tuple>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/error.h"
#include "core/ops.h"
#include "model/gpt.h"

namespace alpha {

int64_t GPTConfig::mlp_width() const {
  if (mlp_hidden > 0) return mlp_hidden;
  if (!llama()) return 4 * n_embd;
  if (mlp_act == "relu2") return 4 * n_embd;
  return (8 * n_embd / 3 + 63) / 64 * 64;  // Llama's 2/3 of 4C (same weights as a 4C two-matrix MLP), to 64
}

int64_t expected_parameters(const GPTConfig& c) {
  const int64_t C = c.n_embd, V = c.vocab_size, L = c.n_layer;
  if (!c.llama()) {
    const int64_t per = 12 * C * C + (c.bias ? 13 * C : 2 * C);  // c_attn, c_proj, c_fc, mlp.c_proj; LNs (+ biases)
    return (V + c.block_size) * C + L * per + (c.bias ? 2 * C : C);
  }
  const int64_t D = C / c.n_head, Hkv = c.kv_heads(), F = c.mlp_width();
  const int64_t attn = 2 * C * C + 2 * Hkv * D * C + (c.qk_norm ? 2 * D : 0);
  const int64_t mlp = (c.mlp_act == "swiglu" ? 3 : 2) * C * F;
  return V * C * (c.tie_embeddings ? 1 : 2) + L * (attn + mlp + 2 * C) + C;
}

void GPT::llama_init(Rng& rng) {
  const GPTConfig& c = cfg_;
  const int64_t C = c.n_embd, V = c.vocab_size, H = c.n_head, Hkv = c.kv_heads(), F = c.mlp_width();
  ALPHA_CHECK(c.n_kv_head >= 0 && H % Hkv == 0, ValueError, "[gpt] n_head {} is not a multiple of n_kv_head {}", H, Hkv);
  ALPHA_CHECK((C / H) % 2 == 0, ValueError, "[gpt] RoPE needs an even head size, got n_embd / n_head = {}", C / H);
  ALPHA_CHECK(c.mlp_act == "swiglu" || c.mlp_act == "relu2", ValueError, "[gpt] mlp_act must be swiglu or relu2, got \"{}\"",
              c.mlp_act);
  ALPHA_CHECK(!c.bias, ValueError, "[gpt] arch llama has no biases (bias must be false)");
  ALPHA_CHECK(F >= 1 && c.rope_base > 1 && c.norm_eps > 0, ValueError,
              "[gpt] llama needs mlp_hidden >= 1, rope_base > 1 and norm_eps > 0");
  const int64_t D = C / H;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  wte_ = add_param("model.embed_tokens.weight", {V, C}, 0.02, rng);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaBlock b;
    b.in_norm = add_param(p + "input_layernorm.weight", {C}, 0, rng, 1.0);
    b.q = add_param(p + "self_attn.q_proj.weight", {H * D, C}, 0.02, rng);
    b.k = add_param(p + "self_attn.k_proj.weight", {Hkv * D, C}, 0.02, rng);
    b.v = add_param(p + "self_attn.v_proj.weight", {Hkv * D, C}, 0.02, rng);
    b.o = add_param(p + "self_attn.o_proj.weight", {C, H * D}, proj_std, rng);
    if (c.qk_norm) {
      b.q_norm = add_param(p + "self_attn.q_norm.weight", {D}, 0, rng, 1.0);
      b.k_norm = add_param(p + "self_attn.k_norm.weight", {D}, 0, rng, 1.0);
    }
    b.post_norm = add_param(p + "post_attention_layernorm.weight", {C}, 0, rng, 1.0);
    if (c.mlp_act == "swiglu") b.gate = add_param(p + "mlp.gate_proj.weight", {F, C}, 0.02, rng);
    b.up = add_param(p + "mlp.up_proj.weight", {F, C}, 0.02, rng);
    b.down = add_param(p + "mlp.down_proj.weight", {C, F}, proj_std, rng);
    lblocks_.push_back(b);
  }
  lnf_w_ = add_param("model.norm.weight", {C}, 0, rng, 1.0);
  if (!c.tie_embeddings) lm_head_ = add_param("lm_head.weight", {V, C}, 0.02, rng);
  std::tie(rope_cos_, rope_sin_) = ops::rope_tables(c.block_size, D, c.rope_base);
}

// One block at positions [pos0, pos0 + T) of x (B, T, C). Training/eval (no cache): attention over x's own
// positions, q/k/v from one GEMM against the three weights joined per forward (ag::cat: each parameter gets
// its slice of the gradient) and gate/up from one GEMM likewise. With a cache (k_cache, v_cache (B, Hkv,
// block_size, D), inference): separate GEMMs (no weight copies per token); the new keys and values go into the
// cache at pos0 and attention runs over all pos0 + T cached positions.
Tensor GPT::llama_block(const LlamaBlock& b, const Tensor& x, int64_t pos0, bool training, Rng& rng, Tensor* k_cache,
                        Tensor* v_cache) const {
  const bool cached = k_cache != nullptr;
  // f16 mode (training/eval): the f32 master weights run as f16 casts; the casts' backward hands back f32 grads.
  auto w = [&](const Tensor& t) { return cfg_.f16 && !cached && t.defined() ? ag::cast(t, DType::f16) : t; };
  const int64_t B = x.size(0), T = x.size(1), C = cfg_.n_embd, H = cfg_.n_head, Hkv = cfg_.kv_heads(), D = C / H;
  const double p = cached ? 0.0 : cfg_.dropout, eps = cfg_.norm_eps;
  const bool drop = training && !cached;
  // Attention: (B, T, C) -> q (B, T, H, D), k, v (B, T, Hkv, D) -> RoPE on q, k -> y (B, T, C)
  const Tensor h = ag::rmsnorm(x, w(b.in_norm), eps);
  Tensor q, k, v, y;
  if (cached) {
    q = ag::reshape(ag::linear(h, b.q, Tensor()), {B, T, H, D});
    k = ag::reshape(ag::linear(h, b.k, Tensor()), {B, T, Hkv, D});
    v = ag::reshape(ag::linear(h, b.v, Tensor()), {B, T, Hkv, D});
  } else {
    const Tensor qkv = ag::reshape(linear16(h, ag::cat({b.q, b.k, b.v}, 0), Tensor()), {B, T, H + 2 * Hkv, D});
    if (!cfg_.qk_norm) {
      // One RoPE pass over the whole projection: q and k heads rotate, v's are copied through.
      const Tensor r = ag::rope(qkv, rope_cos_, rope_sin_, pos0, H + Hkv);
      if (Hkv == H && cfg_.fused_attention) {  // GPT-2's path: heads read in place, one packed gradient back
        y = ag::attention_qkv(ag::reshape(r, {B, T, 3 * C}), H, /*causal=*/true, p, rng, drop);
      } else {
        q = ag::narrow(r, 2, 0, H);
        k = ag::narrow(r, 2, H, Hkv);
        v = ag::narrow(r, 2, H + Hkv, Hkv);
      }
    } else {  // QK-norm (per-head RMSNorm, before RoPE) runs on contiguous q and k
      q = ag::contiguous(ag::narrow(qkv, 2, 0, H));
      k = ag::contiguous(ag::narrow(qkv, 2, H, Hkv));
      v = ag::narrow(qkv, 2, H + Hkv, Hkv);
    }
  }
  if (!y.defined()) {
    if (cfg_.qk_norm) {
      q = ag::rmsnorm(q, w(b.q_norm), eps);
      k = ag::rmsnorm(k, w(b.k_norm), eps);
    }
    if (cached || cfg_.qk_norm) {
      q = ag::rope(q, rope_cos_, rope_sin_, pos0);
      k = ag::rope(k, rope_cos_, rope_sin_, pos0);
    }
    Tensor qh = ag::transpose(q, 1, 2), kh, vh;  // (B, H, T, D); keys and values (B, H, Tk, D)
    if (cached) {  // inference: append to the cache, attend over [0, pos0 + T)
      const int64_t Tk = pos0 + T, rep = H / Hkv;
      k_cache->narrow(2, pos0, T).copy_from(k.transpose(1, 2));
      v_cache->narrow(2, pos0, T).copy_from(v.transpose(1, 2));
      auto heads = [&](const Tensor& cache) {  // (B, Hkv, Tk, D) -> (B, H, Tk, D)
        return cache.narrow(2, 0, Tk).unsqueeze(2).expand({B, Hkv, rep, Tk, D}).reshape({B, H, Tk, D});
      };
      kh = heads(*k_cache);
      vh = heads(*v_cache);
    } else {
      kh = ag::transpose(ag::repeat_kv(k, H / Hkv), 1, 2);
      vh = ag::transpose(ag::repeat_kv(v, H / Hkv), 1, 2);
    }
    // (B, H, T, D); row i sees keys j <= i + (Tk - T)
    if (cfg_.fused_attention) {
      y = ag::attention(qh, kh, vh, /*causal=*/true, p, rng, drop);
    } else {
      Tensor att = ag::scale(ag::matmul(qh, kh, false, true), 1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, Tk)
      att = ag::dropout(ag::softmax(att, /*causal=*/true), p, rng, drop);
      y = ag::matmul(att, vh);
    }
    y = ag::reshape(ag::contiguous(ag::transpose(y, 1, 2)), {B, T, C});  // (B, T, C)
  }
  Tensor x1 = ag::add(x, ag::dropout(linear16(y, b.o, Tensor()), p, rng, drop));
  // MLP: (B, T, C) -> (B, T, F) -> (B, T, C); SwiGLU on the halves of one (B, T, 2F) gate/up projection
  const Tensor h2 = ag::rmsnorm(x1, w(b.post_norm), eps);
  Tensor m;
  if (cfg_.mlp_act != "swiglu") m = ag::relu2(linear16(h2, b.up, Tensor()));
  else if (cached) m = ag::swiglu(ag::linear(h2, b.gate, Tensor()), ag::linear(h2, b.up, Tensor()));
  else m = ag::swiglu_packed(linear16(h2, ag::cat({b.gate, b.up}, 0), Tensor()));
  return ag::add(x1, ag::dropout(linear16(m, b.down, Tensor()), p, rng, drop));
}

Tensor GPT::llama_forward(const Tensor& idx, bool training, Rng& rng) const {
  auto w = [&](const Tensor& t) { return cfg_.f16 && t.defined() ? ag::cast(t, DType::f16) : t; };
  Tensor x = ag::dropout(ag::embedding_cast(wte_, idx, cfg_.f16 ? DType::f16 : wte_.dtype()), cfg_.dropout, rng,
                         training);  // (B, T, C)
  for (const LlamaBlock& b : lblocks_) x = llama_block(b, x, 0, training, rng, nullptr, nullptr);
  x = ag::rmsnorm(x, w(lnf_w_), cfg_.norm_eps);
  return linear16(x, lm_head_.defined() ? lm_head_ : wte_, Tensor());  // (B, T, V)
}

Tensor GPT::llama_forward_cached(const Tensor& idx_new, KVCache& cache) const {
  ag::NoGrad no_grad;
  const int64_t start = cache.length;
  Rng unused;  // no dropout at inference
  Tensor x = ag::embedding(wte_, idx_new);  // (B, Tn, C)
  for (size_t l = 0; l < lblocks_.size(); ++l)
    x = llama_block(lblocks_[l], x, start, false, unused, &cache.k[l], &cache.v[l]);
  cache.length = start + idx_new.size(1);
  x = ag::rmsnorm(x, lnf_w_, cfg_.norm_eps);
  return ag::linear(x, lm_head_.defined() ? lm_head_ : wte_, Tensor());  // (B, Tn, V)
}

}  // namespace alpha
