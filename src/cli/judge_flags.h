// Flags shared by the commands that judge (test, merge) or cut position ranges (test, record).
#pragma once
#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

#include "cli/command.h"
#include "core/error.h"
#include "judge/judge.h"

namespace kc::cli {

// "--positions A:B" → [A, B) with 0 ≤ A < B.
inline std::pair<std::int64_t, std::int64_t> parse_position_range(const std::string& s) {
  auto colon = s.find(':');
  std::int64_t a = 0, b = 0;
  auto ok = [](const std::string& t, std::int64_t& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && !t.empty();
  };
  if (colon == std::string::npos || !ok(s.substr(0, colon), a) || !ok(s.substr(colon + 1), b) || a < 0 ||
      b <= a)
    fail("--positions: expected A:B with 0 ≤ A < B, got \"{}\"", s);
  return {a, b};
}

// The verdict's knobs, declared once for every judging command.
inline void add_judge_options(CLI::App& app, JudgeOptions& opt) {
  app.add_option("--kl-factor", opt.kl_factor, "noise mode: KL limit = factor × floor")
      ->capture_default_str();
  app.add_option("--alpha", opt.alpha, "family-wise false-alarm level (floor tests and flip-rate tests, Holm)")->capture_default_str();
  app.add_option("--min-positions", opt.min_positions, "fewer positions judged cannot PASS")
      ->capture_default_str();
  app.add_option("--mde-target", opt.mde_target,
                 "decode and the deepest depth bucket must detect this × the floor's KL mean, else INCONCLUSIVE")
      ->capture_default_str();
  app.add_flag("--explain", opt.explain,
               "text report: every floor test's candidate value against each noise run's value");
  app.add_option("--min-coverage", opt.min_coverage,
                 "probability mass a partial-coverage candidate must report")
      ->capture_default_str();
}

}  // namespace kc::cli
