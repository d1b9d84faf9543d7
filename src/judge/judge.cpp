// The verdict (docs/judge.md, "Verdict"): the evidence is gathered first (evidence.h), then each rule reads
// it and adds its findings, then the INCONCLUSIVE reasons, then the verdict and the headline. judge() reads
// like the page it implements.
#include "judge/judge.h"

#include <algorithm>
#include <map>
#include <cmath>

#include "core/error.h"
#include "core/suggest.h"
#include "judge/evidence.h"
#include "judge/options.h"
#include "judge/words.h"

namespace kc {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass:
      return "PASS";
    case Verdict::fail:
      return "FAIL";
    default:
      return "INCONCLUSIVE";
  }
}

int verdict_exit_code(Verdict v) {
  return v == Verdict::pass ? kExitPass : v == Verdict::fail ? kExitFail : kExitInconclusive;
}

const char* mode_name(JudgeMode m) {
  return m == JudgeMode::thresholds ? "thresholds" : m == JudgeMode::noise ? "noise" : "none";
}

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::nonfinite:
      return "nonfinite";
    case Rule::floor_test:
      return "floor_test";
    case Rule::kl_limit:
      return "kl_limit";
    case Rule::threshold:
      return "threshold";
    case Rule::flip_test:
      return "flip_test";
    default:
      return "backstop";
  }
}

std::string Finding::where() const { return bin >= 0 ? "bin " + margin_bin_label(bin) : split.label(); }

namespace {

Finding finding(Rule rule, SplitId split, const StatDef* stat, int bin = -1) {
  Finding f;
  f.rule = rule, f.split = std::move(split), f.stat = stat, f.bin = bin;
  return f;
}

void add(JudgeReport& R, Finding f) {
  if (std::isnan(f.ratio) && f.limit > 0) f.ratio = f.value / f.limit;
  R.findings.push_back(std::move(f));
}

// ---- the rules: each reads the evidence and adds its findings
// ----------------------------------------------

// 1. Non-finite output fails in every mode.
void rule_nonfinite(JudgeReport& R) {
  const std::int64_t n = R.cand.overall.nonfinite;
  Finding f = finding(Rule::nonfinite, SplitId::overall(), find_statistic("nonfinite"));
  f.value = static_cast<double>(n), f.limit = 0, f.ratio = n ? INFINITY : 0.0, f.failed = n > 0;
  f.detail = words::nonfinite_detail(n);
  add(R, std::move(f));
}

// 2. The backstop: flips above margin 1 that the floor does not have (any such flip without noise runs).
void rule_backstop(JudgeReport& R, const JudgeAccumulator& cand) {
  std::uint64_t floor_flips = 0;
  for (int b = kHighMarginBin; b < kMarginBins; ++b) floor_flips += R.bins[b].floor.flips;
  const std::uint64_t flips = R.cand.overall.high_margin_flips;
  Finding f = finding(Rule::backstop, SplitId::overall(), find_statistic("high_margin_flips"));
  f.failed = flips > 0 && floor_flips == 0;
  f.value = static_cast<double>(flips), f.limit = 0, f.floor = static_cast<double>(floor_flips);
  f.ratio = f.failed ? INFINITY : 0.0;
  f.detail = words::backstop_detail(flips, floor_flips, cand.high_margin_flips, f.failed);
  add(R, std::move(f));
}

// 3a. Noise mode: KL mean and median (splits ≥ min_split_center) and p99 (≥ min_split_tail) above
// max(kl_factor × floor, kl_abs_min).
void rule_kl_limit(JudgeReport& R) {
  const JudgeOptions& o = R.options;
  for (const SplitSummary* s : all_splits(R.cand))
    for (const StatDef& d : statistics()) {
      if (d.floor_limit == FloorLimit::none) continue;
      if (s->n < (d.floor_limit == FloorLimit::center ? o.min_split_center : o.min_split_tail)) continue;
      const std::string key = s->id.prefix() + d.name;
      auto v = R.stats.find(key);
      auto fl = R.floor_stats.find(key);
      if (v == R.stats.end() || fl == R.floor_stats.end()) continue;
      Finding f = finding(Rule::kl_limit, s->id, &d);
      f.value = v->second, f.floor = fl->second, f.limit = std::max(o.kl_factor * fl->second, o.kl_abs_min);
      f.failed = f.value > f.limit;
      f.detail = words::kl_limit_detail(o.kl_factor, fl->second, o.kl_abs_min);
      add(R, std::move(f));
    }
}

// 3b. Noise mode: the paired floor test of each split's KL mean, rejected by Holm.
void rule_floor_test(JudgeReport& R) {
  for (const FloorTest& t : R.floor_tests) {
    Finding f = finding(Rule::floor_test, t.split, &floor_test_statistic());
    f.value = t.cand, f.limit = t.limit, f.floor = t.floor_mean, f.p_value = t.p_value, f.t = t.t;
    f.failed = t.rejected;
    f.detail = words::floor_test_detail(t, R.family_size, R.options.alpha, R.options.power);
    add(R, std::move(f));
  }
}

// 3c. Noise mode: the flip rate of each non-tie margin bin against the pooled floor, rejected by Holm.
void rule_flip_test(JudgeReport& R) {
  for (int b = 0; b < kMarginBins; ++b) {
    const BinReport& br = R.bins[b];
    if (!br.tested) continue;
    Finding f = finding(Rule::flip_test, SplitId::overall(), find_statistic("flip_rate"), b);
    f.value = br.cand.rate, f.limit = br.floor.rate, f.floor = br.floor.rate, f.p_value = br.p_value;
    f.ratio = br.floor.rate > 0 ? br.cand.rate / br.floor.rate : (br.cand.flips ? INFINITY : 0.0);
    f.failed = br.rejected;
    f.detail = words::flip_test_detail(br, R.family_size, R.options.alpha);
    add(R, std::move(f));
  }
}

// The split a thresholds key names ("domain.prose.kl_mean" → domain prose), refused (exit 3) when this
// golden has no such split: such a limit would apply to nothing. read_thresholds checked the syntax.
SplitId limit_split(const std::string& key, const JudgeReport& R, const std::string& file) {
  const auto first = key.find('.'), last = key.rfind('.');
  if (first == std::string::npos) return SplitId::overall();
  const std::string kind = key.substr(0, first), name = key.substr(first + 1, last - first - 1);
  if (kind == "phase") return SplitId::phase(name == "decode" ? 1 : 0);
  if (kind == "depth") return SplitId::depth(depth_bucket(std::stoll(name)));  // a bucket's lower edge
  const auto it = std::find(R.domains.begin(), R.domains.end(), name);
  if (it != R.domains.end()) return SplitId::domain(static_cast<int>(it - R.domains.begin()), name);
  std::vector<std::string> have;
  for (const std::string& d : R.domains) have.push_back("domain." + d);
  throw_input_error(file, fmt::format("limits.\"{}\"", key),
                    fmt::format("a split of this golden ({})", fmt::join(have, ", ")),
                    fmt::format("\"domain.{}\"{}", name, did_you_mean("domain." + name, have)));
}

// 4. Thresholds mode: every statistic of the table above its calibrated limit (below, where lower is worse).
void rule_thresholds(JudgeReport& R, const Thresholds& th) {
  for (auto& [key, limit] : th.limits) {
    Finding f = finding(Rule::threshold, limit_split(key, R, th.path), statistic_of_key(key));
    f.limit = limit;
    auto it = R.stats.find(key);
    if (it == R.stats.end()) {
      f.detail = words::not_measured();
      add(R, std::move(f));
      continue;
    }
    const double v = it->second;
    f.value = v, f.floor = R.floor_stats.count(key) ? R.floor_stats.at(key) : NAN;
    const bool higher_is_worse = f.stat->higher_is_worse;
    f.failed = higher_is_worse ? v > limit : v < limit;
    f.ratio = higher_is_worse ? (limit > 0 ? v / limit : (v > limit ? INFINITY : 0.0))
                              : (v > 0 ? limit / v : (v < limit ? INFINITY : 0.0));
    add(R, std::move(f));
  }
}

// Otherwise INCONCLUSIVE when any of these (under a FAIL they are caveats: a failing statistic is evidence
// enough).
void inconclusive_reasons(JudgeReport& R, const Thresholds* th) {
  const JudgeOptions& o = R.options;
  const SplitSummary& ov = R.cand.overall;
  std::vector<std::string>& why = R.inconclusive_reasons;
  if (th && !th->golden_checksum.empty() && th->golden_checksum != R.golden.checksum)
    why.push_back(words::reason_other_golden(th->golden_checksum, R.golden.checksum));
  if (R.mode == JudgeMode::none) why.push_back(words::reason_no_reference());
  if (R.positions_judged < o.min_positions)
    why.push_back(words::reason_few_positions(R.positions_judged, o.min_positions));
  if (R.mode == JudgeMode::noise && static_cast<std::int64_t>(ov.n_uncertain) < o.min_uncertain)
    why.push_back(words::reason_few_uncertain(ov.n_uncertain, o.min_uncertain));
  std::map<std::int64_t, std::int64_t> per_depth;  // segments of each depth, for the advice
  std::int64_t most = 0;
  for (const Segment& s : R.golden.segments) most = std::max(most, ++per_depth[s.depth]);
  for (const FloorTest& t : R.floor_tests)  // a split that matters must detect mde_target with `power`
    if (t.matters && !(t.mde_ratio <= o.mde_target)) why.push_back(words::reason_power(t, o, most));
  if (ov.coverage_mass < o.min_coverage)
    why.push_back(words::reason_coverage(ov.coverage_mass, R.golden.k, o.min_coverage));
}

// The failing findings first, rule by rule in Rule's order (the strongest evidence first), each rule's
// strongest first: the smallest p for a test, else the largest ratio. The others by ratio, closest to its
// limit first. The first finding decides the headline.
bool stronger(const Finding& a, const Finding& b) {
  if (a.failed != b.failed) return a.failed;
  auto ratio = [](const Finding& f) { return std::isnan(f.ratio) ? -1.0 : f.ratio; };
  if (!a.failed) return ratio(a) > ratio(b);
  if (a.rule != b.rule) return a.rule < b.rule;
  if (a.p_value != b.p_value && !std::isnan(a.p_value) && !std::isnan(b.p_value))
    return a.p_value < b.p_value;
  if (a.rule == Rule::floor_test) return a.t > b.t;
  return ratio(a) > ratio(b);
}

void decide(JudgeReport& R) {
  std::stable_sort(R.findings.begin(), R.findings.end(), stronger);
  const bool failed = !R.findings.empty() && R.findings.front().failed;
  R.verdict = failed ? Verdict::fail : R.inconclusive_reasons.empty() ? Verdict::pass : Verdict::inconclusive;
  R.headline = words::headline(R);
}

JudgeReport report_head(const GoldenMeta& golden, const std::string& golden_path,
                        const JudgeAccumulator& cand, const std::string& cand_path,
                        const std::vector<std::string>& noise_paths, const Thresholds* th,
                        const JudgeOptions& opt) {
  JudgeReport R;
  R.options = opt;
  R.golden = golden;
  R.golden_path = golden_path;
  R.candidate_path = cand_path;
  R.noise_paths = noise_paths;
  R.domains = cand.domains;
  R.positions_judged = cand.positions_judged();
  R.has_floor = !noise_paths.empty();
  R.mode = th ? JudgeMode::thresholds : R.has_floor ? JudgeMode::noise : JudgeMode::none;
  if (th) R.thresholds_path = th->path;
  if (th && R.has_floor) R.notes.push_back(words::note_thresholds_with_noise());
  return R;
}

}  // namespace

JudgeReport judge(const GoldenMeta& golden, const std::string& golden_path, const JudgeAccumulator& cand,
                  const std::string& cand_path, const std::vector<JudgeAccumulator>& noise,
                  const std::vector<std::string>& noise_paths, const Thresholds* th,
                  const JudgeOptions& opt) {
  check_judge_options(opt);
  KC_ASSERT(noise.size() == noise_paths.size(), "judge: {} noise runs, {} paths", noise.size(),
            noise_paths.size());
  JudgeReport R = report_head(golden, golden_path, cand, cand_path, noise_paths, th, opt);
  // The evidence: every number the rules read.
  evidence::summaries(R, cand, noise);
  evidence::flip_bins(R, cand);
  if (R.mode == JudgeMode::noise) evidence::floor_tests(R, cand, noise);
  evidence::holm(R);  // one family: the floor tests and the flip tests
  evidence::depth_profile(R, cand, noise);  // reported, not a rule: the verdict's depth splits are tested above
  // FAIL when any of:
  rule_nonfinite(R);
  if (!(th && th->limits.count("high_margin_flips"))) rule_backstop(R, cand);
  if (th) rule_thresholds(R, *th);
  if (R.mode == JudgeMode::noise) {
    rule_kl_limit(R);
    rule_floor_test(R);
    rule_flip_test(R);
  }
  // Otherwise INCONCLUSIVE when any of the reasons, else PASS.
  inconclusive_reasons(R, th);
  decide(R);
  R.worst = evidence::worst(golden, cand);
  R.sample = cand.sample;
  std::sort(R.sample.begin(), R.sample.end(), [](auto& a, auto& b) { return a.position < b.position; });
  return R;
}

}  // namespace kc
