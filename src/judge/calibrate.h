// `kerncheck calibrate`: thresholds that pass every known-good run and fail every known-bad run.
//
// For each statistic s (stat_table keys present in every run): G_s = max over good runs. A bad run r is
// caught by s when its value b_rs > G_s. Greedy cover: while some bad run is uncaught, take the statistic
// with the largest separation b_rs / G_s over the uncaught runs (overall statistics win ties), and set its
// limit between G_s and the smallest caught bad value m_s: sqrt(G_s · m_s) (the midpoint when G_s ≤ 0), so
// every good run passes and every bad run it catches fails. Bad runs no statistic catches are reported.
// The statistics marked preferred in metrics/statistics.h (KL and flip statistics: kl_*, flip_rate*,
// high_margin_flips) come first: the others (nll_diff_mean, a perplexity difference that cannot rank
// variants; delta_p_rms; sigma) are only used for a bad run that no preferred statistic catches. Only
// higher-is-worse statistics are fitted; the overall nonfinite is not (it always fails). Leave-one-out: every run is judged by the limits fitted without it.
// `kerncheck calibrate` requires ≥ 2 good and ≥ 2 bad runs (require_runs) so that leave-one-out means
// something; the library takes any non-empty sets.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc {

struct StatSeparation {
  std::string key;
  double good_max = 0, bad_min_caught = 0, limit = 0;
  double separation = 0;             // bad_min_caught / good_max (inf when good_max = 0)
  std::vector<std::string> catches;  // bad runs failing on it
};

struct CalibrationResult {
  Thresholds thresholds;
  std::vector<StatSeparation> chosen;    // the statistics written, in choice order
  std::vector<std::string> unseparated;  // bad runs that no statistic separates from the good ones
  // For every bad run: its best statistic and separation (for the report).
  std::vector<std::pair<std::string, StatSeparation>> best_per_bad;
  // Leave-one-out: each run judged by the limits calibrated without it (good must pass, bad must fail).
  struct Loo {
    std::string run;
    bool good = false, ok = false;
    std::string detail;  // the statistic that failed it (good) or "" (bad not caught)
  };
  std::vector<Loo> loo;
  // Chosen statistics whose separation rests on a single bad run (it alone exceeds the good maximum).
  std::vector<std::string> rests_on_one;
};
bool preferred_statistic(const std::string& key);  // the table's `preferred` (KL and flip statistics)

// A run's statistic table as calibration reads it: stat_table without the tail statistics (p99, p99.9, max)
// of the splits with fewer than min_split_tail positions, which one or two positions decide (the maximum
// over a depth bucket of 128 positions is one position).
std::map<std::string, double> calibration_table(const RunSummary& r, const JudgeOptions& o);

CalibrationResult calibrate(const std::vector<std::pair<std::string, std::map<std::string, double>>>& good,
                            const std::vector<std::pair<std::string, std::map<std::string, double>>>& bad,
                            bool leave_one_out = true);
// Throws kc::Error (exit 3) unless there are ≥ 2 good and ≥ 2 bad runs.
void require_runs(std::size_t good, std::size_t bad);

}  // namespace kc
