// Config text: the strict JSON reader of config files and overrides (size and nesting limits, duplicate keys and
// comments refused with the line and column) and the bounded read of a config file.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace alpha {

inline constexpr size_t kMaxConfigBytes = 1 << 20;  // configs are a few hundred bytes; bigger is a wrong file

// A config key's dotted path under `prefix` ("" at the top level): "train.batch_size".
inline std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

// Parses `text` (named `origin` in errors) or throws ConfigError.
nlohmann::json parse_json_text(const std::string& text, const std::string& origin);

// The file's bytes, at most kMaxConfigBytes + 1 (parse_json_text then refuses the size); ConfigError when it
// cannot be read.
std::string read_config_file(const std::string& path);

}  // namespace alpha
