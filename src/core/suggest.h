// "did you mean" for unknown keys in configuration files: the known word closest by edit distance.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace kc {

inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean \"best\"?)" when a known word is within a third of got's length (at least 2 edits), else "".
template <typename Words>
std::string did_you_mean(std::string_view got, const Words& known, std::string_view prefix = "") {
  std::string best;
  std::size_t best_d = std::max<std::size_t>(2, got.size() / 3) + 1;
  for (const auto& w : known) {
    const std::size_t d = edit_distance(got, w);
    if (d < best_d) best_d = d, best = std::string(w);
  }
  return best.empty() ? std::string() : " (did you mean \"" + std::string(prefix) + best + "\"?)";
}

}  // namespace kc
