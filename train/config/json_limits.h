// Limits on untrusted JSON (configs, checkpoint headers, tokenizer files). nlohmann's parser is iterative, but
// copying, comparing and dumping a value recurse once per nesting level, so 100k '[' would overflow the stack
// later: every reader of untrusted JSON checks the nesting depth of the text before parsing it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

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

}  // namespace alpha
