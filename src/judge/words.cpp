#include "judge/words.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "judge/report_format.h"

namespace kc::words {

using report::g3;

namespace {

std::string count(double v) {
  return std::isfinite(v) ? fmt::format("{}", static_cast<std::int64_t>(v)) : g3(v);
}
double over(double a, double b) { return b > 0 ? a / b : (a > 0 ? INFINITY : NAN); }

}  // namespace

// ---- findings -------------------------------------------------------------------------------------------
std::string nonfinite_detail(std::int64_t n) {
  return n ? fmt::format("{} position(s) with NaN/inf output or infinite KL", n) : "";
}

std::string backstop_detail(std::uint64_t flips, std::uint64_t floor_flips,
                            const std::vector<std::pair<std::int64_t, double>>& first, bool failed) {
  if (!flips) return "";
  std::string d = fmt::format("{} flip(s) at margin > {} (floor: {})", flips, kBackstopMargin, floor_flips);
  if (!first.empty())
    d += fmt::format("; first at position {} (margin {:.3g})", first[0].first, first[0].second);
  if (!failed) d += "; the floor flips there too, so the per-bin test decides";
  return d;
}

std::string kl_limit_detail(double kl_factor, double floor, double kl_abs_min) {
  return fmt::format("limit = max({} × floor {:.3g}, {:.3g})", kl_factor, floor, kl_abs_min);
}

std::string floor_test_detail(const FloorTest& t, int family_size, double alpha, double power) {
  std::string runs;
  for (double v : t.floor_runs) runs += fmt::format("{}{:.4g}", runs.empty() ? "" : " ", v);
  return fmt::format(
      "paired over {} segments: t = {:.3g} (df {:.3g}), one-sided p = {:.3g} (Holm, family of {} at α = {}); "
      "floor "
      "runs [{}]; detects {:.3g}× at {:.0f} % power",
      t.segments, t.t, t.df, t.p_value, family_size, alpha, runs, t.mde_ratio, 100 * power);
}

std::string flip_test_detail(const BinReport& b, int family_size, double alpha) {
  return fmt::format(
      "{} / {} flips vs floor {} / {}; one-sided Fisher p = {:.3g} (Holm, family of {} at α = {})",
      b.cand.flips, b.cand.n, b.floor.flips, b.floor.n, b.p_value, family_size, alpha);
}

std::string not_measured() { return "not measured in this run (split absent or too small)"; }

// ---- a finding, the verdict ---------------------------------------------------------------------------
std::string sentence(const Finding& f) {
  const char* is = f.failed ? "above" : "within";
  switch (f.rule) {
    case Rule::nonfinite:
      return fmt::format("{} non-finite position(s) (NaN/inf output or infinite KL)", count(f.value));
    case Rule::backstop:
      return fmt::format(
          "{} flip(s) at reference margin > {}, {}", count(f.value), kBackstopMargin,
          f.floor > 0 ? fmt::format("the floor {} there", count(f.floor)) : "where the floor has none");
    case Rule::floor_test:
      return fmt::format("{} KL mean {} is {}× the floor's {} (paired floor test: t = {:.3g}, p = {:.3g}{})",
                         f.where(), g3(f.value), g3(over(f.value, f.floor)), g3(f.floor), f.t, f.p_value,
                         f.failed ? ", significant after Holm" : "");
    case Rule::kl_limit:
      return fmt::format("{} {} {} is {}× the floor's {}, {} its limit {}", f.where(), f.stat->noun,
                         g3(f.value), g3(over(f.value, f.floor)), g3(f.floor), is, g3(f.limit));
    case Rule::threshold:
      if (std::isnan(f.value)) return fmt::format("{} {}: {}", f.where(), f.stat->noun, not_measured());
      return fmt::format("{} {} {} is {} its calibrated limit {} ({}×)", f.where(), f.stat->noun, g3(f.value),
                         is, g3(f.limit), g3(f.ratio));
    case Rule::flip_test:
      return fmt::format("flip rate at reference margin {} {} is {}× the floor's {} (Fisher p = {:.3g}{})",
                         margin_bin_label(f.bin), g3(f.value), g3(f.ratio), g3(f.floor), f.p_value,
                         f.failed ? ", significant after Holm" : "");
  }
  return "";
}

std::string headline(const JudgeReport& r) {
  if (r.verdict == Verdict::inconclusive && !r.inconclusive_reasons.empty())
    return r.inconclusive_reasons.size() == 1
               ? r.inconclusive_reasons.front()
               : fmt::format("{} (and {} more reason{})", r.inconclusive_reasons.front(),
                             r.inconclusive_reasons.size() - 1, r.inconclusive_reasons.size() > 2 ? "s" : "");
  if (r.findings.empty()) return "no check was made";
  const Finding& f = r.findings.front();
  if (r.verdict != Verdict::fail && r.mode == JudgeMode::noise && !r.no_floor_test.empty())
    return fixed_limits_only(r.no_floor_test) + "; closest: " + sentence(f);
  if (r.verdict != Verdict::fail) return "every check within its limit; closest: " + sentence(f);
  int failed = 0, checked = 0;  // the same check elsewhere: how widespread the evidence is
  for (const Finding& x : r.findings)
    if (x.rule == f.rule && x.stat == f.stat) ++checked, failed += x.failed;
  const std::string of = checked > 1 ? fmt::format(" in {} of {} {}", failed, checked,
                                                   f.rule == Rule::flip_test ? "margin bins" : "splits")
                                     : "";
  switch (f.rule) {
    case Rule::floor_test:
      return fmt::format("KL mean {}× the floor{} ({}: {} vs {}; paired floor test t = {:.3g}, p = {:.3g})",
                         g3(over(f.value, f.floor)), of, f.where(), g3(f.value), g3(f.floor), f.t, f.p_value);
    case Rule::kl_limit:
      return fmt::format("{} {}× the floor{}, above the limit ({}: {} vs limit {})", f.stat->noun,
                         g3(over(f.value, f.floor)), of, f.where(), g3(f.value), g3(f.limit));
    case Rule::threshold:
      return fmt::format("{} above its calibrated limit{} ({}: {} vs {}, {}×)", f.stat->noun, of, f.where(),
                         g3(f.value), g3(f.limit), g3(f.ratio));
    case Rule::flip_test:
      return fmt::format("flip rate {}× the floor's{} (margin {}: {} vs {}; Fisher p = {:.3g})", g3(f.ratio),
                         of, margin_bin_label(f.bin), g3(f.value), g3(f.floor), f.p_value);
    default:
      return sentence(f);
  }
}

std::string caveats_title() { return "caveats (they do not change a FAIL)"; }

// ---- the depth profile ---------------------------------------------------------------------------------
std::string depth_range(std::int64_t lo, std::int64_t hi) {
  return hi == lo + 1 ? fmt::format("{}", lo) : fmt::format("{} … {}", lo, hi - 1);
}

std::string onset(const DepthProfile& p, double alpha) {
  const DepthOnset& o = p.onset;
  if (!p.kept) return "no depth profile: the shards were written before kerncheck kept per-depth sums";
  if (p.buckets.empty()) return "no depth profile: no depth bucket holds enough positions";
  if (!o.tested) return "depth onset not tested: it needs two or more noise runs that differ";
  const DepthBucket& last = p.buckets.back();
  if (!o.found)
    return fmt::format(
        "no depth onset: the deepest depths ({}) are within the floor's spread (paired t = {:.3g} ≤ {:.3g}, "
        "α = {})",
        depth_range(last.lo, last.hi), last.t, o.t_critical, alpha);
  const DepthBucket& b = p.buckets[o.bucket];
  std::size_t outside = 0;
  for (std::size_t i = o.bucket; i < p.buckets.size(); ++i) outside += p.buckets[i].outside;
  std::string s = fmt::format(
      "leaves the floor from depth {} on: {} of the {} depth buckets from {} to the deepest are outside the "
      "floor's spread (paired t > {:.3g}, α = {}; the change point of their t); KL mean {}× the floor's from "
      "there",
      o.depth, outside, p.buckets.size() - o.bucket, depth_range(b.lo, b.hi), o.t_critical, alpha,
      g3(o.ratio_after));
  if (o.found_share > 0)
    s += fmt::format("; 90 % interval {} … {} ({:.0f} % of {} segment resamples find an onset)", o.lo, o.hi,
                     100 * o.found_share, o.resamples);
  return s;
}

// ---- INCONCLUSIVE reasons -----------------------------------------------------------------------------
std::string reason_no_reference() {
  return "no noise runs (--noise) and no thresholds (--thresholds): nothing says which numbers are normal";
}

std::string reason_few_positions(std::int64_t judged, std::int64_t need) {
  return fmt::format("only {} positions judged (at least {} needed to pass)", judged, need);
}

std::string reason_few_uncertain(std::uint64_t have, std::int64_t need) {
  return fmt::format(
      "only {} positions with margin in (0, 1]: too few to test the flip rate against the floor "
      "(need {})",
      have, need);
}

std::string reason_power(const FloorTest& t, const JudgeOptions& o, std::int64_t segments_per_depth) {
  // The MDE scales with sd ∝ 1/√segments when the spread is sampling noise (v_seg; v_run too without a
  // run-level offset), so ((MDE× − 1) / (target − 1))² estimates how many times the segments would reach
  // the target (EXPERIMENTS.md: 8 → 24 segments measured against it). The advice is a command to run.
  std::string more;
  if (std::isfinite(t.mde_ratio) && o.mde_target > 1) {
    const double factor = std::pow((t.mde_ratio - 1) / (o.mde_target - 1), 2);
    more = fmt::format(" (~{:.1f}× the segments if the floor's spread is sampling noise", factor);
    if (segments_per_depth > 0)
      more += fmt::format(": a corpus of `kerncheck corpus build … --segments-per-depth {}`, this one has {}",
                          static_cast<std::int64_t>(std::ceil(segments_per_depth * factor * 1.1)),
                          segments_per_depth);
    more += ")";
  }
  return fmt::format(
      "{}: this corpus and floor detect only a {:.3g}× increase of KL mean at {:.0f} % power (need ≤ {}×); "
      "add noise runs (--noise) or segments{}",
      t.split.label(), t.mde_ratio, 100 * o.power, o.mde_target, more);
}

std::string reason_coverage(double mass, int k, double need) {
  return fmt::format(
      "the candidate reported only {:.2f} % of the reference top-{} probability mass (need {:.2f} "
      "%); KL is a lower bound",
      100 * mass, k, 100 * need);
}

std::string reason_other_golden(const std::string& calibrated_on, const std::string& this_one) {
  return fmt::format("the thresholds were calibrated on another golden ({}; this one is {})", calibrated_on,
                     this_one);
}

// ---- notes ------------------------------------------------------------------------------------------------
std::string floor_no_spread(std::size_t runs, double kl_factor) {
  return fmt::format(
      "the {} floor runs do not differ (the same bits at every position), so the floor has no spread and "
      "the floor test cannot run: verdicts against this floor rest on the fixed limits alone (KL mean, "
      "median and p99 ≤ {} × the floor's, no flip above margin {} where the floor has none), which let a "
      "regression below {}× the floor pass; to measure a spread, add an equally correct implementation to "
      "the floor (e.g. another attention backend or another kernel build), or accept the fixed limits",
      runs, kl_factor, kBackstopMargin, kl_factor);
}

std::string floor_spread(std::size_t runs, std::size_t distinct, const std::string& power, double power_level,
                         double mde_target) {
  return fmt::format(
      "{} floor runs, {} with distinct bits: the floor test can detect an increase of KL mean of {} at "
      "{:.0f} % power (a split must detect ≤ {}×, else verdicts against this floor are INCONCLUSIVE; more "
      "configurations that differ, or more segments, lower it)",
      runs, distinct, power.empty() ? "(no split large enough)" : power, 100 * power_level, mde_target);
}

std::string floor_repeats(std::size_t runs, std::size_t distinct, const std::vector<std::string>& left_out) {
  return fmt::format(
      "the floor's {} runs hold {} distinct implementations: {} repeat{} an earlier run's bits and {} read once "
      "(a repeat adds no spread; counted twice it would shrink the floor's)",
      runs, distinct, fmt::join(left_out, ", "), left_out.size() == 1 ? "s" : "", left_out.size() == 1 ? "is" : "are");
}

std::string note_one_noise_run() {
  return "one noise run: the spread of equally correct implementations is unknown, so the floor test cannot "
         "run and only the fixed limits (--kl-factor) apply; give ≥ 2 noise runs that differ for the floor "
         "test";
}

std::string note_split_no_spread(const std::string& split) {
  return fmt::format(
      "{}: the floor runs do not differ there, so no floor test ran on it and only the fixed limits apply "
      "to it",
      split);
}

std::string fixed_limits_only(const std::string& why) {
  return fmt::format("within the fixed limits only; no floor test ran ({})", why);
}

std::string note_thresholds_with_noise() {
  return "thresholds mode: the verdict reads the calibrated limits (they separate the runs they were "
         "calibrated "
         "on); the noise runs only give ratios, σ and the backstop's floor. Without --thresholds the "
         "candidate "
         "is tested against the floor (the floor test)";
}

std::string floor_mismatch_note(const std::string& mismatch) {
  return "FLOOR MISMATCH (accepted by --allow-floor-mismatch): " + mismatch;
}

// ---- the floor check --------------------------------------------------------------------------------------
std::string floor_mismatch(const FloorMismatch& m) {
  using W = FloorMismatch::What;
  switch (m.what) {
    case W::engine:
      return fmt::format("engine {} against a floor of engine {}", m.cand, m.floor);
    case W::base:
      return fmt::format("base precision {} against a floor in {}", m.cand, m.floor);
    case W::kv:
      return fmt::format("KV cache {} against a floor with KV cache {}", m.cand, m.floor);
    case W::logits:
      return fmt::format("logits {} against a floor with logits {}", m.cand, m.floor);
    default:
      return "";
  }
}

std::string floor_mismatch_advice(const FloorMismatch& m) {
  using W = FloorMismatch::What;
  if (m.what == W::kv || m.what == W::logits) {
    const char* what = m.what == W::kv ? "KV cache" : "logits";
    const char* term = m.what == W::kv ? "kv" : "logits";
    return fmt::format(
        "if the {0} dtype is the change under test ({1}={2} against the baseline's {3}), judge it against "
        "the "
        "baseline's floor with --allow-floor-mismatch, and every report says so; to test another change of a "
        "{1}={2} build, record the floor with {1}={2}",
        what, term, m.cand, m.floor);
  }
  return fmt::format(
      "the floor's spread depends on the {}: record the noise runs with the candidate's, or pass "
      "--allow-floor-mismatch",
      m.what == W::engine ? "engine" : "base precision");
}

}  // namespace kc::words
