// The value methods' shared streaming pass (float_pass.cpp) and what their verdicts read from it.
// Internal to src/compare: tolerance_methods.cpp (mixed, close) and statistic_methods.cpp (stat_rel_err,
// cosine) call float_pass() and turn its accumulators into a CompareResult.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compare/compare_internal.h"

namespace kc::cmp {

// The pass's accumulators, merged over the chunks in order. Which fields a pass fills depends on the
// method (see each field); the rest stay 0.
struct FloatAcc {
  std::uint64_t pass = 0;           // mixed/close: |a−g| ≤ atol + rtol·|g| (finite pairs and matches)
  double sum_rel = 0, max_rel = 0;  // stat_rel_err
  double dot = 0, norm_a = 0, norm_g = 0;  // cosine (sums of squares)
  double max_d = 0;                        // largest |a−g| over finite pairs
  std::size_t arg_max = 0;                 // its first index
  TopK top;
  NonFiniteAcc nf;
  std::array<std::uint64_t, kHistBins> hist{};
  std::vector<std::uint64_t> qhist;  // quantile histogram (min_passing), empty if unused
  int q_floor = 1;  // qhist is exact for bins ≥ q_floor; qhist[0] holds every element below it

  // Moves bins [from, q_floor) into bin 0 (bins 1…from−1 are already empty).
  void fold_below_floor(int from = 1) {
    std::uint64_t below = 0;  // a local: qhist[0] in the loop would be a store-to-load chain
    for (int b = from; b < q_floor; ++b) below += qhist[b], qhist[b] = 0;
    qhist[0] += below;
  }

  void merge(const FloatAcc& o) {
    pass += o.pass;
    sum_rel += o.sum_rel;
    max_rel = std::max(max_rel, o.max_rel);
    dot += o.dot, norm_a += o.norm_a, norm_g += o.norm_g;
    if (o.max_d > max_d) max_d = o.max_d, arg_max = o.arg_max;  // chunks merge in order: ties keep first
    top.merge(o.top);
    nf.merge(o.nf);
    for (int i = 0; i < kHistBins; ++i) hist[i] += o.hist[i];
    q_floor = std::max(q_floor, o.q_floor);  // qhist: summed in PassShared, folded by float_pass
  }
};

// One pass of method m (mixed, stat_rel_err, close or cosine) over actual ta and golden tg with the merged
// tolerances (mixed, close: rtol, atol ≥ 0, else kc::Error). lazy_quantiles: see run_chunk (mixed only).
FloatAcc float_pass(const Tensor& ta, const Tensor& tg, Method m, const Tolerance& tol, FloatPath path,
                    bool lazy_quantiles);

// What every value method's result takes from the pass the same way: begin fills the NaN/Inf classes
// (and their note) and the decade histogram, before the method's figures; end adds the complex note and
// the worst elements, after them.
CompareResult float_result_begin(const FloatAcc& acc);
std::string nonfinite_reason(std::uint64_t mismatches);  // "3 NaN/Inf mismatches (unbounded error)"
void float_result_end(CompareResult& r, const FloatAcc& acc, const Tensor& a, const Tensor& g);

}  // namespace kc::cmp
