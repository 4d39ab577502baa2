// safetensors interop with GPT-2 Hugging Face tensor names (wte.weight, h.N.attn.c_attn.weight, ln_f.bias ...).
// File: u64 LE header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
// {str: str}} padded with spaces to 8 bytes, then the data. HF GPT-2 uses Conv1D, so every Linear weight inside a
// block is stored transposed, (in, out). A model trained with bias=false gets zero biases for every bias tensor
// (LayerNorm and Linear), so HF's GPT2Model loads the file unchanged; the tied LM head is not written.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "model/gpt.h"
#include "data/tokenizer.h"

namespace alpha {

// Our parameter name -> HF name ("transformer.h.0.attn.c_attn.weight" -> "h.0.attn.c_attn.weight").
std::string hf_gpt2_name(const std::string& ours);
// True for the block weights HF stores as Conv1D (in, out): attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
bool hf_gpt2_transposed(const std::string& ours);

// One F32 tensor to write: its name, shape and row-major values.
struct SafetensorEntry {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

// Writes the entries in order (crash-safely) with `metadata` as "__metadata__" (a JSON object of strings).
void write_safetensors(const std::string& path, const std::vector<SafetensorEntry>& entries,
                       const nlohmann::json& metadata);

// `model`'s weights in GPT-2 HF layout (Conv1D weights transposed, zero biases for a bias=false model), named
// like GPT2Model ("h.0.attn.c_attn.weight") or, with lm_head_names, like GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight"; the tied lm_head.weight is not written, as HF's save_pretrained does).
std::vector<SafetensorEntry> gpt2_hf_tensors(const GPT& model, bool lm_head_names);
// Metadata of Alpha's exports: format "pt", alpha.model, alpha.bias, alpha.tokenizer (when `tok` is given).
nlohmann::json alpha_safetensors_metadata(const GPTConfig& mc, const Tokenizer* tok);

// Writes `model`'s weights (crash-safely) with metadata: format "pt", alpha.model (JSON of the GPT config),
// alpha.bias, alpha.tokenizer (JSON, when `tok` is given). Throws CheckpointError on I/O failure.
void export_safetensors(const std::string& path, const GPT& model, const Tokenizer* tok);

// Reads and bounds-checks a safetensors file (F32 tensors only). metadata may be null.
NamedTensors read_safetensors(const std::string& path, nlohmann::json* metadata);

// Initializes `model` from a GPT-2-named safetensors file: every parameter must be present with the expected
// (transposed) shape; wpe may have more rows than block_size (cropped, like nanoGPT); a bias the model lacks
// must be all zeros in the file. If the file records a tokenizer it must equal `tok`. CheckpointError otherwise.
void load_safetensors_into(GPT& model, const std::string& path, const Tokenizer& tok);
// The same from tensors already read (names with or without the "transformer." prefix; renamed in place).
void load_gpt2_tensors_into(GPT& model, NamedTensors& file, const nlohmann::json& meta, const std::string& path,
                            const Tokenizer& tok);

}  // namespace alpha
