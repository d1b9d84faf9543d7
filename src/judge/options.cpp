#include "judge/options.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace kc {

namespace {

using K = JudgeOptionDef::Kind;
using O = JudgeOptions;

JudgeOptionDef real_option(const char* flag, const char* py, double O::*m, double lo, bool lo_open, double hi,
                           bool hi_open, const char* help) {
  JudgeOptionDef d{flag, py, K::real, help};
  d.real = m, d.lo = lo, d.lo_open = lo_open, d.hi = hi, d.hi_open = hi_open;
  return d;
}
JudgeOptionDef count_option(const char* flag, const char* py, std::int64_t O::*m, double lo,
                            const char* help) {
  JudgeOptionDef d{flag, py, K::count, help};
  d.count = m, d.lo = lo, d.hi = INFINITY;
  return d;
}
JudgeOptionDef flag_option(const char* flag, const char* py, bool O::*m, const char* help) {
  JudgeOptionDef d{flag, py, K::flag, help};
  d.on = m, d.lo = 0, d.hi = 1;
  return d;
}

const JudgeOptionDef kOptions[] = {
    real_option("--kl-factor", "kl_factor", &O::kl_factor, 1, false, INFINITY, true,
                "noise mode: a split's KL mean, median and p99 fail above this × the floor's"),
    real_option(
        "--kl-abs-min", "kl_abs_min", &O::kl_abs_min, 0, false, INFINITY, true,
        "noise mode: the smallest KL limit (a limit is the larger of this and kl-factor × the floor's)"),
    real_option("--alpha", "alpha", &O::alpha, 0, true, 1, true,
                "family-wise false-alarm level of the floor tests and flip-rate tests (Holm)"),
    count_option("--min-positions", "min_positions", &O::min_positions, 0,
                 "fewer positions judged cannot PASS"),
    count_option(
        "--min-split-center", "min_split_center", &O::min_split_center, 1,
        "a split needs this many positions for its KL mean and median limits, its floor test and its "
        "statistics in the table"),
    count_option("--min-split-tail", "min_split_tail", &O::min_split_tail, 1,
                 "a split needs this many positions for its KL p99 limit (calibration: for a limit on its "
                 "p99, p99.9 or "
                 "maximum)"),
    count_option("--min-uncertain", "min_uncertain", &O::min_uncertain, 0,
                 "noise mode: positions with reference margin in (0, 1] needed to test the flip rate, else "
                 "INCONCLUSIVE"),
    real_option("--min-coverage", "min_coverage", &O::min_coverage, 0, false, 1, false,
                "probability mass a partial-coverage candidate must report, else INCONCLUSIVE"),
    real_option(
        "--mde-target", "mde_target", &O::mde_target, 1, true, INFINITY, false,
        "decode and the deepest depth bucket must detect this × the floor's KL mean, else INCONCLUSIVE"),
    real_option("--power", "power", &O::power, 0, true, 1, true,
                "the power with which decode and the deepest depth bucket must detect the MDE target"),
    real_option("--onset-alpha", "onset_alpha", &O::onset_alpha, 0, true, 1, true,
                "false-alarm level of the depth onset: the one-sided paired test each depth-profile bucket "
                "from the onset to the deepest must pass (reported only, not part of the verdict)"),
    flag_option("--explain", "explain", &O::explain,
                "text report: every floor test's candidate value against each noise run's value, and the "
                "depth profile bucket by bucket"),
    flag_option("--allow-floor-mismatch", "allow_floor_mismatch", &O::allow_floor_mismatch,
                "judge against noise runs whose engine, base precision, KV or logits dtype differ from the "
                "candidate's (refused otherwise, exit 3; every report then says FLOOR MISMATCH)"),
};

std::string g(double v) { return std::isinf(v) ? (v > 0 ? "∞" : "−∞") : fmt::format("{}", v); }

}  // namespace

double JudgeOptionDef::get(const JudgeOptions& o) const {
  return kind == K::real ? o.*real : kind == K::count ? static_cast<double>(o.*count) : (o.*on ? 1.0 : 0.0);
}

void JudgeOptionDef::set(JudgeOptions& o, double v) const {
  if (kind == K::real) {
    o.*real = v;
  } else if (kind == K::count) {
    if (!(v == std::trunc(v)) || std::fabs(v) > 9e15)
      fail("{} ({}): expected a whole number, got {}", flag, python, v);
    o.*count = static_cast<std::int64_t>(v);
  } else {
    if (v != 0 && v != 1) fail("{} ({}): expected true or false, got {}", flag, python, v);
    o.*on = v != 0;
  }
}

std::string JudgeOptionDef::range() const {
  if (std::isinf(hi) && !hi_open) return fmt::format("{} {} (∞ included)", lo_open ? ">" : "≥", g(lo));
  if (std::isinf(hi)) return fmt::format("{} {}", lo_open ? ">" : "≥", g(lo));
  return fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", g(lo), g(hi), hi_open ? ")" : "]");
}

std::span<const JudgeOptionDef> judge_option_table() { return kOptions; }

const JudgeOptionDef* find_judge_option(std::string_view python_name) {
  for (const JudgeOptionDef& d : kOptions)
    if (python_name == d.python) return &d;
  return nullptr;
}

void check_judge_options(const JudgeOptions& o) {
  for (const JudgeOptionDef& d : kOptions) {
    if (d.kind == K::flag) continue;
    const double v = d.get(o);
    const bool above = d.lo_open ? v > d.lo : v >= d.lo, below = d.hi_open ? v < d.hi : v <= d.hi;
    if (!(above && below)) fail("{} ({}): expected a value {}, got {}", d.flag, d.python, d.range(), g(v));
  }
}

}  // namespace kc
