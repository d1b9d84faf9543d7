// Golden/candidate files (write → read round trip, refusals with the field named), the verdict rules on
// hand-made accumulators, calibration.
#include "judge/judge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "golden/golden.h"
#include "judge/calibrate.h"
#include "judge/options.h"
#include "judge/words.h"

namespace kc {
namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kc_judge_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

GoldenBuffers tiny_golden(int n, int k) {
  GoldenBuffers g;
  g.k = k;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) {
      g.top_ids.push_back(j + i % 3);
      g.top_logprobs.push_back(std::log(0.5f) - j);
    }
    g.other_logprob.push_back(-5);
    g.token.push_back(i % 7);
    g.token_logprob.push_back(-1);
    g.segment.push_back(0);
    g.depth.push_back(i + 1);
    g.phase.push_back(i % 2);
    g.flags.push_back(0);
  }
  return g;
}

GoldenMeta tiny_meta(int n, int k) {
  GoldenMeta m;
  m.k = k;
  m.vocab = 100;
  m.n = n;
  m.identity = {"model-x", "tok-y", "corpus-z"};
  m.segments = {Segment{"s", "code", 1, 0, "", {}}};
  return m;
}

TEST(Golden, RoundTripAndChecksum) {
  auto g = tiny_golden(10, 4);
  std::string p = tmp("g.safetensors");
  std::string sum = write_golden(p, tiny_meta(10, 4), g.view());
  Golden r = read_golden(p);
  EXPECT_EQ(r.meta.checksum, sum);
  EXPECT_EQ(r.meta.identity.tokenizer, "tok-y");
  EXPECT_EQ(std::vector<std::int32_t>(r.a.top_ids.begin(), r.a.top_ids.end()), g.top_ids);
  EXPECT_EQ(r.meta.segments[0].domain, "code");
  CandidateBuffers c;
  c.k = 4;
  for (int i = 0; i < 10; ++i)
    c.push(r.a.top_logprobs.subspan(i * 4, 4), -5, r.a.top_ids[i * 4], r.a.top_logprobs[i * 4], -1, 0);
  std::string cp = tmp("c.safetensors");
  write_candidate(cp, candidate_meta_for(r, {"test", "", ""}), c.view());
  Candidate rc = read_candidate(cp);
  EXPECT_NO_THROW(check_candidate_matches(r, rc));
  EXPECT_TRUE(rc.a.covered.empty());
  // A coverage mask appears once any position has one, earlier positions back-filled as covered.
  std::uint8_t cov[4] = {1, 1, 0, 1};
  c.push(r.a.top_logprobs.subspan(0, 4), NAN, 0, 0, NAN, kFlagTokenUnknown, cov);
  EXPECT_EQ(c.covered.size(), 44u);
  EXPECT_EQ(c.covered[42], 0);
  EXPECT_EQ(c.covered[3], 1);
  std::filesystem::remove(p);
  std::filesystem::remove(cp);
}

TEST(Golden, RefusesDamagedData) {
  auto g = tiny_golden(10, 4);
  std::string p = tmp("d.safetensors");
  write_golden(p, tiny_meta(10, 4), g.view());
  std::string bytes;
  {
    std::ifstream f(p, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[bytes.size() - 1] ^= 1;
  std::span<const std::uint8_t> b(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  try {
    parse_golden(b, "d.safetensors");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d.safetensors: metadata checksum: expected xxh3:"),
              std::string::npos)
        << e.what();
  }
  // Out-of-range ids are refused even without the checksum.
  g.top_ids[5] = 100;
  write_golden(p, tiny_meta(10, 4), g.view());
  try {
    read_golden(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_ids[1, 1]: expected an id in [0, 100), got 100"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(p);
}

JudgeAccumulator synthetic(int n, double kl, int flips_in_bin2, std::uint64_t seed_pos = 0) {
  JudgeAccumulator a;
  a.init(20, {"prose"}, 1);
  a.add_range(0, n);
  for (int i = 0; i < n; ++i) {
    PositionRecord r;
    r.position = i;
    r.depth = 100;
    r.cell = cell_index(0, depth_bucket(100), 0);
    r.score.kl = kl * (1 + (i % 10) / 10.0);
    r.score.kl_upper = r.score.kl;
    r.score.covered = 20;
    r.score.mass = r.score.mass_covered = 1;
    r.margin = i % 4 == 0 ? 0.2 : 3.0;
    r.flip = i % 4 == 0 && (i / 4) < flips_in_bin2;
    a.add(r);
  }
  return a;
}

// The fast path of accumulate (blocks; the plot sample prefiltered by a cut estimated from n) against the
// per-position path (the same candidate with an all-ones coverage mask; its tail mass unknown, so both
// use 1 − Σq) on enough positions for the cut to
// apply: the same counts, bins and flips, and the plot sample is exactly the kSample positions with the
// smallest hashes (selected here by a full sort).
TEST(Accumulate, FastPathEqualsPerPositionPathAndSampleIsTheSmallestHashes) {
  const int n = 120000, k = 4;
  GoldenBuffers gb;
  gb.k = k;
  CandidateBuffers fast, slow;
  fast.k = slow.k = k;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const std::uint8_t all[k] = {1, 1, 1, 1};
  for (int i = 0; i < n; ++i) {
    // Normalised log-probs over the k ids and the tail (a log-softmax of k + 1 logits), sorted, with ties.
    float z[k + 1], zq[k + 1], lp[k], lq[k];
    z[0] = 2.0f * u(rng);
    for (int j = 1; j < k; ++j) z[j] = z[j - 1] - (i % 9 == 0 ? 0.0f : 3.0f * u(rng) * u(rng));
    z[k] = z[k - 1] + 0.5f;  // the tail's total mass
    for (int j = 0; j <= k; ++j) zq[j] = z[j] + 0.3f * (u(rng) - 0.5f);
    double se = 0, seq = 0;
    for (int j = 0; j <= k; ++j)
      se += std::exp(static_cast<double>(z[j])), seq += std::exp(static_cast<double>(zq[j]));
    for (int j = 0; j < k; ++j) {
      lp[j] = static_cast<float>(z[j] - std::log(se));
      lq[j] = static_cast<float>(zq[j] - std::log(seq));
      gb.top_ids.push_back(j);
      gb.top_logprobs.push_back(lp[j]);
    }
    gb.other_logprob.push_back(static_cast<float>(z[k] - std::log(se)));
    gb.token.push_back(i % k);
    gb.token_logprob.push_back(lp[i % k]);
    gb.segment.push_back(i / 1000);
    gb.depth.push_back(i % 1000);
    gb.phase.push_back((i / 500) % 2);
    gb.flags.push_back(0);
    const int top = static_cast<int>(std::max_element(lq, lq + k) - lq);
    fast.push(std::span<const float>(lq, k), NAN, top, lq[top], lq[i % k], 0);
    slow.push(std::span<const float>(lq, k), NAN, top, lq[top], lq[i % k], 0, all);
  }
  Golden g;
  g.meta = tiny_meta(n, k);
  g.meta.segments.clear();
  for (int s = 0; s < n / 1000; ++s)
    g.meta.segments.push_back(
        Segment{"s" + std::to_string(s), s % 3 ? "prose" : "code", 1000, s * 1000, "", {}});
  g.a = gb.view();
  auto input = [&](const CandidateBuffers& b) {
    CandidateInput ci;
    ci.buffers = b;
    ci.in_memory = true;
    ci.n = n;
    return ci;
  };
  const JudgeAccumulator a = accumulate(g, input(fast), nullptr), b = accumulate(g, input(slow), nullptr);
  ASSERT_EQ(a.cells.size(), b.cells.size());
  std::uint64_t flips = 0;
  for (std::size_t c = 0; c < a.cells.size(); ++c) {
    EXPECT_EQ(a.cells[c].n, b.cells[c].n);
    EXPECT_EQ(a.cells[c].nonfinite, b.cells[c].nonfinite);
    EXPECT_EQ(a.cells[c].bin_n, b.cells[c].bin_n);
    EXPECT_EQ(a.cells[c].bin_flips, b.cells[c].bin_flips);
    EXPECT_EQ(a.cells[c].n_token, b.cells[c].n_token);
    EXPECT_EQ(a.cells[c].kl_values.size(), b.cells[c].kl_values.size());
    EXPECT_NEAR(a.cells[c].kl.value(), b.cells[c].kl.value(), 1e-6 * (1 + b.cells[c].kl.value()));
    for (auto f : a.cells[c].bin_flips) flips += f;
  }
  EXPECT_GT(flips, 1000u);  // the bins and flips were exercised
  EXPECT_EQ(a.fine_n, b.fine_n);
  EXPECT_EQ(a.fine_flips, b.fine_flips);
  for (int f = 0; f < kFineMarginBins; ++f)
    EXPECT_EQ(a.fine_margin_sum[f].value(), b.fine_margin_sum[f].value()) << f;
  EXPECT_EQ(a.segment_n, b.segment_n);
  // The depth profile's per-segment sums: the same fine buckets, counts and sums on both paths.
  for (int j = 0; j < a.n_segments; ++j) {
    ASSERT_EQ(a.segment_depths[j].size(), b.segment_depths[j].size()) << j;
    ASSERT_GT(a.segment_depths[j].size(), 100u);  // depths 0 … 999: 32 + 16 × 5 buckets
    for (std::size_t i = 0; i < a.segment_depths[j].size(); ++i) {
      const SegmentDepthSum &x = a.segment_depths[j][i], &y = b.segment_depths[j][i];
      EXPECT_EQ(x.bucket, y.bucket);
      EXPECT_EQ(x.n, y.n);
      EXPECT_NEAR(x.kl.value(), y.kl.value(), 1e-6 * (1 + y.kl.value()));
    }
  }
  // The sample: the kSample smallest hashes, whichever path collected them.
  std::vector<std::pair<std::uint64_t, std::int64_t>> h;
  for (std::int64_t i = 0; i < n; ++i) h.emplace_back(position_hash(i), i);
  std::sort(h.begin(), h.end());
  std::vector<std::int64_t> want;
  for (std::size_t i = 0; i < JudgeAccumulator::kSample; ++i) want.push_back(h[i].second);
  std::sort(want.begin(), want.end());
  for (const JudgeAccumulator* x : {&a, &b}) {
    std::vector<SamplePoint> s = x->sample;
    std::sort(s.begin(), s.end(), [](auto& p, auto& q) { return p.position < q.position; });
    ASSERT_EQ(s.size(), want.size());
    for (std::size_t i = 0; i < s.size(); ++i) ASSERT_EQ(s[i].position, want[i]) << i;
  }
  std::vector<SamplePoint> sa = a.sample, sb = b.sample;
  for (auto* v : {&sa, &sb})
    std::sort(v->begin(), v->end(), [](auto& p, auto& q) { return p.position < q.position; });
  for (std::size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].flip, sb[i].flip);
    EXPECT_EQ(sa[i].margin, sb[i].margin);
    EXPECT_EQ(sa[i].depth, sb[i].depth);
    EXPECT_NEAR(sa[i].kl, sb[i].kl, 1e-6f + 1e-4f * sb[i].kl);
  }
}

TEST(Verdict, NoiseModeRules) {
  GoldenMeta m = tiny_meta(4000, 20);
  JudgeOptions o;
  std::vector<JudgeAccumulator> floor{synthetic(4000, 1e-4, 10)};
  auto r = judge(m, "g", synthetic(4000, 1.1e-4, 12), "c", floor, {"n"}, nullptr, o);
  EXPECT_EQ(r.verdict, Verdict::pass);
  r = judge(m, "g", synthetic(4000, 3e-4, 10), "c", floor, {"n"}, nullptr, o);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.findings.front().rule, Rule::kl_limit);
  EXPECT_NEAR(r.findings.front().ratio, 3e-4 * 1.45 / (2 * 1e-4 * 1.45), 0.02);
  r = judge(m, "g", synthetic(4000, 1e-4, 100), "c", floor, {"n"}, nullptr, o);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.findings.front().rule, Rule::flip_test);
  EXPECT_EQ(r.findings.front().where(), "bin (0.1,0.25]");
  // Too few positions: at best inconclusive.
  r = judge(tiny_meta(400, 20), "g", synthetic(400, 1e-4, 1), "c", {synthetic(400, 1e-4, 1)}, {"n"}, nullptr,
            o);
  EXPECT_EQ(r.verdict, Verdict::inconclusive);
}

// The order in which failing findings decide the headline (docs/judge.md, "Which finding speaks first"):
// non-finite output, then the KL evidence (floor test, KL limit, thresholds), then the flip evidence (flip
// test, backstop); within a rule the strongest first. Ordered by ratio alone, the backstop's and the flip
// bin's "inf×" against a floor without such flips led.
TEST(Verdict, HeadlineOrder) {
  GoldenMeta m = tiny_meta(4000, 20);
  JudgeOptions o;
  std::vector<JudgeAccumulator> floor{synthetic(4000, 1e-4, 10), synthetic(4000, 1.02e-4, 11)};
  auto candidate = [](bool nonfinite) {
    JudgeAccumulator a = synthetic(4000, 3e-4, 300);
    PositionRecord r;  // a flip at margin 3, which the floor never has: the backstop
    r.position = 4000, r.depth = 100, r.cell = cell_index(0, depth_bucket(100), 0);
    r.score.kl = r.score.kl_upper = 1e-3, r.score.covered = 20, r.score.mass = r.score.mass_covered = 1;
    r.margin = 3.0, r.flip = true, r.nonfinite = nonfinite;
    a.add_range(4000, 4001);
    a.add(r);
    return a;
  };
  for (bool nonfinite : {false, true}) {
    auto r = judge(m, "g", candidate(nonfinite), "c", floor, {"n1", "n2"}, nullptr, o);
    ASSERT_EQ(r.verdict, Verdict::fail);
    std::vector<Rule> rules;
    for (const Finding& f : r.findings)
      if (f.failed) rules.push_back(f.rule);
    EXPECT_TRUE(std::is_sorted(rules.begin(), rules.end())) << r.headline;
    for (Rule want : {Rule::kl_limit, Rule::flip_test, Rule::backstop})
      EXPECT_NE(std::find(rules.begin(), rules.end(), want), rules.end()) << rule_name(want);
    EXPECT_EQ(rules.front(), nonfinite ? Rule::nonfinite : Rule::floor_test) << r.headline;
    // The backstop's and the flip bin's ratios are infinite and larger than every KL finding's: by ratio
    // alone they would have decided.
    EXPECT_TRUE(std::isinf(r.findings[rules.size() - 1].ratio));
    EXPECT_EQ(r.headline, words::headline(r));
    // Within a rule: the floor tests by p, the KL limits by ratio.
    double last_p = 0, last_ratio = INFINITY;
    for (const Finding& f : r.findings) {
      if (!f.failed) break;
      if (f.rule == Rule::floor_test) {
        EXPECT_GE(f.p_value, last_p);
        last_p = f.p_value;
      }
      if (f.rule == Rule::kl_limit) {
        EXPECT_LE(f.ratio, last_ratio);
        last_ratio = f.ratio;
      }
    }
  }
}

// Every default of the option table that can change a verdict, pinned (docs/judge.md's table says them).
TEST(Options, DefaultsAndRanges) {
  const JudgeOptions o;
  const std::map<std::string, double> want{{"kl_factor", 2},
                                           {"kl_abs_min", 1e-6},
                                           {"alpha", 0.05},
                                           {"min_positions", 1000},
                                           {"min_split_center", 100},
                                           {"min_split_tail", 1000},
                                           {"min_uncertain", 50},
                                           {"min_coverage", 0.99},
                                           {"mde_target", 1.25},
                                           {"power", 0.95},
                                           {"onset_alpha", 0.01},
                                           {"explain", 0},
                                           {"allow_floor_mismatch", 0}};
  std::map<std::string, double> got;
  for (const JudgeOptionDef& d : judge_option_table()) got[d.python] = d.get(o);
  EXPECT_EQ(got, want);
  EXPECT_NO_THROW(check_judge_options(o));
  auto refused = [](const char* name, double v) {
    JudgeOptions x;
    try {
      find_judge_option(name)->set(x, v);
      check_judge_options(x);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused("alpha", 0).find("--alpha (alpha): expected a value in (0, 1), got 0"),
            std::string::npos);
  EXPECT_NE(refused("alpha", 1).find("--alpha"), std::string::npos);
  EXPECT_NE(refused("kl_factor", 0.99).find("≥ 1"), std::string::npos);
  EXPECT_NE(refused("mde_target", 1).find("> 1"), std::string::npos);
  EXPECT_EQ(refused("mde_target", INFINITY), "");  // no power requirement
  EXPECT_NE(refused("min_coverage", 1.01).find("[0, 1]"), std::string::npos);
  EXPECT_NE(refused("min_positions", 2.5).find("whole number"), std::string::npos);
  EXPECT_NE(refused("explain", 2).find("true or false"), std::string::npos);
  EXPECT_NE(refused("power", NAN).find("--power"), std::string::npos);
  EXPECT_NE(refused("onset_alpha", 0).find("--onset-alpha (onset_alpha): expected a value in (0, 1)"),
            std::string::npos);
}

// Floors that match: dtypes by their canonical names whether the variant parsed or was read term by term
// (bf16 and bfloat16 are one KV dtype); a real difference is named, with advice that fits it.
TEST(Provenance, FloorMismatchComparesDtypesNotSpellings) {
  auto m = [](const std::string& a, const std::string& b) {
    return floor_provenance_mismatch({"kerncheck", a, ""}, {"kerncheck", b, ""});
  };
  EXPECT_FALSE(m("bf16+kv=bf16+newer_term=1", "bf16+kv=bf16+order=1"));
  EXPECT_FALSE(m("bf16+kv=bf16+order=2", "bf16+kv=bfloat16+newer_term=1"));
  EXPECT_FALSE(m("bf16+logits=bf16+newer_term=1", "bf16+logits=bf16"));
  EXPECT_FALSE(m("bf16+p=fp8", "bf16+order=3"));  // the change under test is not compared
  const FloorMismatch kv = m("bf16+kv=fp8", "bf16+order=1");
  EXPECT_EQ(kv.what, FloorMismatch::What::kv);
  EXPECT_EQ(kv.cand, "fp8");
  const std::string advice = words::floor_mismatch_advice(kv);
  EXPECT_NE(advice.find("change under test"), std::string::npos) << advice;
  EXPECT_NE(advice.find("--allow-floor-mismatch"), std::string::npos) << advice;
  EXPECT_EQ(m("bf16", "f32").what, FloorMismatch::What::base);
  EXPECT_EQ(m("bf16+logits=bf16", "bf16").what, FloorMismatch::What::logits);
  EXPECT_EQ(floor_provenance_mismatch({"vllm", "bf16", ""}, {"kerncheck", "bf16", ""}).what,
            FloorMismatch::What::engine);
  EXPECT_FALSE(floor_provenance_mismatch({"logits", "", ""}, {"kerncheck", "f32", ""}));
}

// Calibration does not rest a limit on a tail statistic (p99, p99.9, max) of a split too small for it:
// one or two positions decide those (a limit on depth.16.kl_max rests on one position of 128).
TEST(Calibrate, TailStatisticsOfSmallSplitsAreLeftOut) {
  RunSummary r;
  r.overall.id = SplitId::overall(), r.overall.n = 5000;
  SplitSummary small, big;
  small.id = SplitId::depth(depth_bucket(16)), small.n = 128;
  big.id = SplitId::depth(depth_bucket(2048)), big.n = 4000;
  for (SplitSummary* s : {&r.overall, &small, &big})
    s->kl.mean = s->kl.median = s->kl.p90 = s->kl.p99 = s->kl.p999 = s->kl.max = 1e-3, s->flip_rate = 0.01;
  r.by_depth = {small, big};
  const JudgeOptions o;
  const auto all = stat_table(r, o), cal = calibration_table(r, o);
  for (const char* k : {"depth.16.kl_max", "depth.16.kl_p999", "depth.16.kl_p99"}) {
    EXPECT_EQ(all.count(k), 1u) << k;  // reported
    EXPECT_EQ(cal.count(k), 0u) << k;  // not calibrated on
  }
  for (const char* k :
       {"depth.16.kl_mean", "depth.16.kl_median", "depth.16.kl_p90", "depth.2048.kl_max", "kl_max"})
    EXPECT_EQ(cal.count(k), 1u) << k;
}

// The paired floor test's false-alarm rate under the null: every run (4 noise runs and the candidate) is
// drawn from one model, so they are exchangeable by construction. Per position, KL = base (shared by all
// runs: paired KL is positively correlated) × a per-run shift (between-implementation spread, sd 3 %) × a
// per-run per-segment factor (positions of a segment share a KV cache) × a χ²₄/4 draw. The verdict's
// family-wise false-alarm rate must be ≤ α within its sampling error; a 1.5 × regression is found.
struct NullModel {
  static constexpr int kSeg = 40, kLen = 60;
  static inline double kShift = std::getenv("KC_SHIFT") ? std::atof(std::getenv("KC_SHIFT")) : 0.03;
  std::vector<double> base;
  std::vector<std::string> domains{"code", "prose"};
  explicit NullModel(std::mt19937_64& rng) {
    std::lognormal_distribution<double> ln(std::log(1e-3), 1.0);
    for (int i = 0; i < kSeg * kLen; ++i) base.push_back(ln(rng));
  }
  JudgeAccumulator run(std::mt19937_64& rng, double scale) const {
    std::normal_distribution<double> z(0, 1);
    std::chi_squared_distribution<double> chi(4);
    JudgeAccumulator a;
    a.init(20, domains, kSeg);
    a.add_range(0, kSeg * kLen);
    const double shift = std::exp(kShift * z(rng));
    for (int j = 0; j < kSeg; ++j) {
      const double seg = std::exp(0.1 * z(rng));
      for (int t = 0; t < kLen; ++t) {
        PositionRecord r;
        r.position = j * kLen + t;
        r.segment = j;
        r.domain = static_cast<std::uint8_t>(j % 2);
        r.depth = t + 1;
        r.phase = t >= kLen / 2;
        r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
        r.score.kl = scale * base[r.position] * shift * seg * chi(rng) / 4;
        r.score.kl_upper = r.score.kl;
        r.score.covered = 20;
        r.score.mass = r.score.mass_covered = 1;
        r.margin = 3.0;
        a.add(r);
      }
    }
    return a;
  }
};

TEST(Verdict, FloorTestFalseAlarmRateUnderTheNull) {
  std::mt19937_64 rng(2026);
  GoldenMeta m = tiny_meta(NullModel::kSeg * NullModel::kLen, 20);
  m.segments.clear();
  for (int j = 0; j < NullModel::kSeg; ++j)
    m.segments.push_back(Segment{"s" + std::to_string(j), j % 2 ? "prose" : "code", 1, j * NullModel::kLen, "", {}});
  JudgeOptions o;
  o.min_uncertain = 0;     // no flips in this model: the floor tests alone decide
  o.mde_target = INFINITY;  // the power rule is tested elsewhere
  const int trials = 300;
  int false_alarms = 0, detected = 0, tests = 0;
  for (int trial = 0; trial < trials; ++trial) {
    NullModel model(rng);
    std::vector<JudgeAccumulator> floor;
    for (int i = 0; i < 4; ++i) floor.push_back(model.run(rng, 1.0));
    std::vector<std::string> names{"n0", "n1", "n2", "n3"};
    auto r = judge(m, "g", model.run(rng, 1.0), "c", floor, names, nullptr, o);
    ASSERT_NE(r.verdict, Verdict::inconclusive) << r.inconclusive_reasons.front();
    tests = static_cast<int>(r.floor_tests.size());
    false_alarms += r.verdict == Verdict::fail;
    if (trial < 60) detected += judge(m, "g", model.run(rng, 1.5), "c", floor, names, nullptr, o).verdict == Verdict::fail;
  }
  const double rate = static_cast<double>(false_alarms) / trials;
  RecordProperty("false_alarm_rate", std::to_string(rate));
  RecordProperty("detected_1_5x_of_60", std::to_string(detected));
  EXPECT_GE(tests, 8);  // overall, 2 domains, 2 phases, depth buckets
  EXPECT_LE(rate, o.alpha + 3 * std::sqrt(o.alpha * (1 - o.alpha) / trials)) << false_alarms << " of " << trials;
  EXPECT_GE(detected, 54) << "a 1.5 × regression found in only " << detected << " of 60";
}

// ---- the depth profile and its onset (docs/judge.md, "Depth profile and onset") --------------------------

// The fine buckets: every depth below 32 its own, then 16 per octave (the depth's five leading bits).
TEST(DepthProfile, FineBuckets) {
  EXPECT_EQ(kProfilePerOctave, 16);
  const std::pair<std::int64_t, int> pinned[] = {{-3, 0},  {0, 0},   {1, 1},   {31, 31}, {32, 32}, {33, 32},
                                                 {34, 33}, {63, 47}, {64, 48}, {67, 48}, {68, 49}, {2047, 127},
                                                 {2048, 128}, {2176, 129}, {4095, 143}, {4096, 144}};
  for (auto [d, b] : pinned) EXPECT_EQ(profile_bucket(d), b) << d;
  int prev = 0;
  for (std::int64_t d = 1; d < 300000; ++d) {
    const int b = profile_bucket(d);
    ASSERT_TRUE(b == prev || b == prev + 1) << d;  // no bucket skipped, the index grows with the depth
    ASSERT_LE(profile_bucket_lower(b), d);
    ASSERT_GT(profile_bucket_lower(b + 1), d);
    if (d >= 32) {  // ≤ 6.25 %
      ASSERT_LE(profile_bucket_lower(b + 1) - profile_bucket_lower(b), d / 16 + 1) << d;
    }
    prev = b;
  }
  EXPECT_EQ(profile_bucket_lower(profile_bucket(std::numeric_limits<std::int32_t>::max()) + 1), std::int64_t{1} << 31);
}

// Runs of kSeg segments of depth kLen: per-position KL lognormal × a run-level shift (the
// between-implementation spread) × a segment factor × chi²/4 noise; `scale` multiplies the KL of the positions
// deeper than `from` (a regression that acts only beyond a depth).
struct DepthModel {
  int kSeg = 12, kLen = 1024;
  std::vector<double> base;
  explicit DepthModel(std::mt19937_64& rng, int segments = 12, int length = 1024) : kSeg(segments), kLen(length) {
    std::lognormal_distribution<double> ln(std::log(1e-3), 1.0);
    for (int i = 0; i < kSeg * kLen; ++i) base.push_back(ln(rng));
  }
  JudgeAccumulator run(std::mt19937_64& rng, double scale = 1, int from = 1 << 30) const {
    std::normal_distribution<double> z(0, 1);
    std::chi_squared_distribution<double> chi(4);
    JudgeAccumulator a;
    a.init(20, {"code", "prose"}, kSeg);
    a.add_range(0, kSeg * kLen);
    const double shift = std::exp(0.03 * z(rng));
    for (int j = 0; j < kSeg; ++j) {
      const double seg = std::exp(0.1 * z(rng));
      for (int t = 0; t < kLen; ++t) {
        PositionRecord r;
        r.position = j * kLen + t;
        r.segment = j;
        r.domain = static_cast<std::uint8_t>(j % 2);
        r.depth = t + 1;
        r.phase = t >= kLen - 16;
        r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
        r.score.kl = (r.depth > from ? scale : 1.0) * base[r.position] * shift * seg * chi(rng) / 4;
        r.score.kl_upper = r.score.kl;
        r.score.covered = 20;
        r.score.mass = r.score.mass_covered = 1;
        r.margin = 3.0;
        a.add(r);
      }
    }
    return a;
  }
  GoldenMeta meta() const {
    GoldenMeta m = tiny_meta(kSeg * kLen, 20);
    m.segments.clear();
    for (int j = 0; j < kSeg; ++j)
      m.segments.push_back(Segment{"s" + std::to_string(j), j % 2 ? "prose" : "code", 1, j * kLen, "", {}});
    return m;
  }
};

JudgeOptions depth_options() {
  JudgeOptions o;
  o.min_uncertain = 0, o.mde_target = INFINITY;  // no flips in this model; power is tested elsewhere
  return o;
}

// The profile's buckets: fine buckets merged from the shallow end until each holds min_split_center
// positions, the remainder joining the deepest; the floor's columns and the paired test per bucket.
TEST(DepthProfile, BucketsHoldMinSplitCenterPositions) {
  std::mt19937_64 rng(5);
  const DepthModel model(rng);
  std::vector<JudgeAccumulator> floor;
  for (int i = 0; i < 4; ++i) floor.push_back(model.run(rng));
  JudgeOptions o = depth_options();
  for (std::int64_t min : {100, 250, 1000}) {
    o.min_split_center = min;
    const JudgeReport r =
        judge(model.meta(), "g", model.run(rng), "c", floor, {"n0", "n1", "n2", "n3"}, nullptr, o);
    const auto& B = r.depth_profile.buckets;
    ASSERT_FALSE(B.empty());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < B.size(); ++i) {
      EXPECT_GE(B[i].n, min) << i;
      if (i + 1 < B.size()) {
        EXPECT_EQ(B[i].hi, B[i + 1].lo);
        // Not more than needed: without its last fine bucket a bucket would hold fewer than min (but the last).
        EXPECT_LT(B[i].n - model.kSeg * (B[i].hi - profile_bucket_lower(profile_bucket(B[i].hi - 1))), min) << i;
      }
      EXPECT_EQ(B[i].segments, model.kSeg);
      EXPECT_TRUE(std::isfinite(B[i].t));
      EXPECT_EQ(B[i].df, 3);
      EXPECT_LE(B[i].floor_lo, B[i].floor_mean);
      EXPECT_GE(B[i].floor_hi, B[i].floor_mean);
      total += B[i].n;
    }
    EXPECT_EQ(B.front().lo, 1);
    EXPECT_EQ(B.back().hi, model.kLen + 1);  // the deepest depth judged, not its fine bucket's edge (1088)
    EXPECT_EQ(total, model.kSeg * model.kLen);
    EXPECT_TRUE(r.depth_profile.onset.tested);
  }
  // One noise run: the floor's mean, no test; none: the candidate alone.
  const JudgeReport one = judge(model.meta(), "g", model.run(rng), "c", {floor[0]}, {"n0"}, nullptr, o);
  EXPECT_FALSE(one.depth_profile.onset.tested);
  EXPECT_TRUE(std::isfinite(one.depth_profile.buckets[0].floor_mean));
  EXPECT_TRUE(std::isnan(one.depth_profile.buckets[0].t));
  EXPECT_NE(words::onset(one.depth_profile, o.onset_alpha).find("two or more noise runs"), std::string::npos);
  const JudgeReport none = judge(model.meta(), "g", model.run(rng), "c", {}, {}, nullptr, o);
  EXPECT_FALSE(none.depth_profile.buckets.empty());
  EXPECT_TRUE(std::isnan(none.depth_profile.buckets[0].floor_mean));
}

// The onset rule's false-alarm rate on runs drawn from the null (the candidate exchangeable with the floor
// runs, a 3 % run-level shift included) is at most onset_alpha: the deepest bucket's one-sided test decides
// whether any onset is reported.
TEST(DepthProfile, OnsetFalseAlarmRateUnderTheNull) {
  std::mt19937_64 rng(2027);
  for (double alpha : {0.01, 0.05}) {
    JudgeOptions o = depth_options();
    o.onset_alpha = alpha;
    const int trials = 300;
    int alarms = 0;
    for (int trial = 0; trial < trials; ++trial) {
      const DepthModel model(rng, 8, 512);
      std::vector<JudgeAccumulator> floor;
      for (int i = 0; i < 6; ++i) floor.push_back(model.run(rng));
      const JudgeReport r = judge(model.meta(), "g", model.run(rng), "c", floor,
                                  {"n0", "n1", "n2", "n3", "n4", "n5"}, nullptr, o);
      ASSERT_TRUE(r.depth_profile.onset.tested);
      alarms += r.depth_profile.onset.found;
    }
    const double rate = static_cast<double>(alarms) / trials;
    RecordProperty("onset_false_alarm_rate_at_" + std::to_string(alpha), std::to_string(rate));
    EXPECT_LE(rate, alpha + 3 * std::sqrt(alpha * (1 - alpha) / trials)) << alarms << " of " << trials;
  }
}

// A regression that acts only beyond depth D (KL × 1.6 there) is found within ±10 % of D, at three D, in at
// least 95 % of the trials; its interval holds the found onset.
TEST(DepthProfile, OnsetFoundNearTheDepthWhereTheRegressionStarts) {
  std::mt19937_64 rng(2028);
  const JudgeOptions o = depth_options();
  for (int D : {200, 500, 800}) {
    const int trials = 40;
    int near = 0;
    for (int trial = 0; trial < trials; ++trial) {
      const DepthModel model(rng);
      std::vector<JudgeAccumulator> floor;
      for (int i = 0; i < 6; ++i) floor.push_back(model.run(rng));
      const JudgeReport r = judge(model.meta(), "g", model.run(rng, 1.6, D), "c", floor,
                                  {"n0", "n1", "n2", "n3", "n4", "n5"}, nullptr, o);
      const DepthOnset& on = r.depth_profile.onset;
      if (!on.found) continue;
      near += std::abs(static_cast<double>(on.depth - D)) <= 0.1 * D;
      EXPECT_LE(on.lo, on.hi);
      EXPECT_GT(on.found_share, 0);
      EXPECT_EQ(on.resamples, 200);
    }
    RecordProperty("onset_within_10pct_of_" + std::to_string(D), std::to_string(near));
    EXPECT_GE(near, 38) << "D " << D << ": found within ±10 % in " << near << " of " << trials;
  }
}

// Shards keep the depth sums; a shard written before they were kept has no profile, nor has a merge with it.
TEST(DepthProfile, ShardsKeepTheSumsAndOldShardsHaveNone) {
  std::mt19937_64 rng(9);
  const DepthModel model(rng);
  const JudgeAccumulator a = model.run(rng);
  nlohmann::json j = a.to_json();
  JudgeAccumulator back = JudgeAccumulator::from_json(j, "s.kcpart");
  ASSERT_TRUE(back.has_segment_depths);
  for (int s = 0; s < a.n_segments; ++s) {
    ASSERT_EQ(back.segment_depths[s].size(), a.segment_depths[s].size());
    for (std::size_t i = 0; i < a.segment_depths[s].size(); ++i) {
      EXPECT_EQ(back.segment_depths[s][i].bucket, a.segment_depths[s][i].bucket);
      EXPECT_EQ(back.segment_depths[s][i].n, a.segment_depths[s][i].n);
      EXPECT_EQ(back.segment_depths[s][i].kl.value(), a.segment_depths[s][i].kl.value());
    }
  }
  j["segment_depths"][0].push_back({100000, 1.0, 0.0, 1});
  EXPECT_THROW(JudgeAccumulator::from_json(j, "s.kcpart"), Error);
  j.erase("segment_depths");
  j["ranges"] = {{model.kSeg * model.kLen, 2 * model.kSeg * model.kLen}};  // the next shard
  JudgeAccumulator old = JudgeAccumulator::from_json(j, "s.kcpart");
  EXPECT_FALSE(old.has_segment_depths);
  EXPECT_FALSE(old.to_json().contains("segment_depths"));
  JudgeAccumulator merged = a;
  merged.merge(old);
  EXPECT_FALSE(merged.has_segment_depths);
  const JudgeReport r = judge(model.meta(), "g", old, "c", {}, {}, nullptr, depth_options());
  EXPECT_FALSE(r.depth_profile.kept);
  EXPECT_TRUE(report_json(r)["depth_profile"].is_null());
}

TEST(Verdict, ThresholdsMode) {
  GoldenMeta m = tiny_meta(4000, 20);
  Thresholds t;
  t.limits["kl_mean"] = 2e-4;
  JudgeOptions o;
  EXPECT_EQ(judge(m, "g", synthetic(4000, 1e-4, 10), "c", {}, {}, &t, o).verdict, Verdict::pass);
  auto r = judge(m, "g", synthetic(4000, 2e-4, 10), "c", {}, {}, &t, o);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_STREQ(r.findings.front().statistic(), "kl_mean");
}

TEST(Calibrate, GreedyCoverAndUnseparable) {
  using T = std::map<std::string, double>;
  std::vector<std::pair<std::string, T>> good{{"g1", {{"kl_mean", 1.0}, {"flip_rate", 0.1}}},
                                              {"g2", {{"kl_mean", 1.2}, {"flip_rate", 0.12}}}};
  std::vector<std::pair<std::string, T>> bad{{"b1", {{"kl_mean", 4.8}, {"flip_rate", 0.1}}},
                                             {"b2", {{"kl_mean", 1.1}, {"flip_rate", 0.3}}}};
  CalibrationResult r = calibrate(good, bad);
  EXPECT_TRUE(r.unseparated.empty());
  EXPECT_NEAR(r.thresholds.limits.at("kl_mean"), std::sqrt(1.2 * 4.8), 1e-12);
  EXPECT_NEAR(r.thresholds.limits.at("flip_rate"), std::sqrt(0.12 * 0.3), 1e-12);
  // Leave-one-out: each run judged by the limits fitted without it. Without g2 the kl_mean limit is fitted
  // to g1 and b2 (sqrt(1.0 · 1.1)) and g2 (1.2) fails; each bad run is caught by a statistic that only it
  // separates, so left out it passes. Only g1 is judged right: this separation does not generalise.
  ASSERT_EQ(r.loo.size(), 4u);
  std::map<std::string, bool> ok;
  for (auto& l : r.loo) ok[l.run] = l.ok;
  EXPECT_EQ(ok, (std::map<std::string, bool>{{"g1", true}, {"g2", false}, {"b1", false}, {"b2", false}}));
  EXPECT_EQ(r.rests_on_one.size(), 2u);
  bad.push_back({"b3", {{"kl_mean", 1.0}, {"flip_rate", 0.05}}});
  EXPECT_EQ(calibrate(good, bad).unseparated, std::vector<std::string>{"b3"});
  // KL and flip statistics win over a perplexity difference that separates more: nll_diff_mean only
  // where nothing else catches the run; a limit only one bad run exceeds is flagged.
  std::vector<std::pair<std::string, T>> g2{{"g1", {{"kl_mean", 1.0}, {"nll_diff_mean", 0.01}}},
                                            {"g2", {{"kl_mean", 1.1}, {"nll_diff_mean", 0.012}}}};
  std::vector<std::pair<std::string, T>> b2{{"b1", {{"kl_mean", 1.5}, {"nll_diff_mean", 0.5}}},
                                            {"b2", {{"kl_mean", 1.0}, {"nll_diff_mean", 0.4}}}};
  CalibrationResult c = calibrate(g2, b2);
  EXPECT_EQ(c.chosen.front().key, "kl_mean");
  EXPECT_EQ(c.chosen.back().key, "nll_diff_mean");  // only it catches b2
  EXPECT_EQ(c.rests_on_one, (std::vector<std::string>{"kl_mean"}));
  EXPECT_THROW(require_runs(2, 1), Error);
  EXPECT_NO_THROW(require_runs(2, 2));
}

}  // namespace
}  // namespace kc
