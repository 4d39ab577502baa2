// Hugging Face model directories: what `transformers`' save_pretrained writes and from_pretrained reads.
// `alpha export CHECKPOINT --hf DIR` writes
//   DIR/model.safetensors   GPT2LMHeadModel's state_dict names ("transformer.h.0.attn.c_attn.weight", Conv1D
//                           weights transposed to (in, out); the tied lm_head.weight left out, as HF does), F32,
//                           with Alpha's metadata (alpha.model, alpha.tokenizer) beside format "pt"
//   DIR/config.json         GPT2Config keys (model_type gpt2, n_embd, n_layer, n_head, n_positions, vocab_size,
//                           layer_norm_epsilon 1e-5, activation_function gelu_new, tie_word_embeddings true, ...)
//   DIR/vocab.json, DIR/merges.txt, DIR/tokenizer_config.json   for gpt2 and bpe tokenizers (GPT2Tokenizer
//                           files: tokens in GPT-2's byte alphabet); char and word tokenizers have no HF
//                           equivalent and travel only in the safetensors metadata.
// A model.arch llama model is written as LlamaForCausalLM instead: its parameter names are HF's already
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight ..., nn.Linear (out, in), lm_head.weight
// only when untied) and config.json holds LlamaConfig keys (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, rope_theta, rms_norm_eps, hidden_act silu,
// tie_word_embeddings, ...). qk_norm and mlp_act relu2 have no LlamaForCausalLM equivalent and are refused.
// `"init_from": DIR` reads such a directory back (ours or one transformers wrote for a GPT-2 or Llama model).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "model/gpt.h"
#include "data/tokenizer.h"

namespace alpha {

// A directory holding config.json and model.safetensors.
bool is_hf_dir(const std::string& path);

// GPT2Config of `mc` as config.json holds it (bos/eos ids from a gpt2 tokenizer's <|endoftext|>, else null).
nlohmann::json hf_gpt2_config(const GPTConfig& mc, const Tokenizer* tok);

// LlamaConfig of a model.arch llama `mc` as config.json holds it.
nlohmann::json hf_llama_config(const GPTConfig& mc, const Tokenizer* tok);

// Writes DIR (created if missing; each file crash-safely). Throws CheckpointError on I/O failure.
void export_hf(const std::string& dir, const GPT& model, const Tokenizer* tok);

// Loads DIR into `model`: config.json must describe the model's shape (model_type gpt2, n_embd, n_layer, n_head,
// vocab_size equal; n_positions >= block_size; layer_norm_epsilon 1e-5; a tanh GELU; tied embeddings, and an
// lm_head.weight in the file equal to wte), then the tensors load as load_safetensors_into's do; a gpt2
// tokenizer's vocab.json must be the run's encoder. A llama model needs model_type llama and every LlamaConfig
// key equal to its own (LlamaConfig's defaults for absent keys), then every parameter by name and shape.
// CheckpointError "[checkpoint] ..." naming the key or tensor otherwise.
void load_hf_into(GPT& model, const std::string& dir, const Tokenizer& tok);

}  // namespace alpha
