// GPT: nanoGPT / GPT-2 decoder. Token + learned position embeddings, n_layer pre-LayerNorm blocks (causal
// multi-head attention with one fused QKV projection, MLP 4C with GELU), final LayerNorm, LM head tied to
// the token embedding. Parameter names follow nanoGPT's state_dict so weights map across tools.
// arch "llama" (train/model/llama.cpp): Llama-style blocks instead: RMSNorm, rotary position embeddings (no
// position table), separate q/k/v projections with grouped-query attention, SwiGLU (or ReLU²) MLP, no biases,
// optional QK-norm and untied LM head; parameter names are Hugging Face LlamaForCausalLM's (llama.cpp lists them).
//
// Dimension legend: B batch, T time (<= block_size), C n_embd, H n_head, D = C / H, V vocab_size,
// Hkv n_kv_head, F MLP hidden size.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace alpha {

// Keys and values of every layer for the positions seen so far, for incremental decoding (GPT::forward_cached).
// k[l], v[l] are (B, H, block_size, D) (llama: (B, Hkv, block_size, D), keys after RoPE); positions
// [0, length) are filled.
struct KVCache {
  std::vector<Tensor> k, v;
  int64_t length = 0;
  void clear() { length = 0; }
};

struct GPTConfig {
  int64_t n_layer = 6, n_head = 6, n_embd = 384, block_size = 256, vocab_size = 65;
  double dropout = 0.0;
  bool bias = false;
  // Attention as one fused op (ag::attention) or the reference composition of matmul/softmax/dropout ops
  // (config model.attention = "fused" | "unfused"). Same math and dropout masks; fused never stores (B, H, T, T).
  bool fused_attention = true;
  // f16 storage (config model.precision = "f16"): forward() casts the f32 master weights to f16 (the casts'
  // backward hands f32 gradients to them), activations are f16, the loss f32. forward_cached stays f32.
  bool f16 = false;
  // Llama-style blocks (config model.arch, docs/config.md); the fields below apply to arch "llama" only.
  std::string arch = "gpt2";       // gpt2 | llama
  int64_t n_kv_head = 0;           // key/value heads (grouped-query attention); 0 = n_head; divides n_head
  int64_t mlp_hidden = 0;          // F; 0 = default: swiglu 8C/3 rounded up to a multiple of 64, relu2 4C
  double rope_base = 10000.0;      // RoPE theta
  bool tie_embeddings = true;      // false: a separate lm_head.weight (V, C)
  bool qk_norm = false;            // RMSNorm (weight (D)) on each q and k head before RoPE
  std::string mlp_act = "swiglu";  // swiglu (gate_proj, up_proj, down_proj) | relu2 (up_proj, down_proj)
  double norm_eps = 1e-5;          // RMSNorm epsilon
  bool llama() const { return arch == "llama"; }
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t mlp_width() const;       // F after the default
};

// Parameter values of a model with this config (what its named_parameters hold), without building it.
int64_t expected_parameters(const GPTConfig& cfg);

// Called by GPT::forward at named points with the activation there, in forward order (train/inspect uses it):
// "embed" (B, T, C); per layer L: "h.L.ln_1", "h.L.attn.qkv" (B, T, 3C), "h.L.attn.y" (heads merged),
// "h.L.attn.out" (c_proj), "h.L.resid_mid", "h.L.ln_2", "h.L.mlp.act" (B, T, 4C, after GELU), "h.L.mlp.out",
// "h.L.resid" (the block's output); then "ln_f" and "logits" (B, T, V). The tensor may live on the GPU or be f16.
// arch llama reports no points yet (`alpha inspect` refuses it).
using ActivationObserver = std::function<void(const std::string& name, const Tensor& x)>;

class GPT {
 public:
  // Weights ~ N(0, 0.02), residual projections (c_proj) ~ N(0, 0.02 / sqrt(2 n_layer)), biases 0, LN 1/0.
  GPT(const GPTConfig& cfg, Rng& init_rng);

  const GPTConfig& config() const { return cfg_; }
  // (name, tensor) in a fixed order; every tensor is an f32 leaf that requires grad.
  const std::vector<std::pair<std::string, Tensor>>& named_parameters() const { return params_; }
  std::vector<Tensor> parameters() const;
  Tensor parameter(const std::string& name) const;  // throws ValueError for unknown names
  int64_t num_parameters(bool include_position_embedding = true) const;

  // idx i32 (B, T) -> logits (B, T, V). `dropout_rng` draws the dropout masks when training.
  Tensor forward(const Tensor& idx, bool training, Rng& dropout_rng) const;
  // Inference with a KV cache (no gradients, no dropout): idx_new i32 (B, Tn) holds the tokens at positions
  // [cache.length, cache.length + Tn); their k, v are appended to the cache and attention runs over all cached
  // positions, so each new token costs one position. Returns logits (B, Tn, V) equal to forward()'s at those
  // positions. cache.length + Tn must be <= block_size (callers re-prefill a cropped window past that).
  KVCache make_cache(int64_t B) const;
  Tensor forward_cached(const Tensor& idx_new, KVCache& cache) const;
  // Mean cross-entropy of forward(idx) against targets i32 (B, T): loss_of(forward(idx), targets).
  Tensor loss(const Tensor& idx, const Tensor& targets, bool training, Rng& dropout_rng) const;
  Tensor loss_of(const Tensor& logits, const Tensor& targets) const;  // logits (B, T, V), targets i32 (B, T)
  // Installs (or, with an empty function, removes) the activation observer; no observer costs nothing.
  void set_observer(ActivationObserver fn) { observer_ = std::move(fn); }
  // FLOPs of one forward+backward per token (6N + attention), for MFU.
  double flops_per_token(int64_t T) const;

 private:
  struct Block {
    Tensor ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  struct LlamaBlock {  // train/model/llama.cpp
    Tensor in_norm, q, k, v, o, q_norm, k_norm, post_norm, gate, up, down;
  };
  void llama_init(Rng& rng);
  Tensor llama_forward(const Tensor& idx, bool training, Rng& rng) const;
  Tensor llama_block(const LlamaBlock& b, const Tensor& x, int64_t pos0, bool training, Rng& rng, Tensor* k_cache,
                     Tensor* v_cache) const;
  Tensor llama_forward_cached(const Tensor& idx_new, KVCache& cache) const;
  Tensor add_param(const std::string& name, const Shape& shape, double std, Rng& rng, double fill = 0.0);
  Tensor block_forward(const Block& blk, const Tensor& x, bool training, Rng& rng, int64_t layer) const;
  // f16 activations against an f32 master weight: ag::linear_master (the weight's gradient stays f32); else linear.
  static Tensor linear16(const Tensor& x, const Tensor& w, const Tensor& b);
  static Tensor norm16(const Tensor& x, const Tensor& w, const Tensor& b);
  Tensor residual(int64_t layer, const char* what, const Tensor& r, const Tensor& x, const Tensor& w, const Tensor& b,
                  bool training, Rng& rng) const;
  const Tensor& observe(int64_t layer, const char* what, const Tensor& x) const;
  Tensor block_forward_cached(const Block& blk, const Tensor& x, Tensor& k_cache, Tensor& v_cache, int64_t start) const;

  GPTConfig cfg_;
  std::vector<std::pair<std::string, Tensor>> params_;
  Tensor wte_, wpe_, lnf_w_, lnf_b_;
  std::vector<Block> blocks_;
  std::vector<LlamaBlock> lblocks_;
  Tensor lm_head_, rope_cos_, rope_sin_;  // llama: untied head (or undefined), RoPE tables (block_size, D/2) f32
  ActivationObserver observer_;
};

}  // namespace alpha
