// Flags shared by the commands that judge (test, merge) or cut position ranges (test, record).
#pragma once
#include <charconv>
#include <cstdint>
#include <string>
#include <utility>

#include "cli/command.h"
#include "core/error.h"
#include "judge/judge.h"
#include "judge/options.h"

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

// The verdict's options, from the one table (judge/options.h): every judging command has all of them.
inline void add_judge_options(CLI::App& app, JudgeOptions& opt) {
  for (const JudgeOptionDef& d : judge_option_table()) {
    using K = JudgeOptionDef::Kind;
    if (d.kind == K::flag)
      app.add_flag(d.flag, opt.*d.on, d.help);
    else if (d.kind == K::count)
      app.add_option(d.flag, opt.*d.count, d.help)->capture_default_str();
    else
      app.add_option(d.flag, opt.*d.real, d.help)->capture_default_str();
  }
}

}  // namespace kc::cli
