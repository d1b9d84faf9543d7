// Per-position distribution metrics (docs/judge.md), on one reference row and one candidate row.
//
// KL over the reference's top-k plus one "other" bucket:
//   KL = Σ_j p_j (lp_j − lq_j) + p_o (lp_o − ln q_o)
// with p_j = exp(lp_j), lp_o the reference's log tail mass (recorded exactly, not as 1 − Σp_j), and q_o:
//   - exp(lq_o) when the candidate recorded its tail mass (candidates made from full logits), else
//   - 1 − Σ_j q_j, clamped below at q_other_floor(k) = k·2⁻²⁴ (the resolution of that difference when the
//     q_j come from f32 log-probs); a clamp is counted (PositionScore::q_other_clamped).
// A term with p = 0 is 0 (also against q = 0). A q_j = 0 where p_j > 0 gives +inf.
//
// Partial coverage (engines that report only their own top-K'): ids the engine did not report carry
// covered = 0 and an upper bound of their log-prob. The KL computed after moving every missing id into
// the other bucket on both sides (p_o' = p_o + Σ_missing p_j, q_o' = 1 − Σ_covered q_j) is a lower bound of
// the true KL (log-sum inequality); the upper bound is +inf as soon as a missing id has p_j > 0 (its
// probability may be 0), else equal to the lower bound.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kc {

// Margin bins of the reference's top-1 − top-2 log-prob difference:
// {0 (tie)}, (0,0.1], (0.1,0.25], (0.25,0.5], (0.5,1], (1,2], (2,5], >5.
inline constexpr int kMarginBins = 8;
inline constexpr double kMarginUpper[kMarginBins] = {0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, INFINITY};
// The backstop's margin: a flip above it (the reference's top-1 ahead by more than e¹ in probability) is
// one that equally correct implementations do not make. Bins above it hold the high-margin flips; bins 1 …
// kHighMarginBin − 1 are the uncertain positions (margin in (0, kBackstopMargin]).
inline constexpr double kBackstopMargin = 1.0;
inline constexpr int kHighMarginBin = 5;
static_assert(kMarginUpper[kHighMarginBin - 1] == kBackstopMargin);
inline constexpr bool uncertain_bin(int b) { return b >= 1 && b < kHighMarginBin; }
int margin_bin(double margin);        // NaN or negative → 0 (treated as a tie)
std::string margin_bin_label(int b);  // "0", "(0,0.1]", …, ">5"

double q_other_floor(int k);

struct PositionScore {
  double kl = 0;            // lower bound when coverage is partial; may be +inf or NaN
  double kl_upper = 0;      // == kl when every id is covered
  double sigma2 = NAN;      // sample variance over covered ids of δ_j = lq_j − lp_j (NaN with < 2 ids)
  int covered = 0;          // ids of the reference top-k the candidate reported
  double mass = 0;          // Σ_j p_j over the top-k
  double mass_covered = 0;  // Σ_j p_j over covered ids
  bool q_other_clamped = false;
};

// lp, lq: k log-probs (reference order); lp_other/lq_other: log tail masses (lq_other NaN = unknown);
// covered: k flags or nullptr (all covered).
PositionScore score_topk(const float* lp, float lp_other, const float* lq, float lq_other,
                         const std::uint8_t* covered, int k);

// The fast path of score_topk (every id covered) on `rows` ≤ kScoreRows consecutive rows at once (row r at
// lp + r·k, lq + r·k, lp_other[r], lq_other[r]), one row per SIMD lane: f32 exp and f32 sums over the k
// ids, the rest in f64. score_topk(…, nullptr, k) is this with rows = 1, so both give the same numbers.
inline constexpr int kScoreRows = 16;
struct RowScores {
  double kl[kScoreRows], sigma2[kScoreRows], mass[kScoreRows];
  bool q_other_clamped[kScoreRows];
  float lp0[kScoreRows], lp1[kScoreRows];  // the rows' first two reference log-probs (lp1: k ≥ 2)
};
void score_topk_rows(const float* lp, const float* lp_other, const float* lq, const float* lq_other, int k,
                     int rows, RowScores& out);

// KL(P‖Q) over the full vocabulary from two logit rows (log-softmax in f64). NaN if any input is NaN.
double full_vocab_kl(const float* ref_logits, const float* cand_logits, std::size_t vocab);

}  // namespace kc
