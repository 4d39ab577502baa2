// Did-you-mean suggestions for unknown names (config keys and choices, train/config/config.cpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace alpha {

// ASCII lower case (keys and choices are ASCII; other bytes pass through).
std::string lower_ascii(std::string_view s);

// The candidate closest to `word` (case-insensitive): edit distance (with adjacent transpositions) <= 2 and below
// both lengths (so "ab" does not suggest "lr"), else a shared prefix of >= 3 characters ("warmup" ->
// "warmup_steps"); "" if none. Candidates whose length differs by more than 2 are skipped before the distance
// table, so a 1 MB unknown key costs no 1M x n table.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace alpha
