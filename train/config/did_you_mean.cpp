// Did-you-mean suggestions for unknown names (config keys, choices): train/config/did_you_mean.h.
#include "config/did_you_mean.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

namespace alpha {

namespace {

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("n_layre" is 1 from "n_layer").
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string lower_ascii(std::string_view s) {
  std::string r(s);
  for (char& ch : r) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string w = lower_ascii(word);
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    const std::string lc = lower_ascii(c);
    // The distance is at least the length difference: skip early, so a 1 MB key costs no 1M x n table.
    if (w.size() > lc.size() + 2 || lc.size() > w.size() + 2) continue;
    const size_t d = edit_distance(w, lc);
    if (d <= 2 && d < std::min(w.size(), lc.size()) && d < best_d) best = c, best_d = d;
  }
  if (!best.empty()) return best;
  for (const auto& c : candidates) {
    const std::string lc = lower_ascii(c);
    const size_t n = std::min(w.size(), lc.size());
    if (n >= 3 && w.compare(0, n, lc, 0, n) == 0) return c;
  }
  return "";
}

}  // namespace alpha
