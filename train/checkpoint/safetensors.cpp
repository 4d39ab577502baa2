#include "checkpoint/safetensors.h"
#include "config/json_limits.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace alpha {

namespace {

const char* kPrefix = "transformer.";

// Transposed copy of a row-major (R, C) float matrix -> (C, R).
std::vector<float> transposed(const float* p, int64_t R, int64_t C) {
  std::vector<float> out(static_cast<size_t>(R * C));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out[static_cast<size_t>(c * R + r)] = p[r * C + c];
  return out;
}

// (our name, HF shape) for every tensor the export writes, including zero biases absent from a bias=false model.
std::vector<std::pair<std::string, Shape>> export_layout(const GPTConfig& mc) {
  const int64_t C = mc.n_embd;
  std::vector<std::pair<std::string, Shape>> out = {{"transformer.wte.weight", {mc.vocab_size, C}},
                                                    {"transformer.wpe.weight", {mc.block_size, C}}};
  for (int64_t l = 0; l < mc.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (auto& e : std::vector<std::pair<std::string, Shape>>{
             {"ln_1.weight", {C}}, {"ln_1.bias", {C}}, {"attn.c_attn.weight", {C, 3 * C}}, {"attn.c_attn.bias", {3 * C}},
             {"attn.c_proj.weight", {C, C}}, {"attn.c_proj.bias", {C}}, {"ln_2.weight", {C}}, {"ln_2.bias", {C}},
             {"mlp.c_fc.weight", {C, 4 * C}}, {"mlp.c_fc.bias", {4 * C}}, {"mlp.c_proj.weight", {4 * C, C}},
             {"mlp.c_proj.bias", {C}}})
      out.emplace_back(p + e.first, e.second);
  }
  out.push_back({"transformer.ln_f.weight", {C}});
  out.push_back({"transformer.ln_f.bias", {C}});
  return out;
}

const Tensor* find(const std::vector<std::pair<std::string, Tensor>>& v, const std::string& name) {
  for (const auto& [n, t] : v)
    if (n == name) return &t;
  return nullptr;
}

}  // namespace

std::string hf_gpt2_name(const std::string& ours) {
  return ours.rfind(kPrefix, 0) == 0 ? ours.substr(std::strlen(kPrefix)) : ours;
}

bool hf_gpt2_transposed(const std::string& ours) {
  const bool weight = ours.size() > 7 && ours.substr(ours.size() - 7) == ".weight";
  return weight && (ours.find(".attn.c_attn.") != std::string::npos || ours.find(".attn.c_proj.") != std::string::npos ||
                    ours.find(".mlp.c_fc.") != std::string::npos || ours.find(".mlp.c_proj.") != std::string::npos);
}

std::vector<SafetensorEntry> gpt2_hf_tensors(const GPT& model, bool lm_head_names) {
  std::vector<SafetensorEntry> out;
  for (const auto& [name, shape] : export_layout(model.config())) {
    SafetensorEntry e{lm_head_names ? name : hf_gpt2_name(name), shape, {}};
    const Tensor* t = find(model.named_parameters(), name);
    if (!t) {
      e.values.assign(static_cast<size_t>(shape_numel(shape)), 0.0f);  // bias of a bias=false model
    } else {
      const Tensor c = t->contiguous();
      const float* p = c.data<float>();
      e.values = hf_gpt2_transposed(name) ? transposed(p, c.size(0), c.size(1)) : std::vector<float>(p, p + c.numel());
    }
    out.push_back(std::move(e));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorEntry>& entries,
                       const nlohmann::json& metadata) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const SafetensorEntry& e : entries) {
    ALPHA_CHECK(static_cast<int64_t>(e.values.size()) == shape_numel(e.shape), ValueError,
                "[safetensors] tensor \"{}\" has {} values for shape {}", e.name, e.values.size(), shape_str(e.shape));
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(e.values.data()), e.values.size() * sizeof(float));
    header[e.name] = {{"dtype", "F32"}, {"shape", e.shape}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = metadata;
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::string file(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(file.data(), &n, 8);
  file += h;
  file += data;
  write_file_atomic(path, file);
}

nlohmann::json alpha_safetensors_metadata(const GPTConfig& mc, const Tokenizer* tok) {
  nlohmann::json mj = {{"n_layer", mc.n_layer}, {"n_head", mc.n_head}, {"n_embd", mc.n_embd},
                       {"block_size", mc.block_size}, {"vocab_size", mc.vocab_size}, {"bias", mc.bias}};
  nlohmann::json meta = {{"format", "pt"}, {"alpha.model", mj.dump()}, {"alpha.bias", mc.bias ? "true" : "false"}};
  if (tok) meta["alpha.tokenizer"] = tok->to_json().dump();
  return meta;
}

void export_safetensors(const std::string& path, const GPT& model, const Tokenizer* tok) {
  ALPHA_CHECK(!model.config().llama(), CheckpointError,
              "[safetensors] \"{}\": the GPT-2 safetensors layout cannot hold an arch llama model", path);
  write_safetensors(path, gpt2_hf_tensors(model, /*lm_head_names=*/false), alpha_safetensors_metadata(model.config(), tok));
}

NamedTensors read_safetensors(const std::string& path, nlohmann::json* metadata) {
  std::ifstream f(path, std::ios::binary);
  ALPHA_CHECK(f.good(), CheckpointError, "[safetensors] cannot open \"{}\": {}", path, std::strerror(errno));
  f.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  ALPHA_CHECK(size >= 8, CheckpointError, "[safetensors] \"{}\" is truncated ({} bytes)", path, size);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  ALPHA_CHECK(n <= size - 8, CheckpointError, "[safetensors] \"{}\": header length {} is longer than the {}-byte file",
              path, n, size);
  std::string h(n, '\0');
  f.read(h.data(), static_cast<std::streamsize>(n));
  ALPHA_CHECK(json_nesting_depth(h) <= kMaxJsonDepth, CheckpointError,
              "[safetensors] \"{}\": JSON header nested deeper than {} levels", path, kMaxJsonDepth);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(h);
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(fmt::format("[safetensors] \"{}\": bad JSON header: {}", path, e.what()));
  }
  ALPHA_CHECK(header.is_object(), CheckpointError, "[safetensors] \"{}\": header is not a JSON object", path);
  const uint64_t data_size = size - 8 - n;
  NamedTensors out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") {
      if (metadata) *metadata = e;
      continue;
    }
    try {
      ALPHA_CHECK(e.at("dtype").get<std::string>() == "F32", CheckpointError,
                  "[safetensors] \"{}\": tensor \"{}\" is {}, only F32 is supported", path, name, e.at("dtype").dump());
      Shape shape;
      uint64_t numel = 1;
      for (const auto& d : e.at("shape")) {
        const uint64_t v = json_u64(d);
        ALPHA_CHECK(v <= static_cast<uint64_t>(INT64_MAX) && !__builtin_mul_overflow(numel, v, &numel), CheckpointError,
                    "[safetensors] \"{}\": shape of \"{}\" overflows", path, name);
        shape.push_back(static_cast<int64_t>(v));
      }
      const uint64_t b = json_u64(e.at("data_offsets").at(0)), en = json_u64(e.at("data_offsets").at(1));
      ALPHA_CHECK(b <= en && en <= data_size && numel <= UINT64_MAX / 4 && en - b == numel * 4, CheckpointError,
                  "[safetensors] \"{}\": tensor \"{}\" has data_offsets [{}, {}] that do not fit its shape or the file",
                  path, name, b, en);
      ranges.emplace_back(b, en);
      Tensor t = Tensor::empty(shape, DType::f32);
      f.seekg(static_cast<std::streamoff>(8 + n + b));
      f.read(reinterpret_cast<char*>(t.mutable_data<float>()), static_cast<std::streamsize>(en - b));
      ALPHA_CHECK(f.good(), CheckpointError, "[safetensors] \"{}\": error reading \"{}\"", path, name);
      out.emplace_back(name, t);
    } catch (const nlohmann::json::exception& ex) {
      throw CheckpointError(fmt::format("[safetensors] \"{}\": bad entry \"{}\": {}", path, name, ex.what()));
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    ALPHA_CHECK(ranges[i - 1].second <= ranges[i].first, CheckpointError, "[safetensors] \"{}\": tensors overlap", path);
  return out;
}

void load_safetensors_into(GPT& model, const std::string& path, const Tokenizer& tok) {
  nlohmann::json meta;
  NamedTensors file = read_safetensors(path, &meta);
  load_gpt2_tensors_into(model, file, meta, path, tok);
}

void load_gpt2_tensors_into(GPT& model, NamedTensors& file, const nlohmann::json& meta, const std::string& path,
                            const Tokenizer& tok) {
  for (auto& [n, t] : file)
    if (n.rfind(kPrefix, 0) == 0) n = n.substr(std::strlen(kPrefix));  // GPT2LMHeadModel-style names
  if (meta.is_object() && meta.contains("alpha.tokenizer")) {
    nlohmann::json tj;
    try {
      const std::string text = meta.at("alpha.tokenizer").get<std::string>();
      ALPHA_CHECK(json_nesting_depth(text) <= kMaxJsonDepth, CheckpointError,
                  "[safetensors] \"{}\": alpha.tokenizer metadata nested deeper than {} levels", path, kMaxJsonDepth);
      tj = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(fmt::format("[safetensors] \"{}\": bad alpha.tokenizer metadata: {}", path, e.what()));
    }
    ALPHA_CHECK(tj == tok.to_json(), CheckpointError,
                "[safetensors] init_from \"{}\": its tokenizer differs from the one built from data.path", path);
  }
  const GPTConfig& mc = model.config();
  ALPHA_CHECK(!mc.llama(), CheckpointError,
              "[safetensors] init_from \"{}\": the GPT-2 safetensors layout cannot initialise an arch llama model", path);
  for (const auto& [name, shape] : export_layout(mc)) {
    const std::string hf = hf_gpt2_name(name);
    const Tensor* src = find(file, hf);
    ALPHA_CHECK(src != nullptr, CheckpointError, "[safetensors] init_from \"{}\": missing tensor \"{}\"", path, hf);
    Shape want = shape;
    if (hf == "wpe.weight" && src->dim() == 2 && src->size(0) > mc.block_size) want[0] = src->size(0);
    ALPHA_CHECK(src->shape() == want, CheckpointError,
                "[safetensors] init_from \"{}\": tensor \"{}\" is {}, the model (config model.*) needs {}", path, hf,
                shape_str(src->shape()), shape_str(want));
    const float* p = src->data<float>();
    bool has = true;
    try {
      model.parameter(name);
    } catch (const ValueError&) {
      has = false;
    }
    if (!has) {
      ALPHA_CHECK(std::all_of(p, p + src->numel(), [](float v) { return v == 0.0f; }), CheckpointError,
                  "[safetensors] init_from \"{}\": \"{}\" is non-zero but the model has model.bias = false", path, hf);
      continue;
    }
    Tensor dst = model.parameter(name);
    float* d = dst.mutable_data<float>();
    if (hf_gpt2_transposed(name)) {
      const std::vector<float> t = transposed(p, shape[0], shape[1]);
      std::copy(t.begin(), t.end(), d);
    } else {
      std::copy(p, p + dst.numel(), d);  // wpe: the first block_size rows
    }
  }
}

}  // namespace alpha
