// Internal to the tokenizer files: per-kind JSON loaders (used by tokenizer_from_json) and JSON helpers for
// tokens that may not be valid UTF-8.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"

namespace alpha {

std::unique_ptr<Tokenizer> word_tokenizer_from_json(const nlohmann::json& j);
std::unique_ptr<Tokenizer> bpe_tokenizer_from_json(const nlohmann::json& j);
std::unique_ptr<Tokenizer> gpt2_tokenizer_from_json(const nlohmann::json& j);

bool is_valid_utf8(std::string_view s);
// Valid UTF-8 becomes a JSON string, anything else an array of byte values (JSON text must be UTF-8).
nlohmann::json bytes_to_json(const std::string& s);
std::string bytes_from_json(const nlohmann::json& j, const char* what);  // throws ValueError naming `what`

}  // namespace alpha
