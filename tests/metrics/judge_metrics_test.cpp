// Scalar checks of the judge's metrics: closed-form values, the fast exp against std::exp, and the
// accumulators' merge against a single pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "metrics/accumulator.h"
#include "metrics/distribution.h"
#include "numeric/fastmath.h"
#include "metrics/stats.h"

namespace kc {
namespace {

TEST(FastExp, MatchesStdExp) {
  for (double x = -700; x <= 0; x += 0.0137) {
    double e = std::exp(x);
    EXPECT_NEAR(fastmath::exp_f64(x), e, 4e-16 * e) << x;
    if (x > -87) {
      EXPECT_NEAR(fastmath::exp_f32(static_cast<float>(x)), std::exp(static_cast<float>(x)),
                  3e-7 * std::exp(static_cast<float>(x)))
          << x;
    }
  }
  EXPECT_EQ(fastmath::exp_f32(-INFINITY), 0.0f);
  EXPECT_EQ(fastmath::exp_f64(-INFINITY), 0.0);
  EXPECT_TRUE(std::isnan(fastmath::exp_f32(NAN)));
  EXPECT_EQ(fastmath::exp_f64(0.0), 1.0);
}

TEST(Stats, NormalQuantileAndCdf) {
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-13);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306167813, 1e-12);
  EXPECT_NEAR(normal_cdf(-1.0), 0.15865525393145707, 1e-15);
}

TEST(Stats, WilsonInterval) {
  auto [lo, hi] = wilson_interval(5, 10);  // textbook: [0.2366, 0.7634]
  EXPECT_NEAR(lo, 0.23659309, 1e-7);
  EXPECT_NEAR(hi, 0.76340691, 1e-7);
  auto [lo0, hi0] = wilson_interval(0, 20);
  EXPECT_EQ(lo0, 0.0);
  EXPECT_NEAR(hi0, 0.16112515, 1e-7);
}

TEST(Stats, FisherExactOneSided) {
  // P(X ≥ 3), X ~ hypergeom(N = 20, K = 3, n = 10) = C(17,7) / C(20,10) = 19448 / 184756.
  EXPECT_NEAR(fisher_greater(3, 10, 0, 10), 19448.0 / 184756.0, 1e-13);
  EXPECT_EQ(fisher_greater(0, 10, 5, 10), 1.0);
  // The lady tasting tea: 4 of 4 → 1/70.
  EXPECT_NEAR(fisher_greater(4, 4, 0, 4), 1.0 / 70.0, 1e-14);
}

TEST(Stats, Holm) {
  std::vector<double> p{0.01, 0.04, 0.03, 0.005};
  auto r = holm_reject(p, 0.05);  // sorted 0.005 ≤ .0125 ✓, 0.01 ≤ .01667 ✓, 0.03 > .025 ✗
  EXPECT_EQ(r, (std::vector<bool>{true, false, false, true}));
}

TEST(Stats, SortedQuantileIsNumpyLinear) {
  std::vector<float> v{1, 2, 3, 4, 10};
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(sorted_quantile(v, 0.9), 7.6);  // numpy.percentile([1,2,3,4,10], 90)
}

TEST(Distribution, SeedCatDogFoxExample) {
  // Seed 000: cat 55 %, dog 30 %, fox 8 % → cat 52 %, dog 16 %, fox 24 %: KL ≈ 0.12.
  float lp[3] = {std::log(0.55f), std::log(0.30f), std::log(0.08f)};
  float lq[3] = {std::log(0.52f), std::log(0.16f), std::log(0.24f)};
  double want = 0.55 * std::log(0.55 / 0.52) + 0.30 * std::log(0.30 / 0.16) + 0.08 * std::log(0.08 / 0.24) +
                0.07 * std::log(0.07 / 0.08);
  PositionScore s = score_topk(lp, std::log(0.07f), lq, std::log(0.08f), nullptr, 3);
  EXPECT_NEAR(s.kl, want, 1e-6);
  EXPECT_NEAR(s.kl, 0.122, 1e-3);
  // Unknown candidate tail: 1 − Σq = 0.08, the same KL.
  PositionScore u = score_topk(lp, std::log(0.07f), lq, NAN, nullptr, 3);
  EXPECT_NEAR(u.kl, want, 1e-6);
  EXPECT_FALSE(u.q_other_clamped);
}

TEST(Distribution, QOtherClampedAtTheFloor) {
  float lp[2] = {std::log(0.6f), std::log(0.3f)};
  float lq[2] = {std::log(0.7f), std::log(0.30001f)};  // Σq > 1
  PositionScore s = score_topk(lp, std::log(0.1f), lq, NAN, nullptr, 2);
  EXPECT_TRUE(s.q_other_clamped);
  double want = 0.6 * (std::log(0.6f) - std::log(0.7f)) + 0.3 * (std::log(0.3f) - std::log(0.30001f)) +
                static_cast<double>(0.1f) * (std::log(0.1f) - std::log(q_other_floor(2)));
  EXPECT_NEAR(s.kl, want, 1e-6);
}

TEST(Distribution, ZeroCandidateProbabilityIsInfinite) {
  float lp[2] = {std::log(0.6f), std::log(0.3f)};
  float lq[2] = {std::log(0.9f), -INFINITY};
  EXPECT_TRUE(std::isinf(score_topk(lp, std::log(0.1f), lq, std::log(0.1f), nullptr, 2).kl));
}

TEST(Distribution, PartialCoverageLowerBound) {
  float lp[3] = {std::log(0.5f), std::log(0.3f), std::log(0.1f)};
  float lq[3] = {std::log(0.45f), std::log(0.35f), std::log(0.05f)};
  std::uint8_t cov[3] = {1, 1, 0};
  PositionScore s = score_topk(lp, std::log(0.1f), lq, NAN, cov, 3);
  double po = 0.1 + 0.1, qo = 1 - 0.45 - 0.35;
  double want = 0.5 * std::log(0.5 / 0.45) + 0.3 * std::log(0.3 / 0.35) + po * std::log(po / qo);
  EXPECT_NEAR(s.kl, want, 1e-6);
  EXPECT_TRUE(std::isinf(s.kl_upper));
  EXPECT_EQ(s.covered, 2);
  EXPECT_NEAR(s.mass_covered / s.mass, 0.8 / 0.9, 1e-6);
  // The lower bound never exceeds the KL of any completion (here the true one).
  PositionScore full = score_topk(lp, std::log(0.1f), lq, std::log(0.15f), nullptr, 3);
  EXPECT_LE(s.kl, full.kl + 1e-9);
}

TEST(Distribution, FullVocabKl) {
  std::vector<float> a{1, 2, 3, -INFINITY}, b{1.5f, 2, 2.5f, -1};
  double la = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double lb = std::log(std::exp(1.5) + std::exp(2.0) + std::exp(2.5) + std::exp(-1.0));
  double want = 0;
  for (int i = 0; i < 3; ++i) want += std::exp(a[i] - la) * ((a[i] - la) - (b[i] - lb));
  EXPECT_NEAR(full_vocab_kl(a.data(), b.data(), 4), want, 1e-12);
  b[1] = NAN;
  EXPECT_TRUE(std::isnan(full_vocab_kl(a.data(), b.data(), 4)));
}

TEST(Distribution, MarginBins) {
  EXPECT_EQ(margin_bin(0.0), 0);
  EXPECT_EQ(margin_bin(1e-9), 1);
  EXPECT_EQ(margin_bin(0.1), 1);
  EXPECT_EQ(margin_bin(0.1000001), 2);
  EXPECT_EQ(margin_bin(1.0), 4);
  EXPECT_EQ(margin_bin(1.0001), 5);
  EXPECT_EQ(margin_bin(5.0), 6);
  EXPECT_EQ(margin_bin(7.0), 7);
  EXPECT_EQ(depth_bucket(0), 0);
  EXPECT_EQ(depth_bucket(2048), 12);
  EXPECT_EQ(depth_bucket_lower(depth_bucket(4095)), 2048);
}

PositionRecord random_record(std::mt19937_64& rng, std::int64_t pos) {
  std::uniform_real_distribution<double> u(0, 1);
  PositionRecord r;
  r.position = pos;
  r.domain = rng() % 2;
  r.phase = rng() % 2;
  r.depth = static_cast<std::int32_t>(rng() % 100000);
  r.segment = static_cast<int>(rng() % 5);
  r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
  r.score.kl = std::pow(u(rng), 3) * 1e-2;
  r.score.kl_upper = r.score.kl;
  r.score.sigma2 = u(rng) * 1e-3;
  r.score.covered = 20;
  r.score.mass = r.score.mass_covered = 0.9;
  r.margin = u(rng) < 0.05 ? 0.0 : -std::log(u(rng)) * 2;
  r.flip = u(rng) < 0.1 / (1 + 10 * r.margin);
  r.delta_p = u(rng) - 0.5;
  r.nll_ref = u(rng) * 3;
  r.nll_cand = r.nll_ref + u(rng) * 0.01;
  r.nonfinite = u(rng) < 0.001;
  return r;
}

TEST(Accumulator, MergeOfShardsEqualsOnePass) {
  std::mt19937_64 rng(42);
  const std::int64_t n = 50000;
  std::vector<PositionRecord> recs;
  for (std::int64_t i = 0; i < n; ++i) recs.push_back(random_record(rng, i));
  auto fill = [&](std::int64_t b, std::int64_t e) {
    JudgeAccumulator a;
    a.init(20, {"code", "prose"}, 5);
    a.add_range(b, e);
    for (std::int64_t i = b; i < e; ++i) {
      a.add(recs[i]);
      WorstPosition w;
      w.position = i;
      w.kl = recs[i].score.kl;
      if (a.wants_worst(w.kl, i)) a.offer_worst(w);
    }
    return a;
  };
  JudgeAccumulator one = fill(0, n);
  // Shards in a scrambled order, one of them through the JSON + value-array round trip.
  JudgeAccumulator s1 = fill(30000, n), s2 = fill(0, 12345), s3 = fill(12345, 30000);
  JudgeAccumulator s2b = JudgeAccumulator::from_json(nlohmann::json::parse(s2.to_json().dump()), "mem");
  s2b.set_values(0, s2.all_values(0), "mem");
  s2b.set_values(1, s2.all_values(1), "mem");
  JudgeAccumulator m;
  m.merge(s1);
  m.merge(s2b);
  m.merge(s3);
  EXPECT_EQ(m.positions_judged(), n);
  ASSERT_EQ(m.ranges.size(), 1u);
  for (std::size_t c = 0; c < one.cells.size(); ++c) {
    const CellStats &a = one.cells[c], &b = m.cells[c];
    EXPECT_EQ(a.n, b.n);
    EXPECT_EQ(a.nonfinite, b.nonfinite);
    EXPECT_EQ(a.bin_flips, b.bin_flips);
    EXPECT_EQ(a.bin_n, b.bin_n);
    EXPECT_EQ(a.kl.value(), b.kl.value()) << c;  // double-double sums: the same double
    EXPECT_EQ(a.nll_diff.value(), b.nll_diff.value());
    EXPECT_EQ(a.kl_values.size(), b.kl_values.size());
  }
  EXPECT_EQ(one.fine_n, m.fine_n);
  ASSERT_EQ(one.worst.size(), m.worst.size());
  for (std::size_t i = 0; i < one.worst.size(); ++i) EXPECT_EQ(one.worst[i].position, m.worst[i].position);
  auto sorted = [](std::vector<SamplePoint> v) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.position < b.position; });
    std::vector<std::int64_t> p;
    for (auto& x : v) p.push_back(x.position);
    return p;
  };
  EXPECT_EQ(one.sample.size(), JudgeAccumulator::kSample);
  EXPECT_EQ(sorted(one.sample), sorted(m.sample));
  // Overlapping shards are refused.
  JudgeAccumulator bad = fill(100, 200);
  EXPECT_THROW(m.merge(bad), Error);
}

// The judge's fast path: 16 rows at once (one per SIMD lane) against one row at a time and against a
// long-double evaluation of the formula, on rows with padding (rows < 16), k not a multiple of 8, an
// unknown candidate tail, −inf and NaN candidate log-probs.
TEST(Distribution, RowsMatchOneRowAndTheFormula) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0, 1);
  for (int k : {1, 2, 5, 20, 37}) {
    for (int rows : {16, 11, 1}) {
      std::vector<float> lp(rows * k), lq(rows * k), lpo(rows), lqo(rows);
      for (int r = 0; r < rows; ++r) {
        std::vector<float> z(k + 1), zq(k + 1);
        const float t = std::exp(nd(rng));
        for (auto& x : z) x = nd(rng) * t;
        std::sort(z.begin(), z.begin() + k, std::greater<float>());
        for (int j = 0; j <= k; ++j) zq[j] = z[j] + 0.05f * nd(rng);
        auto lse = [](const std::vector<float>& v) {
          double m = *std::max_element(v.begin(), v.end()), s = 0;
          for (float x : v) s += std::exp(x - m);
          return m + std::log(s);
        };
        const double a = lse(z), b = lse(zq);
        for (int j = 0; j < k; ++j) {
          lp[r * k + j] = static_cast<float>(z[j] - a);
          lq[r * k + j] = static_cast<float>(zq[j] - b);
        }
        lpo[r] = static_cast<float>(z[k] - a);
        lqo[r] = r % 3 == 1 ? NAN : static_cast<float>(zq[k] - b);
      }
      if (rows > 5) lq[4 * k] = -INFINITY;  // q = 0 where p > 0: KL = +inf
      if (rows > 6) lq[6 * k + k / 2] = NAN;
      RowScores rs;
      score_topk_rows(lp.data(), lpo.data(), lq.data(), lqo.data(), k, rows, rs);
      for (int r = 0; r < rows; ++r) {
        PositionScore one = score_topk(&lp[r * k], lpo[r], &lq[r * k], lqo[r], nullptr, k);
        EXPECT_EQ(std::isnan(one.kl), std::isnan(rs.kl[r]));
        if (!std::isnan(one.kl)) {
          EXPECT_EQ(one.kl, rs.kl[r]) << k << " " << rows << " " << r;
        }
        EXPECT_EQ(one.mass, rs.mass[r]);
        EXPECT_EQ(std::isnan(one.sigma2), std::isnan(rs.sigma2[r]));
        if (!std::isnan(one.sigma2)) {
          EXPECT_EQ(one.sigma2, rs.sigma2[r]);
        }
        EXPECT_EQ(one.q_other_clamped, rs.q_other_clamped[r]);
        // The formula in long double.
        long double kl = 0, scale = 0, sq = 0, sd = 0, mass = 0;
        bool bad = false;
        for (int j = 0; j < k; ++j) {
          long double p = std::exp(static_cast<long double>(lp[r * k + j]));
          long double d = static_cast<long double>(lq[r * k + j]) - lp[r * k + j];
          kl -= p * d;
          scale += std::fabs(p * d);
          sq += std::exp(static_cast<long double>(lq[r * k + j]));
          sd += d;
          mass += p;
          bad |= !std::isfinite(static_cast<double>(d));
        }
        long double lqo_v = lqo[r];
        if (std::isnan(lqo[r]))
          lqo_v = std::log(std::max(1 - sq, static_cast<long double>(q_other_floor(k))));
        long double po = std::exp(static_cast<long double>(lpo[r]));
        kl += po * (lpo[r] - lqo_v);
        scale += std::fabs(po * (lpo[r] - lqo_v));
        if (bad) {
          EXPECT_FALSE(std::isfinite(rs.kl[r]) && std::isfinite(static_cast<double>(kl)));
          EXPECT_TRUE(std::isnan(rs.sigma2[r]));
          continue;
        }
        if (std::isnan(lqo[r]) && rs.q_other_clamped[r]) continue;  // ill-conditioned: 1 − Σq at the floor
        // f32 sums: 1e-6 of the terms' scale; an unknown tail adds the f32 error of 1 − Σq (k ulps) in ln
        // q_o.
        double tol = 1e-6 * static_cast<double>(scale) + 1e-12;
        if (std::isnan(lqo[r])) tol += static_cast<double>(po * k * 1.2e-7L / (1 - sq));
        EXPECT_NEAR(rs.kl[r], static_cast<double>(kl), tol) << k << " " << rows << " " << r;
        EXPECT_NEAR(rs.mass[r], static_cast<double>(mass), 1e-6);
        if (k >= 2) {
          long double mean = sd / k, v = 0;
          for (int j = 0; j < k; ++j) {
            long double d = static_cast<long double>(lq[r * k + j]) - lp[r * k + j] - mean;
            v += d * d;
          }
          v /= k - 1;
          EXPECT_NEAR(rs.sigma2[r], static_cast<double>(v), 1e-5 * static_cast<double>(v) + 1e-12);
        }
      }
    }
  }
}

// add_block (structure of arrays, lane sums) against add() on the same positions.
TEST(Accumulator, BlockEqualsOneByOne) {
  std::mt19937_64 rng(5);
  const int n = 3000;
  std::vector<PositionRecord> recs;
  for (int i = 0; i < n; ++i) {
    PositionRecord r = random_record(rng, 1000 + i);
    // Runs of cells and segments, as in a golden.
    r.domain = (i / 700) % 2;
    r.phase = (i / 300) % 2;
    r.depth = 1000 + i;
    r.segment = i / 700;
    r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
    if (i % 97 == 0) r.score.sigma2 = NAN;
    if (i % 89 == 0) r.delta_p = r.nll_cand = r.nll_ref = NAN;
    r.score.q_other_clamped = i % 83 == 0;
    r.score.mass = r.score.mass_covered = 0.5 + 0.4 * std::sin(i);
    r.score.kl_upper = r.score.kl;
    if (i % 211 == 0) r.score.kl = r.score.kl_upper = INFINITY;
    if (i % 101 == 0) r.margin = NAN;  // k = 1: unknown margin, counted as a tie
    if (i % 103 == 0) r.margin = -0.5;
    recs.push_back(r);
  }
  JudgeAccumulator one, blk;
  for (auto* a : {&one, &blk}) {
    a->init(20, {"code", "prose"}, 5);
    a->add_range(1000, 1000 + n);
  }
  for (auto& r : recs) one.add(r);
  auto B = std::make_unique<PositionBlock>();
  for (int i0 = 0; i0 < n; i0 += PositionBlock::kMax) {
    B->n = std::min(PositionBlock::kMax, n - i0);
    B->position0 = 1000 + i0;
    for (int t = 0; t < B->n; ++t) {
      const PositionRecord& r = recs[i0 + t];
      B->kl[t] = r.score.kl;
      B->sigma2[t] = r.score.sigma2;
      B->mass[t] = r.score.mass;
      B->margin[t] = r.margin;
      const bool tok = std::isfinite(r.delta_p) && std::isfinite(r.nll_cand) && std::isfinite(r.nll_ref);
      B->token[t] = tok;
      B->delta_p[t] = tok ? r.delta_p : 0;
      B->nll_ref[t] = tok ? r.nll_ref : 0;
      B->nll_cand[t] = tok ? r.nll_cand : 0;
      B->cell[t] = r.cell;
      B->segment[t] = r.segment;
      B->depth[t] = r.depth;
      B->finite[t] = std::isfinite(r.score.kl) && !r.nonfinite;
      B->flip[t] = r.flip;
      B->clamped[t] = r.score.q_other_clamped;
      B->domain[t] = r.domain;
      B->phase[t] = r.phase;
    }
    blk.add_block(*B);
  }
  blk.finish_blocks();
  // Counts and lists equal; double-double sums round to the same double.
  for (std::size_t c = 0; c < one.cells.size(); ++c) {
    const CellStats &a = one.cells[c], &b = blk.cells[c];
    EXPECT_EQ(a.n, b.n);
    EXPECT_EQ(a.nonfinite, b.nonfinite);
    EXPECT_EQ(a.q_other_clamped, b.q_other_clamped);
    EXPECT_EQ(a.n_token, b.n_token);
    EXPECT_EQ(a.n_sigma, b.n_sigma);
    EXPECT_EQ(a.ids_total, b.ids_total);
    EXPECT_EQ(a.ids_covered, b.ids_covered);
    EXPECT_EQ(a.positions_partial, b.positions_partial);
    EXPECT_EQ(a.upper_infinite, b.upper_infinite);
    EXPECT_EQ(a.bin_n, b.bin_n);
    EXPECT_EQ(a.bin_flips, b.bin_flips);
    EXPECT_EQ(a.kl_max, b.kl_max);
    EXPECT_EQ(a.kl_values, b.kl_values);
    EXPECT_EQ(a.flipped_kl, b.flipped_kl);
    for (auto [x, y] : {std::pair{&a.kl, &b.kl},
                        {&a.kl_sq, &b.kl_sq},
                        {&a.delta_p, &b.delta_p},
                        {&a.delta_p_sq, &b.delta_p_sq},
                        {&a.nll_ref, &b.nll_ref},
                        {&a.nll_cand, &b.nll_cand},
                        {&a.nll_diff, &b.nll_diff},
                        {&a.nll_diff_sq, &b.nll_diff_sq},
                        {&a.sigma2, &b.sigma2},
                        {&a.mass, &b.mass},
                        {&a.mass_missing, &b.mass_missing},
                        {&a.kl_upper_excess, &b.kl_upper_excess}})
      EXPECT_EQ(x->value(), y->value()) << c;
  }
  EXPECT_EQ(one.fine_n, blk.fine_n);
  EXPECT_EQ(one.fine_flips, blk.fine_flips);
  for (int f = 0; f < kFineMarginBins; ++f)
    EXPECT_EQ(one.fine_margin_sum[f].value(), blk.fine_margin_sum[f].value());
  EXPECT_EQ(one.segment_n, blk.segment_n);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(one.segment_kl[s].value(), blk.segment_kl[s].value());
  EXPECT_EQ(one.high_margin_flips, blk.high_margin_flips);
  auto by_position = [](std::vector<SamplePoint> v) {  // heap order depends on the insertion order
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.position < b.position; });
    return nlohmann::json(v.size()).dump() + [&] {
      std::string s;
      for (auto& p : v)
        s += fmt::format("{} {} {} {} {} {} {};", p.position, p.kl, p.margin, p.flip, p.domain, p.phase,
                         p.depth);
      return s;
    }();
  };
  EXPECT_EQ(by_position(one.sample), by_position(blk.sample));
}

TEST(Accumulator, SumsAreCompensated) {
  ExactSum s;
  s.add(1e16);
  for (int i = 0; i < 1000; ++i) s.add(1.0);
  s.add(-1e16);
  EXPECT_EQ(s.value(), 1000.0);
}

}  // namespace
}  // namespace kc
