#include "metrics/statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kc {

namespace {

using S = SplitSummary;
using F = NumberFormat;
constexpr StatScope kSplit = StatScope::split, kRun = StatScope::run;

// One row per statistic. To add one: a row here (its value read off SplitSummary; a new accumulated
// quantity also needs CellStats in accumulator.h and its summary in summary.cpp), a test, a line in
// docs/judge.md ("Statistics").
// clang-format off
constexpr StatDef kStatistics[] = {
  {"kl_mean", kSplit, true, true, false, true, FloorLimit::center, "KL mean ± stderr", "KL mean", false,
   [](const S& s) { return s.kl.mean; },
   [](const S& s, const F& f) { return f.num(s.kl.mean) + " ± " + f.num(s.kl.stderr_); }},
  {"kl_median", kSplit, true, true, false, false, FloorLimit::center, "KL median", "KL median", false,
   [](const S& s) { return s.kl.median; }, [](const S& s, const F& f) { return f.num(s.kl.median); }},
  {"kl_p90", kSplit, true, true, false, false, FloorLimit::none, "KL p90", "KL p90", false,
   [](const S& s) { return s.kl.p90; }, [](const S& s, const F& f) { return f.num(s.kl.p90); }},
  {"kl_p99", kSplit, true, true, false, false, FloorLimit::tail, "KL p99", "KL p99", false,
   [](const S& s) { return s.kl.p99; }, [](const S& s, const F& f) { return f.num(s.kl.p99); }, true},
  {"kl_p999", kSplit, true, true, false, false, FloorLimit::none, "KL p99.9", "KL p99.9", false,
   [](const S& s) { return s.kl.p999; }, [](const S& s, const F& f) { return f.num(s.kl.p999); }, true},
  {"kl_max", kSplit, true, true, false, false, FloorLimit::none, "KL max", "KL max", false,
   [](const S& s) { return s.kl.max; }, [](const S& s, const F& f) { return f.num(s.kl.max); }, true},
  {"flip_rate", kSplit, true, true, false, false, FloorLimit::none, "flips", "flip rate", true,
   [](const S& s) { return s.flip_rate; },
   [](const S& s, const F& f) { return fmt::format("{} ({})", s.flips, f.pct(s.flip_rate)); }},
  {"flip_rate_uncertain", kSplit, true, true, false, false, FloorLimit::none, "flip rate, margin in (0, 1]",
   "flip rate at margin (0, 1]", true,
   [](const S& s) { return s.flip_rate_uncertain; },  // NaN without positions of margin (0, 1]
   [](const S& s, const F& f) { return f.pct(s.flip_rate_uncertain); }},
  {"high_margin_flips", kSplit, true, true, false, false, FloorLimit::none, "flips above margin 1 (backstop)",
   "flips above margin 1", false,
   [](const S& s) { return static_cast<double>(s.high_margin_flips); },
   [](const S& s, const F&) { return std::to_string(s.high_margin_flips); }},
  {"delta_p_rms", kSplit, true, false, false, false, FloorLimit::none, "Δp of the corpus token, RMS",
   "Δp RMS", false,
   [](const S& s) { return s.delta_p_rms; },  // NaN without the corpus token's log-prob
   [](const S& s, const F& f) { return f.num(s.delta_p_rms); }},
  // A perplexity difference: it cannot rank variants, so calibrate uses it last.
  {"nll_diff_mean", kRun, true, false, false, false, FloorLimit::none, "ln perplexity ratio (perplexity ref → cand)",
   "ln perplexity ratio", false,
   [](const S& s) { return s.ln_ppl_ratio; },
   [](const S& s, const F& f) {
     return f.num(s.ln_ppl_ratio) + " (" + f.num(s.ppl_ref) + " → " + f.num(s.ppl_cand) + ")";
   }},
  {"sigma", kRun, true, false, false, false, FloorLimit::none, "σ of logit error (√ mean var δ)",
   "per-logit σ", false,
   [](const S& s) { return s.sigma; }, [](const S& s, const F& f) { return f.num(s.sigma); }},
  {"nonfinite", kSplit, true, false, true, false, FloorLimit::none, "non-finite positions",
   "non-finite positions", false,
   [](const S& s) { return static_cast<double>(s.nonfinite); },
   [](const S& s, const F&) { return std::to_string(s.nonfinite); }},
};
// clang-format on

constexpr bool one_floor_test_statistic() {
  int n = 0;
  for (const StatDef& d : kStatistics) n += d.paired_floor_test;
  return n == 1;
}
static_assert(one_floor_test_statistic(), "exactly one statistic is the floor test's");

}  // namespace

std::span<const StatDef> statistics() { return kStatistics; }

const StatDef* find_statistic(std::string_view name) {
  for (const StatDef& d : kStatistics)
    if (name == d.name) return &d;
  return nullptr;
}

std::vector<std::string> statistic_names(StatScope scope) {
  std::vector<std::string> v;
  for (const StatDef& d : kStatistics)
    if (d.scope == scope) v.emplace_back(d.name);
  return v;
}

const StatDef& floor_test_statistic() {
  return *std::find_if(std::begin(kStatistics), std::end(kStatistics),
                       [](const StatDef& d) { return d.paired_floor_test; });
}

const StatDef* statistic_of_key(std::string_view key) {
  const auto dot = key.rfind('.');
  return find_statistic(dot == std::string_view::npos ? key : key.substr(dot + 1));
}

std::map<std::string, double> stat_table(const RunSummary& r, std::int64_t min_split_n) {
  std::map<std::string, double> t;
  auto put = [&](const std::string& prefix, const SplitSummary& s) {
    if (prefix.size() && s.n < min_split_n) return;
    for (const StatDef& d : kStatistics)
      if (d.scope == StatScope::split || prefix.empty()) t[prefix + d.name] = d.value(s);
  };
  for (const SplitSummary* s : all_splits(r)) put(s->id.prefix(), *s);
  for (auto it = t.begin(); it != t.end();) it = std::isnan(it->second) ? t.erase(it) : std::next(it);
  return t;
}

double stat_or_nan(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? NAN : it->second;
}

}  // namespace kc
