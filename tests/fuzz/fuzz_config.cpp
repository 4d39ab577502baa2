// Fuzzes the config loader: input = config text, then optional "--set" overrides, each after a NUL byte.
// Contract: a config loads and round-trips through config_to_json, or ConfigError is thrown.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_util.h"
#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t nul; (nul = input.find('\0', start)) != std::string::npos; start = nul + 1)
    parts.push_back(input.substr(start, nul - start));
  parts.push_back(input.substr(start));
  const std::string text = parts[0];
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  alpha::fuzz::expect_only<alpha::ConfigError>([&] {
    const alpha::Config c = alpha::load_config_text(text, overrides, "<fuzz>");
    if (!(alpha::parse_config(alpha::config_to_json(c)) == c)) std::abort();  // accepted configs round-trip
  });
  return 0;
}
