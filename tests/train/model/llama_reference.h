// The Llama forward written the unfused way (separate q, k, v and gate, up GEMMs on the parameters themselves,
// RoPE on q and k separately, plain softmax attention), from a model's named parameters: the reference the fused
// forward of train/model/llama.cpp (joined weights, one RoPE pass, fused attention) must match up to float
// rounding, logits and gradients alike. No dropout. Legend: B, T, C, H, Hkv, D, V as in llama.cpp.
#pragma once
#include <cmath>
#include <map>
#include <string>

#include "autograd/ops.h"
#include "core/ops.h"
#include "model/gpt.h"

namespace alpha::test {

inline Tensor llama_reference_logits(const GPT& m, const Tensor& idx) {
  const GPTConfig& c = m.config();
  std::map<std::string, Tensor> params;
  for (const auto& [name, t] : m.named_parameters()) params[name] = t;
  auto w = [&](const std::string& name) {  // f16 mode casts each weight, as the model did before fusing
    const Tensor& t = params.at(name);
    return c.f16 ? ag::cast(t, DType::f16) : t;
  };
  const int64_t B = idx.size(0), T = idx.size(1), C = c.n_embd, H = c.n_head, Hkv = c.kv_heads(), D = C / H;
  const auto [cs, sn] = ops::rope_tables(c.block_size, D, c.rope_base);
  const double eps = c.norm_eps;
  const Tensor wte = w("model.embed_tokens.weight");
  Tensor x = ag::embedding(wte, idx);  // (B, T, C)
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Tensor h = ag::rmsnorm(x, w(p + "input_layernorm.weight"), eps);
    Tensor q = ag::reshape(ag::linear(h, w(p + "self_attn.q_proj.weight"), Tensor()), {B, T, H, D});
    Tensor k = ag::reshape(ag::linear(h, w(p + "self_attn.k_proj.weight"), Tensor()), {B, T, Hkv, D});
    const Tensor v = ag::reshape(ag::linear(h, w(p + "self_attn.v_proj.weight"), Tensor()), {B, T, Hkv, D});
    if (c.qk_norm) {
      q = ag::rmsnorm(q, w(p + "self_attn.q_norm.weight"), eps);
      k = ag::rmsnorm(k, w(p + "self_attn.k_norm.weight"), eps);
    }
    q = ag::rope(q, cs, sn, 0);
    k = ag::rope(k, cs, sn, 0);
    const Tensor qh = ag::transpose(q, 1, 2);  // (B, H, T, D)
    const Tensor kh = ag::transpose(ag::repeat_kv(k, H / Hkv), 1, 2), vh = ag::transpose(ag::repeat_kv(v, H / Hkv), 1, 2);
    Tensor att = ag::scale(ag::matmul(qh, kh, false, true), 1.0 / std::sqrt(static_cast<double>(D)));  // (B, H, T, T)
    Tensor y = ag::matmul(ag::softmax(att, /*causal=*/true), vh);
    y = ag::reshape(ag::contiguous(ag::transpose(y, 1, 2)), {B, T, C});
    x = ag::add(x, ag::linear(y, w(p + "self_attn.o_proj.weight"), Tensor()));
    const Tensor h2 = ag::rmsnorm(x, w(p + "post_attention_layernorm.weight"), eps);
    const Tensor up = ag::linear(h2, w(p + "mlp.up_proj.weight"), Tensor());
    const Tensor mlp = c.mlp_act == "swiglu" ? ag::swiglu(ag::linear(h2, w(p + "mlp.gate_proj.weight"), Tensor()), up)
                                             : ag::relu2(up);
    x = ag::add(x, ag::linear(mlp, w(p + "mlp.down_proj.weight"), Tensor()));
  }
  x = ag::rmsnorm(x, w("model.norm.weight"), eps);
  return ag::linear(x, c.tie_embeddings ? wte : w("lm_head.weight"), Tensor());  // (B, T, V)
}

}  // namespace alpha::test
