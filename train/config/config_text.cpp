#include "config/config_text.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "config/config.h"
#include "config/json_limits.h"

namespace alpha {

using json = nlohmann::json;

// Strict JSON parse; refuses duplicate keys (nlohmann would silently keep the last one).
json parse_json_text(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw ConfigError(fmt::format("[config] {}: empty config (expected a JSON object)", origin));
  }
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError(fmt::format("[config] {}: too large for a config (more than {} bytes)", origin, kMaxConfigBytes));
  }
  if (const size_t depth = json_nesting_depth(text); depth > kMaxJsonDepth) {
    throw ConfigError(fmt::format("[config] {}: JSON nested {} levels deep (the limit is {})", origin, depth,
                                  kMaxJsonDepth));
  }
  struct Frame {
    std::string path, last_key;
    std::set<std::string> keys;
    bool is_object;
  };
  std::vector<Frame> stack;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t ev, json& parsed) {
    using E = json::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      std::string path;
      if (!stack.empty()) path = stack.back().is_object ? join_path(stack.back().path, stack.back().last_key)
                                                         : stack.back().path + "[]";
      stack.push_back({path, "", {}, ev == E::object_start});
    } else if (ev == E::object_end || ev == E::array_end) {
      stack.pop_back();
    } else if (ev == E::key) {
      Frame& f = stack.back();
      f.last_key = parsed.get<std::string>();
      if (!f.keys.insert(f.last_key).second) {
        throw ConfigError(fmt::format("[config] {}: duplicate key \"{}\"", origin, join_path(f.path, f.last_key)));
      }
    }
    return true;
  };
  try {
    return json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    // what(): "[json.exception.parse_error.101] parse error at line L, column C: <detail>"
    const std::string w = e.what();
    size_t line = 0, col = 0;
    std::string detail = w;
    if (const auto p = w.find("at line "); p != std::string::npos &&
                                           std::sscanf(w.c_str() + p, "at line %zu, column %zu", &line, &col) == 2) {
      const auto colon = w.find(": ", p);
      if (colon != std::string::npos) detail = w.substr(colon + 2);
    }
    const std::string where = line > 0 ? fmt::format("{}:{}:{}", origin, line, col) : origin;
    // '/' is never valid outside a JSON string, so an error on it is a // or /* comment.
    if (e.byte >= 1 && e.byte <= text.size() && text[e.byte - 1] == '/') {
      throw ConfigError(fmt::format("[config] {}: comments are not allowed (config files are strict JSON); "
                                    "remove the // or /* */ comment", where));
    }
    throw ConfigError(fmt::format("[config] {}: invalid JSON: {}", where, detail));
  } catch (const json::exception& e) {
    // Not a syntax error, e.g. out_of_range 406 "number overflow parsing '1e400'".
    const std::string w = e.what();
    const auto bracket = w.find("] ");
    throw ConfigError(fmt::format("[config] {}: invalid JSON: {}", origin,
                                  bracket == std::string::npos ? w : w.substr(bracket + 2)));
  }
}

std::string read_config_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw ConfigError(fmt::format("[config] cannot read config file \"{}\": no such file", path));
  if (fs::is_directory(st)) {
    throw ConfigError(fmt::format("[config] cannot read config file \"{}\": it is a directory", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("[config] cannot read config file \"{}\": {}", path, std::strerror(errno)));
  // Read one byte past the limit, never more: /dev/zero or a multi-GB file must not fill memory.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw ConfigError(fmt::format("[config] error reading config file \"{}\"", path));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace alpha
