// Limits on untrusted JSON (configs, checkpoint headers, tokenizer files). nlohmann's parser is iterative, but
// copying, comparing and dumping a value recurse once per nesting level, so 100k '[' would overflow the stack
// later: every reader of untrusted JSON checks the nesting depth of the text before parsing it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace alpha {

// Alpha's own files nest at most ~4 levels; 64 leaves room and keeps every recursion shallow.
inline constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting of [ and { in `text` outside strings (a quick scan; the text need not be valid JSON).
inline size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > deepest) deepest = depth;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// nlohmann's get<integer>() static_casts a float value, undefined behaviour when it is out of range (3e20 read
// as uint64_t): readers of untrusted files take integers through these, which accept JSON integers in range only
// and otherwise throw nlohmann's type_error, like any other mistyped field.
inline uint64_t json_u64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  throw nlohmann::json::type_error::create(302, std::string("expected a non-negative integer, got ") + v.dump(), &v);
}

inline int64_t json_i64(const nlohmann::json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return v.get<int64_t>();
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  throw nlohmann::json::type_error::create(302, std::string("expected a 64-bit integer, got ") + v.dump(), &v);
}

}  // namespace alpha
