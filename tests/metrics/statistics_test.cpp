// The statistic table (metrics/statistics.h) and the summaries beside the accumulator (metrics/summary.h):
// keys, scopes and values of stat_table against the summary fields they name, and summarize's KL
// quantiles and flip rates against a direct computation (sort, numpy "linear" interpolation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "metrics/statistics.h"
#include "metrics/summary.h"

namespace kc {
namespace {

// The keys docs/judge.md promises ("Statistics"), per scope.
const std::vector<std::string> kSplitKeys{"kl_mean", "kl_median", "kl_p90", "kl_p99", "kl_p999", "kl_max",
                                          "flip_rate", "flip_rate_uncertain", "high_margin_flips",
                                          "delta_p_rms", "nonfinite"};
const std::vector<std::string> kRunKeys{"nll_diff_mean", "sigma"};

SplitSummary filled(SplitId id, std::int64_t n, double base) {
  SplitSummary s;
  s.id = std::move(id), s.n = n;
  s.kl.mean = base + 1, s.kl.median = base + 2, s.kl.p90 = base + 3, s.kl.p99 = base + 4;
  s.kl.p999 = base + 5, s.kl.max = base + 6, s.flip_rate = base + 7, s.flip_rate_uncertain = base + 8;
  s.high_margin_flips = 9, s.delta_p_rms = base + 10, s.nonfinite = 11;
  s.ln_ppl_ratio = base + 12, s.sigma = base + 13;
  return s;
}

TEST(Statistics, TableNamesScopesAndFlags) {
  EXPECT_EQ(statistic_names(StatScope::split), kSplitKeys);
  EXPECT_EQ(statistic_names(StatScope::run), kRunKeys);
  std::set<std::string> names;
  for (const StatDef& d : statistics()) EXPECT_TRUE(names.insert(d.name).second) << "twice: " << d.name;
  EXPECT_STREQ(floor_test_statistic().name, "kl_mean");
  EXPECT_EQ(statistic_of_key("depth.2048.kl_p99"), find_statistic("kl_p99"));
  EXPECT_EQ(statistic_of_key("domain.code.flip_rate"), find_statistic("flip_rate"));
  EXPECT_EQ(find_statistic("kl_mena"), nullptr);
  // Noise mode's fixed limits: mean and median on splits of min_split_center, p99 on min_split_tail.
  EXPECT_EQ(find_statistic("kl_mean")->floor_limit, FloorLimit::center);
  EXPECT_EQ(find_statistic("kl_median")->floor_limit, FloorLimit::center);
  EXPECT_EQ(find_statistic("kl_p99")->floor_limit, FloorLimit::tail);
  int limited = 0;
  for (const StatDef& d : statistics()) limited += d.floor_limit != FloorLimit::none;
  EXPECT_EQ(limited, 3);
  // calibrate's first tier: KL and flip statistics.
  for (const StatDef& d : statistics()) {
    const std::string n = d.name;
    EXPECT_EQ(d.preferred, n.rfind("kl_", 0) == 0 || n.rfind("flip_rate", 0) == 0 || n == "high_margin_flips")
        << n;
    EXPECT_EQ(d.always_fails, n == "nonfinite") << n;
  }
}

TEST(Statistics, StatTableKeysAndValues) {
  RunSummary r;
  r.overall = filled(SplitId::overall(), 5000, 0);
  r.by_domain = {filled(SplitId::domain(0, "code"), 200, 100), filled(SplitId::domain(1, "prose"), 99, 200)};
  r.by_phase = {filled(SplitId::phase(1), 100, 300)};
  r.by_depth = {filled(SplitId::depth(depth_bucket(2048)), 4000, 400)};
  r.by_depth[0].flip_rate_uncertain = NAN;  // no position with margin in (0, 1]: left out
  r.by_phase[0].delta_p_rms = NAN;          // no corpus token: left out
  auto t = stat_table(r, 100);
  std::map<std::string, double> want;
  auto put = [&](const std::string& prefix, const SplitSummary& s, bool run) {
    const double v[] = {s.kl.mean,         s.kl.median,   s.kl.p90,     s.kl.p99,
                        s.kl.p999,         s.kl.max,      s.flip_rate,  s.flip_rate_uncertain,
                        9.0,               s.delta_p_rms, 11.0};
    for (std::size_t i = 0; i < kSplitKeys.size(); ++i)
      if (!std::isnan(v[i])) want[prefix + kSplitKeys[i]] = v[i];
    if (run) want["nll_diff_mean"] = s.ln_ppl_ratio, want["sigma"] = s.sigma;
  };
  put("", r.overall, true);
  put("domain.code.", r.by_domain[0], false);  // prose: 99 < 100 positions, not in the table
  put("phase.decode.", r.by_phase[0], false);
  put("depth.2048.", r.by_depth[0], false);
  EXPECT_EQ(t, want);
  EXPECT_EQ(t.count("depth.2048.flip_rate_uncertain"), 0u);
  EXPECT_EQ(t.count("phase.decode.delta_p_rms"), 0u);
  EXPECT_EQ(t.count("domain.code.sigma"), 0u);
  EXPECT_TRUE(std::isnan(stat_or_nan(t, "domain.prose.kl_mean")));
  EXPECT_EQ(stat_or_nan(t, "kl_p99"), 4.0);
}

TEST(Statistics, HtmlCellsShowTheSummaryFields) {
  const NumberFormat f{[](double v) { return std::to_string(v); },
                       [](double v) { return std::to_string(100 * v) + "%"; }};
  SplitSummary s = filled(SplitId::overall(), 10, 0);
  s.flips = 3, s.kl.stderr_ = 0.5, s.ppl_ref = 2, s.ppl_cand = 3;
  EXPECT_EQ(find_statistic("kl_mean")->show(s, f), std::to_string(1.0) + " ± " + std::to_string(0.5));
  EXPECT_EQ(find_statistic("flip_rate")->show(s, f), "3 (" + std::to_string(700.0) + "%)");
  EXPECT_EQ(find_statistic("nll_diff_mean")->show(s, f),
            std::to_string(12.0) + " (" + std::to_string(2.0) + " → " + std::to_string(3.0) + ")");
  EXPECT_EQ(find_statistic("nonfinite")->show(s, f), "11");
  // Rates are shown as percentages (also the floor's cell); the tail statistics are p99, p99.9 and max.
  for (const StatDef& d : statistics()) {
    const std::string n = d.name;
    EXPECT_EQ(d.share, n.rfind("flip_rate", 0) == 0) << n;
    EXPECT_EQ(d.tail, n == "kl_p99" || n == "kl_p999" || n == "kl_max") << n;
  }
}

// A split's identity: its label, its statistic keys and its cells, from the type, never from its name.
TEST(Statistics, SplitIdLabelsKeysAndCells) {
  const SplitId dom = SplitId::domain(1, "prose"), dec = SplitId::phase(1),
                deep = SplitId::depth(depth_bucket(2048));
  EXPECT_EQ(SplitId::overall().label(), "overall");
  EXPECT_EQ(SplitId::overall().prefix(), "");
  EXPECT_EQ(dom.label(), "domain prose");
  EXPECT_EQ(dom.prefix(), "domain.prose.");
  EXPECT_EQ(dec.label(), "phase decode");
  EXPECT_EQ(deep.name, "2048");
  EXPECT_EQ(deep.prefix(), "depth.2048.");
  EXPECT_EQ(SplitId::depth(0).name, "0");
  for (int c = 0; c < 2 * kCellsPerDomain; ++c) {
    EXPECT_TRUE(SplitId::overall().holds(c));
    EXPECT_EQ(dom.holds(c), c / kCellsPerDomain == 1);
    EXPECT_EQ(dec.holds(c), c % kPhases == 1);
  }
  for (int d : {0, 1, 2047, 2048, 4095, 4096})
    EXPECT_EQ(deep.holds(cell_index(1, depth_bucket(d), 0)), d >= 2048 && d < 4096) << d;
}

// numpy.quantile(x, q) with the default "linear" method.
double linear_quantile(std::vector<double> x, double q) {
  std::sort(x.begin(), x.end());
  const double h = q * static_cast<double>(x.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(h)), hi = std::min(lo + 1, x.size() - 1);
  return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

TEST(Summary, SummarizeMatchesADirectComputation) {
  JudgeAccumulator acc;
  acc.init(20, {"code", "prose"}, 4);
  acc.add_range(0, 30000);
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> kl(-8, 2);
  std::uniform_real_distribution<double> u(0, 3);
  std::vector<double> all, decode;
  std::uint64_t flips = 0, unc = 0, unc_flips = 0;
  for (std::int64_t i = 0; i < 30000; ++i) {
    PositionRecord r;
    r.position = i, r.segment = static_cast<int>(i % 4), r.domain = static_cast<std::uint8_t>(i % 2);
    r.phase = static_cast<std::uint8_t>(i % 3 == 0), r.depth = static_cast<std::int32_t>(i % 5000);
    r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
    // f32 values, as the accumulator keeps them: the quantiles are exact order statistics of those.
    r.score.kl = r.score.kl_upper = static_cast<float>(kl(rng));
    r.score.covered = 20;
    r.margin = u(rng);
    r.flip = u(rng) < 0.1;
    acc.add(r);
    all.push_back(r.score.kl);
    if (r.phase) decode.push_back(r.score.kl);
    flips += r.flip;
    if (r.margin > 0 && r.margin <= 1) ++unc, unc_flips += r.flip;
  }
  RunSummary s = summarize(acc, "x");
  const KlStats& k = s.overall.kl;
  EXPECT_EQ(k.n, 30000);
  double sum = 0;
  for (double v : all) sum += v;
  EXPECT_NEAR(k.mean, sum / 30000, 1e-12 * sum);
  for (auto [q, got] : {std::pair{0.5, k.median}, {0.9, k.p90}, {0.99, k.p99}, {0.999, k.p999}})
    EXPECT_DOUBLE_EQ(got, linear_quantile(all, q)) << q;
  EXPECT_EQ(k.max, *std::max_element(all.begin(), all.end()));
  EXPECT_EQ(s.overall.flips, flips);
  EXPECT_DOUBLE_EQ(s.overall.flip_rate, static_cast<double>(flips) / 30000);
  EXPECT_EQ(s.overall.n_uncertain, unc);
  EXPECT_DOUBLE_EQ(s.overall.flip_rate_uncertain, static_cast<double>(unc_flips) / static_cast<double>(unc));
  ASSERT_EQ(s.by_phase.size(), 2u);
  EXPECT_EQ(s.by_phase[1].id, SplitId::phase(1));
  EXPECT_EQ(s.by_phase[1].id.name, "decode");
  EXPECT_DOUBLE_EQ(s.by_phase[1].kl.median, linear_quantile(decode, 0.5));
  EXPECT_EQ(s.by_domain.size(), 2u);
}

}  // namespace
}  // namespace kc
