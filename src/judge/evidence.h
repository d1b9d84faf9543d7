// The numbers the verdict's rules read (docs/judge.md, "Aggregates" to "Floor test"), gathered before any
// rule runs: the runs' summaries and statistic tables, the floor's means and the ratios to it, the flip
// rate per margin bin against the pooled floor, the paired floor test per split, and Holm over the one
// family of tests with each floor test's limit and power. Internal to the judge (judge.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc::evidence {

// One run's Σ KL and count of finite positions in one segment, over a part of the corpus (a split's cells,
// a depth bucket).
struct SegmentSum {
  ExactSum kl;
  std::uint64_t n = 0;
};
// x_j = (Σ KL of segment j's positions in the part) / (the part's positions): Σ_j x_j is the run's KL mean
// over the part. *n_out: the part's positions; *segments_out: segments with positions in it.
std::vector<double> contributions(const std::vector<SegmentSum>& sums, std::int64_t* n_out, int* segments_out);

// The paired test of docs/judge.md, "Floor test", on per-segment contributions: the candidate's against
// m ≥ 2 floor runs'.
struct Paired {
  double cand = NAN, floor_mean = NAN, v_seg = NAN, v_run = NAN, sd = NAN, df = NAN, t = NAN;
  std::vector<double> floor_means;
};
Paired paired_test(const std::vector<double>& cand, const std::vector<const std::vector<double>*>& floor);

// R.noise, R.cand, R.sigma_floor, R.stats, R.floor_stats (mean over the noise runs), R.noise_ratio.
void summaries(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise);
// R.bins: per margin bin, the candidate's and the pooled floor's flips; in noise mode the non-tie bins'
// one-sided Fisher p-values (the tie bin is reported, never tested: a flip at an exact tie is how the tie
// is broken).
void flip_bins(JudgeReport& R, const JudgeAccumulator& cand);
// R.floor_tests (noise mode): the paired floor test of each split with ≥ min_split_center positions, or a
// note when the noise runs cannot measure their spread (one run, or identical runs).
void floor_tests(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise);
// R.depth_profile: the candidate's KL mean by fine depth bucket against the floor's, each bucket's paired
// test, and the onset depth with its segment-bootstrap interval (docs/judge.md, "Depth profile and onset").
// In src/judge/depth_profile.cpp.
void depth_profile(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise);
// Holm over the flip tests and the floor tests together at family-wise alpha: `rejected`, each floor
// test's p, limit and MDE.
void holm(JudgeReport& R);
// The worst positions with their segment and quoted context.
std::vector<WorstDetail> worst(const GoldenMeta& golden, const JudgeAccumulator& cand);

}  // namespace kc::evidence
