// Summaries of the judge's accumulator (accumulator.h): the exact quantiles of the KL values, one
// SplitSummary per split (overall, domain, phase, depth — each a merge of cells) and the run-wide figures
// (Pinsker bound, high-KL positions without a flip). The flat statistic table that thresholds, reports
// and calibration read is statistics.h.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "metrics/accumulator.h"

namespace kc {

struct KlStats {
  std::int64_t n = 0;
  double mean = NAN, stderr_ = NAN, median = NAN, p90 = NAN, p99 = NAN, p999 = NAN, max = NAN;
};

struct BinCount {
  std::uint64_t n = 0, flips = 0;
  std::uint64_t tie_flips = 0;  // flips the candidate's own log-probs could not order (PositionRecord::tie)
  double rate = NAN, ci_lo = NAN, ci_hi = NAN;  // Wilson 95 %
};

// What a split groups (every position, a domain, a phase, a depth bucket) and which one: its label in the
// reports, its keys in the statistic table and its cells all come from here, never from its name.
enum class SplitKind : std::uint8_t { overall, domain, phase, depth };
const char* phase_name(int phase);  // 0 "prefill", 1 "decode"
struct SplitId {
  SplitKind kind = SplitKind::overall;
  int index = 0;     // the domain's index, the phase (0 prefill, 1 decode) or the depth bucket
  std::string name;  // "overall", the domain's name, "prefill" / "decode", the bucket's lower edge ("2048")
  static SplitId overall() { return {SplitKind::overall, 0, "overall"}; }
  static SplitId domain(int index, std::string name) { return {SplitKind::domain, index, std::move(name)}; }
  static SplitId phase(int p) { return {SplitKind::phase, p, phase_name(p)}; }
  static SplitId depth(int bucket);
  const char* kind_name() const;  // "overall" | "domain" | "phase" | "depth"
  std::string label() const;      // "overall", "domain prose", "phase decode", "depth 2048"
  std::string prefix() const;     // "", "domain.prose.", "phase.decode.", "depth.2048.": its statistic keys
  bool holds(int cell) const;     // the cells (domain × depth bucket × phase, accumulator.h) it merges
  bool operator==(const SplitId& o) const { return kind == o.kind && index == o.index; }
};

struct SplitSummary {
  SplitId id;
  std::int64_t n = 0, nonfinite = 0, q_other_clamped = 0;
  KlStats kl;
  std::uint64_t flips = 0, tie_flips = 0;
  double flip_rate = NAN;
  std::array<BinCount, kMarginBins> bins;
  std::uint64_t high_margin_flips = 0;  // flips with margin > 1
  double flip_rate_uncertain = NAN;     // flips / positions with margin in (0, 1]
  std::uint64_t n_uncertain = 0;
  std::int64_t n_token = 0;
  double delta_p_mean = NAN, delta_p_stderr = NAN, delta_p_rms = NAN;
  double ppl_ref = NAN, ppl_cand = NAN, ln_ppl_ratio = NAN, ln_ppl_ratio_stderr = NAN;
  double sigma = NAN;  // sqrt of the mean per-position variance of δ = lq − lp
  // Coverage (1 when the candidate reported every golden id).
  double coverage_ids = NAN, coverage_mass = NAN;
  std::uint64_t positions_partial = 0, upper_infinite = 0;
  double kl_upper_mean = NAN;  // NaN when some upper bound is infinite
  KlStats full_kl;             // n = 0 unless full logits on both sides
};

struct RunSummary {
  std::string path;
  SplitSummary overall;
  std::vector<SplitSummary> by_domain, by_depth, by_phase;
  double pinsker_bound = NAN;        // sqrt(½ · mean over segments of Σ_t KL_t)
  double pinsker_steps = NAN;        // mean scored positions per segment (the T of the bound)
  double pinsker_max_segment = NAN;  // max over segments of sqrt(½ Σ_t KL_t)
  double high_kl_threshold = NAN;    // KL above which a position counts as high
  std::uint64_t high_kl = 0, high_kl_no_flip = 0;
  double high_kl_no_flip_share = NAN;
};

RunSummary summarize(const JudgeAccumulator& acc, const std::string& path, double high_kl_threshold = NAN);
// Every split of the run: overall, then by domain, phase and depth (the reports' order).
std::vector<const SplitSummary*> all_splits(const RunSummary& r);
// The KL median of the run's domain split `name`; NaN when the run has no such domain.
double domain_median(const RunSummary& s, const std::string& name);

}  // namespace kc
