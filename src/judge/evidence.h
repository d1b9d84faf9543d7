// The numbers the verdict's rules read (docs/judge.md, "Aggregates" to "Floor test"), gathered before any
// rule runs: the runs' summaries and statistic tables, the floor's means and the ratios to it, the flip
// rate per margin bin against the pooled floor, the paired floor test per split, and Holm over the one
// family of tests with each floor test's limit and power. Internal to the judge (judge.cpp).
#pragma once
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc::evidence {

// R.noise, R.cand, R.sigma_floor, R.stats, R.floor_stats (mean over the noise runs), R.noise_ratio.
void summaries(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise);
// R.bins: per margin bin, the candidate's and the pooled floor's flips; in noise mode the non-tie bins'
// one-sided Fisher p-values (the tie bin is reported, never tested: a flip at an exact tie is how the tie
// is broken).
void flip_bins(JudgeReport& R, const JudgeAccumulator& cand);
// R.floor_tests (noise mode): the paired floor test of each split with ≥ min_split_center positions, or a
// note when the noise runs cannot measure their spread (one run, or identical runs).
void floor_tests(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise);
// Holm over the flip tests and the floor tests together at family-wise alpha: `rejected`, each floor
// test's p, limit and MDE.
void holm(JudgeReport& R);
// The worst positions with their segment and quoted context.
std::vector<WorstDetail> worst(const GoldenMeta& golden, const JudgeAccumulator& cand);

}  // namespace kc::evidence
