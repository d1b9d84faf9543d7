// Streaming, mergeable accumulators of the model-level judge (gemma.cpp DistortionStats style: notify one
// position at a time, merge partial results). Everything that can be exact is: counts are integers, sums
// are double-double (ExactSum), so a comparison split into shards and merged (`kerncheck merge`) gives the
// same numbers as one pass. Quantiles are exact: each cell keeps its KL values as f32 (4 bytes per
// position), selected at summary time without copying (a 16-bit key histogram, then only the bins holding
// the wanted ranks are sorted: linear time, exact order statistics).
//
// Positions fall into cells (domain × depth bucket × phase); every split the report shows (overall, by
// domain, by depth, by phase) is a merge of cells. Their summaries are summary.h; the statistics read off
// the summaries (names, thresholds keys), statistics.h.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/distribution.h"
#include "metrics/stats.h"

namespace kc {

// Depth bucket of a context length: 0 for depth 0, else floor(log2(depth)) + 1; the bucket b ≥ 1 holds
// depths [2^(b−1), 2^b). Reported under its lower edge ("2048" = [2048, 4096)).
inline constexpr int kDepthBuckets = 48;
// Inline: the judge's fast path computes it for every position (a vectorised lzcnt).
inline int depth_bucket(std::int64_t depth) {
  if (depth <= 0) return 0;
  int b = 64 - std::countl_zero(static_cast<std::uint64_t>(depth));  // floor(log2) + 1
  return b < kDepthBuckets - 1 ? b : kDepthBuckets - 1;
}
std::int64_t depth_bucket_lower(int bucket);

// Fine depth buckets of the depth profile (docs/judge.md, "Depth profile and onset"): a depth rounded down
// to its five leading bits — every depth below 32 is its own bucket, from 32 on 16 buckets per octave
// (3.1 … 6.25 % wide). The bucket index grows with the depth; depth ≤ 0 is bucket 0.
inline constexpr int kProfilePerOctave = 16;
inline int profile_bucket(std::int64_t depth) {
  if (depth < 32) return depth <= 0 ? 0 : static_cast<int>(depth);
  const int e = 63 - std::countl_zero(static_cast<std::uint64_t>(depth));  // floor(log2), ≥ 5
  return kProfilePerOctave * (e - 3) + static_cast<int>((depth >> (e - 4)) & 15);
}
std::int64_t profile_bucket_lower(int bucket);  // the smallest depth of the bucket

inline constexpr int kPhases = 2;  // 0 prefill, 1 decode
inline constexpr int kCellsPerDomain = kDepthBuckets * kPhases;
inline int cell_index(int domain, int depth_bucket, int phase) {
  return (domain * kDepthBuckets + depth_bucket) * kPhases + phase;
}

// Fine margin histogram for the Gaussian noise model: bin 0 ties, bin 1 (0, 2^-20), then 32 bins per
// octave over [2^-20, 2^10) (each ≤ 2.2 % wide), last bin ≥ 2^10. Keeps the count, flips and the sum of
// margins per bin, so the expected flips use each bin's mean margin.
inline constexpr int kFineMarginBins = 3 + 30 * 32;
int fine_margin_bin(double margin);

// What the judge learned about one position.
struct PositionRecord {
  std::int64_t position = 0;  // index in the golden
  int cell = 0;
  int segment = 0;
  std::int32_t depth = 0;
  std::uint8_t phase = 0;
  std::uint8_t domain = 0;
  PositionScore score;
  bool nonfinite = false;  // candidate row had NaN/+inf, or its KL is not finite
  bool flip = false;       // candidate top-1 ≠ reference top-1
  // A flip the candidate's own precision could not order: its log-prob of its top-1 equals its log-prob of
  // the reference's top-1 (two logits that round to one value: its tie-break chose, not its numbers).
  bool tie = false;
  double margin = 0;       // reference top-1 − top-2 log-prob
  double delta_p = NAN;    // q(token) − p(token); NaN when the candidate's token log-prob is unknown
  double nll_ref = NAN, nll_cand = NAN;
  double full_kl = NAN;  // full-vocabulary KL when both full rows were given
};

// Per-position values of up to kMax consecutive positions as structure of arrays: what the judge's fast
// path (every id covered, no full logits) hands to JudgeAccumulator::add_block. add_block gives the same
// numbers as add() on the equivalent PositionRecords (tested). Arrays have 8 spare entries so that lane
// loops may read past n.
struct PositionBlock {
  static constexpr int kMax = 512, kPad = kMax + 8;
  int n = 0;
  std::int64_t position0 = 0;  // golden index of entry 0
  alignas(64) double kl[kPad], sigma2[kPad], mass[kPad], margin[kPad];
  alignas(64) double delta_p[kPad], nll_ref[kPad], nll_cand[kPad];  // 0 where token[i] is 0
  alignas(64) std::int32_t cell[kPad], segment[kPad], depth[kPad];
  alignas(64) std::uint8_t finite[kPad];  // KL finite and the candidate row not broken (!nonfinite)
  alignas(64) std::uint8_t flip[kPad];
  alignas(64) std::uint8_t tie[kPad];  // PositionRecord::tie
  alignas(64) std::uint8_t token[kPad];  // delta_p, nll_ref and nll_cand known and finite
  alignas(64) std::uint8_t clamped[kPad], domain[kPad], phase[kPad];
};

struct CellStats {
  std::uint64_t n = 0, nonfinite = 0, q_other_clamped = 0;
  ExactSum kl, kl_sq;  // over positions with finite KL
  double kl_max = 0;
  std::vector<float> kl_values;   // finite KL of every position
  std::vector<float> flipped_kl;  // finite KL of the flipped positions (share of high-KL without flip)
  std::array<std::uint64_t, kMarginBins> bin_n{}, bin_flips{}, bin_tie_flips{};
  std::uint64_t n_token = 0;
  ExactSum delta_p, delta_p_sq, nll_ref, nll_cand, nll_diff, nll_diff_sq;
  std::uint64_t n_sigma = 0;
  ExactSum sigma2;
  std::uint64_t ids_total = 0, ids_covered = 0, positions_partial = 0, upper_infinite = 0;
  ExactSum mass, mass_missing,
      kl_upper_excess;  // Σ p; Σ p of ids not reported; Σ (upper − lower) where finite
  std::uint64_t n_full = 0;
  ExactSum full_kl, full_kl_sq;
  double full_kl_max = 0;
  std::vector<float> full_kl_values;

  void add(const PositionRecord& r);
  // values = false: scalars (and flipped_kl) only, for summaries that read the value arrays in place.
  void merge(const CellStats& o, bool values = true);
};

struct WorstPosition {
  std::int64_t position = 0;
  double kl = 0;
  double margin = 0;
  bool flip = false;
  int segment = 0;
  std::int32_t token = -1;
  std::array<std::int32_t, 3> ref_ids{-1, -1, -1}, cand_ids{-1, -1, -1};
  std::array<float, 3> ref_logprobs{NAN, NAN, NAN}, cand_logprobs{NAN, NAN, NAN};
};

// One plot point. The sample keeps the positions with the smallest hash(position): deterministic,
// uniform, and mergeable across shards.
struct SamplePoint {
  std::uint64_t hash = 0;
  std::int64_t position = 0;
  float kl = 0, margin = 0;
  bool flip = false;
  std::uint8_t domain = 0, phase = 0;
  std::int32_t depth = 0;
};
std::uint64_t position_hash(std::int64_t position);

// Σ KL and count of one segment's finite positions in one cell: the paired floor test's per-segment sums
// of every split (a segment visits a few cells: its depth buckets × phases).
struct SegmentCellSum {
  std::int32_t cell = 0;
  std::uint64_t n = 0;
  ExactSum kl;
};

// Σ KL and count of one segment's finite positions in one fine depth bucket (profile_bucket): the depth
// profile's per-segment sums, paired over segments as the floor test's.
struct SegmentDepthSum {
  std::int32_t bucket = 0;
  std::uint64_t n = 0;
  ExactSum kl;
};

struct JudgeAccumulator {
  static constexpr std::size_t kWorst = 20, kSample = 20000, kHighMarginList = 20;
  static constexpr std::size_t kWorstMax = 100000;  // `--worst N`: each entry keeps a quoted context

  int k = 0;
  std::vector<std::string> domains;  // domain index → name (same for every run against one golden)
  int n_segments = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // positions judged: sorted, disjoint [b, e)
  std::vector<CellStats> cells;                               // domains.size() × kCellsPerDomain
  std::array<std::uint64_t, kFineMarginBins> fine_n{}, fine_flips{};
  std::array<ExactSum, kFineMarginBins> fine_margin_sum{};
  // add_block's exact fixed-point form of fine_margin_sum for bins 2 … kFineMarginBins − 2, whose margins
  // share one binary exponent each: Σ of the 53-bit significands (an integer, no rounding, cheaper than a
  // double-double add). finish_blocks() adds it into fine_margin_sum and clears it.
  std::vector<unsigned __int128> fine_margin_fixed;
  std::vector<ExactSum> segment_kl;  // per segment: Σ KL (finite)
  std::vector<std::uint64_t> segment_n;
  std::vector<std::vector<SegmentCellSum>> segment_cells;  // per segment, sorted by cell
  void add_segment_cell(int segment, int cell, std::uint64_t n, const ExactSum& kl);
  std::vector<std::vector<SegmentDepthSum>> segment_depths;  // per segment, sorted by fine depth bucket
  void add_segment_depth(int segment, int bucket, std::uint64_t n, const ExactSum& kl);
  // False when read from a shard written before the depth sums were kept (a merge with one keeps false):
  // the report then has no depth profile.
  bool has_segment_depths = true;
  std::int32_t depth_max = -1;  // the deepest depth judged (the profile's deepest bucket ends past it)
  std::vector<WorstPosition> worst;  // sorted by KL desc, then position asc; ≤ worst_cap
  std::size_t worst_cap = kWorst;    // `kerncheck test --worst N`; a merge keeps the larger
  std::vector<SamplePoint> sample;   // ≤ kSample, a max-heap by hash (outside add_block … finish_blocks)
  std::uint64_t sample_cut = ~std::uint64_t{0};  // add_block: points with a hash ≥ this cannot enter
  std::vector<std::pair<std::int64_t, double>>
      high_margin_flips;  // (position, margin), first kHighMarginList

  void init(int k, std::vector<std::string> domains, int n_segments);
  // Declares [begin, end) as judged; an overlap is refused naming `file` (a shard) when given.
  void add_range(std::int64_t begin, std::int64_t end, std::string_view file = {});
  std::int64_t positions_judged() const;
  // Adds one position; `worst` is filled by the caller via wants_worst()/offer_worst() to avoid building
  // the details for every position.
  void add(const PositionRecord& r);
  // The same for positions [b.position0, b.position0 + b.n), every id covered, no full-vocabulary KL.
  // Call finish_blocks() after the last add_block: while adding blocks, the plot sample collects the
  // points below a moving cut without keeping a heap (cheap), and finish_blocks() trims it to the kSample
  // smallest hashes again.
  void add_block(const PositionBlock& b);
  void finish_blocks();
  bool wants_worst(double kl, std::int64_t position) const;
  void offer_worst(const WorstPosition& w);
  // Merges a shard or chunk. Throws kc::Error when the two do not belong together (k, domains, overlap).
  void merge(const JudgeAccumulator& o);
  void merge(JudgeAccumulator&& o);  // moves when this one is still empty

  // Serialisation for shard files: scalars as JSON, the KL value arrays returned separately.
  nlohmann::json to_json() const;
  static JudgeAccumulator from_json(const nlohmann::json& j, const std::string& file);
  std::vector<float> all_values(int which) const;  // 0: kl_values, 1: full_kl_values (cell order)
  void set_values(int which, const std::vector<float>& values, const std::string& file);
};

}  // namespace kc
