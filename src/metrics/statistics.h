// The judge's statistics, one definition each: the flat table (`stat_table`) that thresholds
// ([limits] keys and their validation), calibration, the noise-mode limits, the floor test, the noise ratios
// and the reports (JSON "stats" / "floor_stats" / "noise_ratio", the HTML summary table) read. A statistic is
// one row of kStatistics in statistics.cpp: its name, where it is measured, how it is judged and shown, and
// how it is read off a split's summary (summary.h; the accumulation behind it is accumulator.h).
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/summary.h"

namespace kc {

enum class StatScope {
  split,  // overall and every split with ≥ min_split_n positions, keyed "domain.NAME.", "phase.NAME.", "depth.LOWER."
  run,    // overall only
};

// Noise mode without thresholds: a fixed limit max(kl_factor × floor, kl_abs_min) on every split with at
// least min_split_center (center) or min_split_tail (tail) positions; none: no fixed limit.
enum class FloorLimit { none, center, tail };

// How a renderer formats numbers (the HTML report passes its own).
struct NumberFormat {
  std::string (*num)(double);
  std::string (*pct)(double);
};

struct StatDef {
  const char* name;  // the key: stat_table, [limits], JSON; split keys add the split's prefix
  StatScope scope;
  bool higher_is_worse;  // a limit fails values above it (else below); calibrate fits only these
  bool preferred;        // calibrate takes it before the others (KL and flip statistics)
  bool always_fails;     // a non-zero overall value fails in every mode (rule "nonfinite"): calibrate fits none
  bool paired_floor_test;  // the floor test's statistic (per-segment sums of the KL, judge.cpp): exactly one
  FloorLimit floor_limit;
  const char* label;                      // row of the HTML summary table
  const char* noun;                       // in a sentence ("KL mean", "flip rate at margin (0, 1]")
  bool share;                             // a fraction, shown as a percentage
  double (*value)(const SplitSummary&);   // NaN: not measured in this split (the key is left out)
  std::string (*show)(const SplitSummary&, const NumberFormat&);  // the HTML cell
  // Tail statistics (p99, p99.9, max) rest on a few positions: calibration fits them only on splits of
  // min_split_tail positions or more (judge/calibrate.h).
  bool tail = false;
};

// Every statistic, in the order of the HTML summary table.
std::span<const StatDef> statistics();
const StatDef* find_statistic(std::string_view name);  // nullptr when unknown
// Names of the statistics of one scope, in table order (validation, "did you mean").
std::vector<std::string> statistic_names(StatScope scope);
// The statistic the paired floor test is about.
const StatDef& floor_test_statistic();
// The statistic a key names ("kl_p99", "domain.code.kl_p99" → kl_p99); nullptr when unknown.
const StatDef* statistic_of_key(std::string_view key);

// Flat statistic table: every split statistic overall and, prefixed, for splits with at least min_split_n
// positions; every run statistic overall. Statistics without a value (NaN) are left out.
std::map<std::string, double> stat_table(const RunSummary& r, std::int64_t min_split_n);
// m[key], NaN when absent (a statistic of stat_table that the run lacks).
double stat_or_nan(const std::map<std::string, double>& m, const std::string& key);

}  // namespace kc
