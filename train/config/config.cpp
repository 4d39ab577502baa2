// Config parsing and validation. The set of known keys is config_to_json(Config{}) (config_json.cpp) — one
// source of truth for unknown-key checks, overrides and did-you-mean, kept honest by the round-trip test.
#include "config/config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/config_text.h"
#include "config/did_you_mean.h"

namespace alpha {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxCount = 1'000'000'000;  // bound on counts: catches typos and keeps products in int64
constexpr double kMaxElements = 1e12;         // sanity bound on parameter count and B*T*C activations

// Known keys: the defaults with every key present (sections are objects, leaves are values).
const json& schema() {
  static const json s = config_to_json(Config{});
  return s;
}

std::vector<std::string> leaf_paths(const json& level = schema(), const std::string& prefix = "") {
  std::vector<std::string> out;
  for (const auto& [k, v] : level.items()) {
    if (v.is_object()) {
      for (auto& p : leaf_paths(v, join_path(prefix, k))) out.push_back(std::move(p));
    } else {
      out.push_back(join_path(prefix, k));
    }
  }
  return out;
}

// "string \"64\"", "number 1.5", "boolean true", "null" — for "must be X, got Y" messages.
std::string describe(const json& v) {
  if (v.is_null()) return "null";
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (v.is_number_float() && !std::isfinite(v.get<double>())) text = fmt::format("{}", v.get<double>());
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  const std::string type = v.is_boolean() ? "boolean" : v.is_number() ? "number" : v.type_name();
  return type + " " + text;
}

std::string value_text(const json& v) {
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Throws the unknown-key error for `key` in the section at `prefix`, whose known keys are `level`'s.
// `where` is "" for the config itself or " in override \"...\"".
[[noreturn]] void unknown_key(const std::string& prefix, const std::string& key, const json& level,
                              const std::string& where) {
  const std::string full = join_path(prefix, key);
  std::vector<std::string> siblings;
  for (const auto& [k, v] : level.items()) siblings.push_back(k);
  std::string hint;
  const std::vector<std::string> leaves = leaf_paths();
  std::vector<std::string> names;  // leaf names, parallel to `leaves`
  for (const auto& p : leaves) names.push_back(p.substr(p.rfind('.') == std::string::npos ? 0 : p.rfind('.') + 1));
  const auto same_name =
      std::find_if(names.begin(), names.end(), [&](const auto& n) { return lower_ascii(n) == lower_ascii(key); });
  if (std::find(leaves.begin(), leaves.end(), full) != leaves.end()) {
    // A dotted key such as {"model.n_layer": 4}: right name, wrong shape.
    const auto dot = full.find('.');
    hint = fmt::format(" (sections are nested objects: write {{\"{}\": {{\"{}\": ...}}}})", full.substr(0, dot),
                       full.substr(dot + 1));
  } else if (same_name != names.end()) {
    // A key in the wrong section ("lr" at the top level, "model.lr").
    hint = fmt::format(" (did you mean \"{}\"?)", leaves[static_cast<size_t>(same_name - names.begin())]);
  } else if (std::string s = did_you_mean(key, siblings); !s.empty()) {
    hint = fmt::format(" (did you mean \"{}\"?)", join_path(prefix, s));
  } else if (std::string s2 = did_you_mean(key, names); !s2.empty()) {
    const auto it = std::find(names.begin(), names.end(), s2);
    hint = fmt::format(" (did you mean \"{}\"?)", leaves[static_cast<size_t>(it - names.begin())]);
  } else {
    std::string known;
    for (const auto& s3 : siblings) known += (known.empty() ? "" : ", ") + join_path(prefix, s3);
    hint = fmt::format("; known keys{}: {}", prefix.empty() ? "" : " in \"" + prefix + "\"", known);
  }
  throw ConfigError(fmt::format("[config] unknown key \"{}\"{}{}", full, where, hint));
}

// Refuses keys not in `level` and sections that are not objects, recursively.
void check_keys(const json& j, const json& level, const std::string& prefix) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!level.contains(it.key())) unknown_key(prefix, it.key(), level, "");
    const json& known = level.at(it.key());
    if (known.is_object()) {
      const std::string path = join_path(prefix, it.key());
      if (!it->is_object()) {
        throw ConfigError(fmt::format("[config] \"{}\" must be an object, got {}", path, describe(*it)));
      }
      check_keys(*it, known, path);
    }
  }
}

// The value at dotted `path`, or nullptr when absent (sections were already checked to be objects).
const json* lookup(const json& root, std::string_view path) {
  const json* node = &root;
  while (true) {
    const auto dot = path.find('.');
    const std::string part(path.substr(0, dot));
    const auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string_view::npos) return node;
    path.remove_prefix(dot + 1);
  }
}

// Integers must be JSON integers, or floats with an integral value (nlohmann reads 1e3 as a float).
int64_t get_int(const json& root, const char* path, int64_t def, int64_t lo, int64_t hi) {
  const json* v = lookup(root, path);
  if (!v) return def;
  const bool integral_float = v->is_number_float() && std::isfinite(v->get<double>()) &&
                              v->get<double>() == std::floor(v->get<double>());
  if (!v->is_number_integer() && !integral_float) {
    throw ConfigError(fmt::format("[config] \"{}\" must be an integer, got {}", path, describe(*v)));
  }
  // Compare in the value's own type so huge values cannot wrap before the range check.
  bool below = false, above = false;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    below = lo > 0 && u < static_cast<uint64_t>(lo);
    above = u > static_cast<uint64_t>(hi);
  } else if (v->is_number_integer()) {
    below = v->get<int64_t>() < lo;
    above = v->get<int64_t>() > hi;
  } else {
    below = v->get<double>() < static_cast<double>(lo);
    above = v->get<double>() > static_cast<double>(hi);
  }
  if (below) throw ConfigError(fmt::format("[config] \"{}\" must be >= {}, got {}", path, lo, value_text(*v)));
  if (above) throw ConfigError(fmt::format("[config] \"{}\" must be <= {}, got {}", path, hi, value_text(*v)));
  return v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
}

uint64_t get_uint64(const json& root, const char* path, uint64_t def) {
  const json* v = lookup(root, path);
  if (!v) return def;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer() && v->get<int64_t>() >= 0) return static_cast<uint64_t>(v->get<int64_t>());
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // 2^64 is exactly representable; every double below it and >= 0 that is integral fits.
    if (std::isfinite(d) && d >= 0 && d == std::floor(d) && d < 18446744073709551616.0) return static_cast<uint64_t>(d);
  }
  throw ConfigError(fmt::format("[config] \"{}\" must be a non-negative integer (< 2^64), got {}", path, describe(*v)));
}

struct Bound {
  double v;
  bool open;  // true: the bound itself is excluded
};
constexpr double kInf = std::numeric_limits<double>::infinity();

double get_double(const json& root, const char* path, double def, Bound lo, Bound hi) {
  const json* v = lookup(root, path);
  if (!v) return def;
  if (!v->is_number()) throw ConfigError(fmt::format("[config] \"{}\" must be a number, got {}", path, describe(*v)));
  const double x = v->get<double>();
  if (!std::isfinite(x)) throw ConfigError(fmt::format("[config] \"{}\" must be finite, got {}", path, x));
  if (lo.open ? !(x > lo.v) : !(x >= lo.v)) {
    throw ConfigError(fmt::format("[config] \"{}\" must be {} {}, got {}", path, lo.open ? ">" : ">=", lo.v, x));
  }
  if (hi.open ? !(x < hi.v) : !(x <= hi.v)) {
    throw ConfigError(fmt::format("[config] \"{}\" must be {} {}, got {}", path, hi.open ? "<" : "<=", hi.v, x));
  }
  return x;
}

bool get_bool(const json& root, const char* path, bool def) {
  const json* v = lookup(root, path);
  if (!v) return def;
  if (!v->is_boolean()) {
    throw ConfigError(fmt::format("[config] \"{}\" must be a boolean (true or false), got {}", path, describe(*v)));
  }
  return v->get<bool>();
}

std::string get_string(const json& root, const char* path, const std::string& def, bool allow_empty = true) {
  const json* v = lookup(root, path);
  if (!v) return def;
  if (!v->is_string()) throw ConfigError(fmt::format("[config] \"{}\" must be a string, got {}", path, describe(*v)));
  if (!allow_empty && v->get<std::string>().empty()) {
    throw ConfigError(fmt::format("[config] \"{}\" must not be empty", path));
  }
  return v->get<std::string>();
}

void check_choice(const char* path, const std::string& value, const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), value) != choices.end()) return;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  const std::string s = did_you_mean(value, choices);
  throw ConfigError(fmt::format("[config] \"{}\" must be one of {}, got \"{}\"{}", path, list, value,
                                s.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", s)));
}

void check_device(const std::string& d) {
  if (d == "auto" || d == "cpu" || d == "vulkan") return;
  const std::string_view n = std::string_view(d).substr(std::min<size_t>(d.size(), 7));
  if (d.rfind("vulkan:", 0) == 0 && !n.empty() && n.size() <= 9 &&
      std::all_of(n.begin(), n.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return;
  }
  const std::string s = did_you_mean(d, {"auto", "cpu", "vulkan"});
  throw ConfigError(fmt::format("[config] \"device\" must be auto, cpu, vulkan or vulkan:N (N = GPU index >= 0), got "
                                "\"{}\"{}", d, s.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", s)));
}

// GPT-2 layout: token + position embeddings, per block 12*C^2 weights + biases/LayerNorms, final LayerNorm.
// In double so absurd sizes are reported instead of overflowing int64.
double estimated_parameters(const ModelConfig& m, int64_t vocab_size) {
  const double C = static_cast<double>(m.n_embd), L = static_cast<double>(m.n_layer);
  // Llama: an explicit model.mlp_hidden F adds up to 3 C F per block (an untied head: V C), an upper bound.
  const double llama = m.arch == "llama" ? L * 3.0 * C * static_cast<double>(m.mlp_hidden) +
                                               (m.tie_embeddings ? 0.0 : static_cast<double>(vocab_size) * C)
                                         : 0.0;
  return static_cast<double>(vocab_size) * C + static_cast<double>(m.block_size) * C + L * (12.0 * C * C + 13.0 * C) +
         2.0 * C + llama;
}

void check_sizes(const Config& c) {
  const auto& m = c.model;
  const double C = static_cast<double>(m.n_embd);
  const double params = estimated_parameters(m, m.vocab_size);
  if (params > kMaxElements) {
    throw ConfigError(fmt::format("[config] model too large: about {:.3g} parameters (model.n_layer={}, "
                                  "model.n_embd={}, model.block_size={}, model.vocab_size={}); the limit is {:g}",
                                  params, m.n_layer, m.n_embd, m.block_size, m.vocab_size, kMaxElements));
  }
  const double acts = static_cast<double>(c.train.batch_size) * static_cast<double>(m.block_size) * C;
  if (acts > kMaxElements) {
    throw ConfigError(fmt::format("[config] \"train.batch_size\" * \"model.block_size\" * \"model.n_embd\" = {} * {} "
                                  "* {} = {:.3g} activations per layer, above the limit {:g}",
                                  c.train.batch_size, m.block_size, m.n_embd, acts, kMaxElements));
  }
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// "a.b=value": the value is JSON if it parses, else the raw text as a string (so data.path=x.txt works).
void apply_override(json& root, const std::string& ov) {
  const auto eq = ov.find('=');
  const std::string key = eq == std::string::npos ? "" : trim(ov.substr(0, eq));
  if (key.empty()) {
    throw ConfigError(
        fmt::format("[config] override \"{}\" must look like key.path=value (e.g. train.max_steps=100)", ov));
  }
  const std::string text = ov.substr(eq + 1);
  // Valid JSON goes through the strict parser (size, depth, duplicate keys); anything else is a string.
  json value = json::accept(text) ? parse_json_text(text, fmt::format("override \"{}\"", key)) : json(text);

  const std::string where = fmt::format(" in override \"{}\"", ov);
  const json* level = &schema();
  json* node = &root;
  std::string prefix;
  size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) {
      throw ConfigError(fmt::format("[config] override \"{}\": empty name in key path \"{}\"", ov, key));
    }
    if (!level->contains(part)) unknown_key(prefix, part, *level, where);
    level = &level->at(part);
    const std::string path = join_path(prefix, part);
    if (dot != std::string::npos && !level->is_object()) {
      throw ConfigError(
          fmt::format("[config] unknown key \"{}\"{}: \"{}\" is a value, not a section", key, where, path));
    }
    if (dot == std::string::npos) {
      // A whole section ("model={...}") merges into what the file set rather than replacing it.
      if (level->is_object() && value.is_object() && node->contains(part) && (*node)[part].is_object()) {
        (*node)[part].update(value);
      } else {
        (*node)[part] = std::move(value);
      }
      return;
    }
    if (!node->contains(part)) (*node)[part] = json::object();
    json& next = (*node)[part];
    if (!next.is_object()) {
      throw ConfigError(fmt::format("[config] \"{}\" must be an object, got {}", path, describe(next)));
    }
    node = &next;
    prefix = path;
    start = dot + 1;
  }
}

// model.arch and the Llama-only keys: ranges, choices and the rules between them (a key set away from its
// default needs arch "llama"; the heads must split into KV groups; RoPE rotates pairs of channels).
void parse_llama_keys(const json& j, ModelConfig& m) {
  const ModelConfig d;
  m.arch = get_string(j, "model.arch", d.arch);
  check_choice("model.arch", m.arch, {"gpt2", "llama"});
  m.n_kv_head = get_int(j, "model.n_kv_head", d.n_kv_head, 0, 1024);
  m.mlp_hidden = get_int(j, "model.mlp_hidden", d.mlp_hidden, 0, int64_t{1} << 20);
  m.rope_base = get_double(j, "model.rope_base", d.rope_base, {1, true}, {1e12, false});
  m.tie_embeddings = get_bool(j, "model.tie_embeddings", d.tie_embeddings);
  m.qk_norm = get_bool(j, "model.qk_norm", d.qk_norm);
  m.mlp_act = get_string(j, "model.mlp_act", d.mlp_act);
  check_choice("model.mlp_act", m.mlp_act, {"swiglu", "relu2"});
  const auto fail = [](const std::string& msg) { throw ConfigError("[config] " + msg); };
  if (m.arch != "llama") {
    const std::pair<const char*, bool> llama_only[] = {
        {"n_kv_head", m.n_kv_head != d.n_kv_head}, {"mlp_hidden", m.mlp_hidden != d.mlp_hidden},
        {"rope_base", m.rope_base != d.rope_base}, {"tie_embeddings", m.tie_embeddings != d.tie_embeddings},
        {"qk_norm", m.qk_norm != d.qk_norm},       {"mlp_act", m.mlp_act != d.mlp_act}};
    for (const auto& [key, set] : llama_only)
      if (set) fail(fmt::format("\"model.{}\" applies to \"model.arch\": \"llama\" only (arch is \"{}\")", key, m.arch));
    return;
  }
  if (m.bias) fail("\"model.bias\" must be false with \"model.arch\": \"llama\" (Llama blocks have no biases)");
  const int64_t kv = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
  if (m.n_head % kv != 0)
    fail(fmt::format("\"model.n_head\" ({}) must be a multiple of \"model.n_kv_head\" ({})", m.n_head, kv));
  if ((m.n_embd / m.n_head) % 2 != 0)
    fail(fmt::format("arch llama needs an even head size for RoPE: \"model.n_embd\" / \"model.n_head\" = {}",
                     m.n_embd / m.n_head));
}

}  // namespace

Config parse_config(const json& j) {
  if (!j.is_object()) throw ConfigError(fmt::format("[config] the config must be a JSON object, got {}", describe(j)));
  check_keys(j, schema(), "");
  const Config d;
  Config c;
  c.out_dir = get_string(j, "out_dir", d.out_dir, /*allow_empty=*/false);
  c.seed = get_uint64(j, "seed", d.seed);
  c.device = get_string(j, "device", d.device);
  check_device(c.device);
  c.init_from = get_string(j, "init_from", d.init_from);

  auto& m = c.model;
  m.n_layer = get_int(j, "model.n_layer", d.model.n_layer, 1, 1000);
  m.n_head = get_int(j, "model.n_head", d.model.n_head, 1, 1024);
  m.n_embd = get_int(j, "model.n_embd", d.model.n_embd, 1, 65536);
  m.block_size = get_int(j, "model.block_size", d.model.block_size, 1, int64_t{1} << 20);
  m.vocab_size = get_int(j, "model.vocab_size", d.model.vocab_size, 0, int64_t{1} << 24);
  m.dropout = get_double(j, "model.dropout", d.model.dropout, {0, false}, {1, true});
  m.bias = get_bool(j, "model.bias", d.model.bias);
  m.attention = get_string(j, "model.attention", d.model.attention);
  check_choice("model.attention", m.attention, {"fused", "unfused"});
  m.precision = get_string(j, "model.precision", d.model.precision);
  check_choice("model.precision", m.precision, {"f32", "f16"});
  if (m.n_embd % m.n_head != 0) {
    throw ConfigError(fmt::format("[config] \"model.n_embd\" ({}) must be divisible by \"model.n_head\" ({})", m.n_embd,
                                  m.n_head));
  }
  parse_llama_keys(j, m);

  auto& da = c.data;
  da.path = get_string(j, "data.path", d.data.path);
  da.tokenizer = get_string(j, "data.tokenizer", d.data.tokenizer);
  check_choice("data.tokenizer", da.tokenizer, {"char", "word", "bpe", "gpt2"});
  da.val_fraction = get_double(j, "data.val_fraction", d.data.val_fraction, {0, true}, {1, true});
  da.sampling = get_string(j, "data.sampling", d.data.sampling);
  check_choice("data.sampling", da.sampling, {"random", "sequential"});
  da.vocab_size = get_int(j, "data.vocab_size", d.data.vocab_size, 0, 1 << 24);
  da.tokenizer_path = get_string(j, "data.tokenizer_path", d.data.tokenizer_path);
  if (da.tokenizer == "gpt2" && da.tokenizer_path.empty()) {
    throw ConfigError("[config] \"data.tokenizer\" gpt2 needs \"data.tokenizer_path\" (a folder with encoder.json and vocab.bpe)");
  }

  auto& t = c.train;
  t.batch_size = get_int(j, "train.batch_size", d.train.batch_size, 1, kMaxCount);
  t.grad_accum = get_int(j, "train.grad_accum", d.train.grad_accum, 1, kMaxCount);
  t.max_steps = get_int(j, "train.max_steps", d.train.max_steps, 1, kMaxCount);
  t.eval_interval = get_int(j, "train.eval_interval", d.train.eval_interval, 1, kMaxCount);
  t.eval_iters = get_int(j, "train.eval_iters", d.train.eval_iters, 1, kMaxCount);
  t.log_interval = get_int(j, "train.log_interval", d.train.log_interval, 1, kMaxCount);
  t.sample_tokens = get_int(j, "train.sample_tokens", d.train.sample_tokens, 0, kMaxCount);
  t.defer_weight_grads = get_bool(j, "train.defer_weight_grads", d.train.defer_weight_grads);
  t.overlap_steps = get_bool(j, "train.overlap_steps", d.train.overlap_steps);

  auto& o = c.optim;
  o.name = get_string(j, "optim.name", d.optim.name);
  check_choice("optim.name", o.name, {"adamw", "muon"});
  o.lr = get_double(j, "optim.lr", d.optim.lr, {0, true}, {kInf, true});
  o.min_lr = get_double(j, "optim.min_lr", d.optim.min_lr, {0, false}, {kInf, true});
  if (o.min_lr > o.lr) {
    throw ConfigError(fmt::format("[config] \"optim.min_lr\" ({}) must be <= \"optim.lr\" ({})", o.min_lr, o.lr));
  }
  o.warmup_steps = get_int(j, "optim.warmup_steps", d.optim.warmup_steps, 0, kMaxCount);
  o.schedule = get_string(j, "optim.schedule", d.optim.schedule);
  check_choice("optim.schedule", o.schedule, {"constant", "cosine", "linear", "wsd"});
  o.decay_steps = get_int(j, "optim.decay_steps", d.optim.decay_steps, 1, kMaxCount);
  o.wsd_decay_fraction = get_double(j, "optim.wsd_decay_fraction", d.optim.wsd_decay_fraction, {0, false}, {1, false});
  o.weight_decay = get_double(j, "optim.weight_decay", d.optim.weight_decay, {0, false}, {kInf, true});
  o.beta1 = get_double(j, "optim.beta1", d.optim.beta1, {0, false}, {1, true});
  o.beta2 = get_double(j, "optim.beta2", d.optim.beta2, {0, false}, {1, true});
  o.eps = get_double(j, "optim.eps", d.optim.eps, {0, true}, {kInf, true});
  o.grad_clip = get_double(j, "optim.grad_clip", d.optim.grad_clip, {0, false}, {kInf, true});
  o.device = get_string(j, "optim.device", d.optim.device);
  check_choice("optim.device", o.device, {"cpu", "gpu"});
  o.zero = get_int(j, "optim.zero", d.optim.zero, 0, 1);
  auto& mu = o.muon;
  mu.lr = get_double(j, "optim.muon.lr", d.optim.muon.lr, {0, false}, {kInf, true});
  mu.momentum = get_double(j, "optim.muon.momentum", d.optim.muon.momentum, {0, false}, {1, true});
  mu.weight_decay = get_double(j, "optim.muon.weight_decay", d.optim.muon.weight_decay, {0, false}, {kInf, true});
  mu.nesterov = get_bool(j, "optim.muon.nesterov", d.optim.muon.nesterov);
  mu.ns_steps = get_int(j, "optim.muon.ns_steps", d.optim.muon.ns_steps, 1, 100);
  mu.ns_dtype = get_string(j, "optim.muon.ns_dtype", d.optim.muon.ns_dtype);
  check_choice("optim.muon.ns_dtype", mu.ns_dtype, {"f32", "f16"});
  if (const json* v = lookup(j, "optim.muon.ns_coefficients")) {
    if (!v->is_array() || v->size() != 3 || !std::all_of(v->begin(), v->end(), [](const json& x) {
          return x.is_number() && std::isfinite(x.get<double>());
        }))
      throw ConfigError(fmt::format("[config] \"optim.muon.ns_coefficients\" must be 3 finite numbers [a, b, c], got {}",
                                    describe(*v)));
    mu.ns_coefficients = v->get<std::vector<double>>();
  }

  c.checkpoint.interval = get_int(j, "checkpoint.interval", d.checkpoint.interval, 1, kMaxCount);
  c.checkpoint.keep_last = get_int(j, "checkpoint.keep_last", d.checkpoint.keep_last, 1, kMaxCount);
  c.metrics.path = get_string(j, "metrics.path", d.metrics.path, /*allow_empty=*/false);
  c.metrics.profile = get_bool(j, "metrics.profile", d.metrics.profile);
  c.metrics.peak_tflops = get_double(j, "metrics.peak_tflops", d.metrics.peak_tflops, {0, false}, {1e6, false});
  c.metrics.inspect_interval = get_int(j, "metrics.inspect_interval", d.metrics.inspect_interval, 0, kMaxCount);
  auto& h = c.metrics.http;
  const MetricsHttpConfig& dh = d.metrics.http;
  h.url = get_string(j, "metrics.http.url", dh.url);
  h.token_env = get_string(j, "metrics.http.token_env", dh.token_env);
  h.queue_lines = get_int(j, "metrics.http.queue_lines", dh.queue_lines, 1, kMaxCount);
  h.batch_lines = get_int(j, "metrics.http.batch_lines", dh.batch_lines, 1, kMaxCount);
  h.max_retries = get_int(j, "metrics.http.max_retries", dh.max_retries, 0, 1000);
  h.timeout_s = get_double(j, "metrics.http.timeout_s", dh.timeout_s, {0, true}, {3600, false});
  h.close_timeout_s = get_double(j, "metrics.http.close_timeout_s", dh.close_timeout_s, {0, false}, {3600, false});
  constexpr int64_t kMaxWork = int64_t{1} << 62;
  // A threshold is a non-negative integer or "auto" (kAutoThreshold).
  auto threshold = [&](const char* path, int64_t def) {
    const json* v = lookup(j, path);
    if (v && v->is_string()) {
      if (v->get<std::string>() == "auto") return kAutoThreshold;
      throw ConfigError(fmt::format("[config] \"{}\" must be an integer or \"auto\", got {}", path, describe(*v)));
    }
    return get_int(j, path, def, 0, kMaxWork);
  };
  c.dispatch.threshold = threshold("dispatch.threshold", d.dispatch.threshold);
  c.dispatch.matmul_threshold = threshold("dispatch.matmul_threshold", d.dispatch.matmul_threshold);
  c.dispatch.profile = get_string(j, "dispatch.profile", d.dispatch.profile);

  auto& g = c.guard;
  g.policy = get_string(j, "guard.policy", d.guard.policy);
  check_choice("guard.policy", g.policy, {"skip", "rollback", "stop"});
  g.max_bad_steps = get_int(j, "guard.max_bad_steps", d.guard.max_bad_steps, 1, kMaxCount);
  g.rollback_lr_factor = get_double(j, "guard.rollback_lr_factor", d.guard.rollback_lr_factor, {0, true}, {1, false});
  g.spike_window = get_int(j, "guard.spike_window", d.guard.spike_window, 2, 1'000'000);
  g.spike_zscore = get_double(j, "guard.spike_zscore", d.guard.spike_zscore, {0, false}, {1e6, false});
  g.spike_action = get_string(j, "guard.spike_action", d.guard.spike_action);
  check_choice("guard.spike_action", g.spike_action, {"warn", "skip"});
  g.param_check_interval = get_int(j, "guard.param_check_interval", d.guard.param_check_interval, 0, kMaxCount);

  check_sizes(c);
  return c;
}

Config load_config_text(const std::string& json_text, const std::vector<std::string>& overrides,
                        const std::string& origin) {
  json j = parse_json_text(json_text, origin);
  if (!j.is_object()) {
    throw ConfigError(fmt::format("[config] {}: the config must be a JSON object, got {}", origin, describe(j)));
  }
  for (const auto& ov : overrides) apply_override(j, ov);
  return parse_config(j);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return load_config_text(read_config_file(path), overrides, path);
}

void check_host_memory(const Config& c, int64_t vocab_size, double host_bytes) {
  if (host_bytes <= 0) {
    host_bytes = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  }
  const ModelConfig& m = c.model;
  const double params = estimated_parameters(m, vocab_size);
  // A lower bound: f32 weights, gradients and both AdamW moments live in host memory, plus logits and their grad.
  const double logits = static_cast<double>(c.train.batch_size) * static_cast<double>(m.block_size) *
                        static_cast<double>(vocab_size);
  const double need = 16.0 * params + 8.0 * logits;
  if (need > host_bytes) {
    throw ConfigError(fmt::format(
        "[config] the run needs at least {:.3g} GB of host memory, this machine has {:.3g} GB: {:.3g} parameters "
        "(model.n_layer={}, model.n_embd={}, model.block_size={}, vocabulary {}) x 16 bytes (weights, gradients, "
        "AdamW moments) + logits (train.batch_size={} x block_size x vocabulary x 8 bytes)",
        need / 1e9, host_bytes / 1e9, params, m.n_layer, m.n_embd, m.block_size, vocab_size, c.train.batch_size));
  }
}

}  // namespace alpha
