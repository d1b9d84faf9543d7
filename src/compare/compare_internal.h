// Pieces shared by the comparison methods: mergeable accumulators (worst elements, non-finite classes,
// error histograms) and the block/chunk sizes. Internal to src/compare.
#pragma once
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "compare/methods.h"

namespace kc::cmp {

// Elements per decoded block (stack buffers stay in L1/L2) and per parallel chunk. The chunk size is
// fixed, so every reduction is merged in the same order for any thread count (bitwise deterministic).
inline constexpr std::size_t kBlock = 1024;
inline constexpr std::size_t kChunk = std::size_t{1} << 16;
inline constexpr int kLanes = 8;  // independent accumulators: lets the compiler vectorise fp reductions
inline constexpr int kWorst = 10;
inline constexpr int kFirstIndices = 10;    // kept per non-finite class
inline constexpr int kMismatchIndices = 20;  // kept for binary / requant / quant

// --- worst elements: the kWorst largest scores, ties to the lower index -----------------------------
struct Candidate {
  double score = 0;
  std::size_t index = 0;
};
struct TopK {
  std::array<Candidate, kWorst> items{};
  int count = 0;
  // Elements must beat this to enter (strictly: an equal score at a later index loses the tie).
  double threshold() const { return count < kWorst ? 0.0 : items[kWorst - 1].score; }
  void offer(double score, std::size_t index) {
    if (!(score > 0)) return;  // exact elements are never "worst"; NaN never enters
    if (count == kWorst && !(score > items[kWorst - 1].score)) return;
    int pos = count < kWorst ? count++ : kWorst - 1;
    while (pos > 0 && (items[pos - 1].score < score ||
                       (items[pos - 1].score == score && items[pos - 1].index > index))) {
      items[pos] = items[pos - 1];
      --pos;
    }
    items[pos] = {score, index};
  }
  void merge(const TopK& o) {
    for (int i = 0; i < o.count; ++i) offer(o.items[i].score, o.items[i].index);
  }
};

// --- non-finite mismatches by class ---------------------------------------------------------------
enum NfClass : int { kGoldenNan, kActualNan, kGoldenInf, kActualInf, kInfSign, kNfClasses };
const char* nf_class_name(int c);

// -1 when the pair counts as equal (both NaN, or the same infinity), else the mismatch class.
// Only called when at least one side is non-finite.
inline int classify_nonfinite(double a, double g) {
  const bool an = std::isnan(a), gn = std::isnan(g);
  if (an && gn) return -1;
  if (gn) return kGoldenNan;
  if (an) return kActualNan;
  if (a == g) return -1;  // same infinity
  if (std::isinf(a) && std::isinf(g)) return kInfSign;
  return std::isinf(g) ? kGoldenInf : kActualInf;
}

struct NonFiniteAcc {
  std::array<std::uint64_t, kNfClasses> count{};
  std::array<std::vector<std::size_t>, kNfClasses> first;
  std::uint64_t matched = 0;  // NaN/NaN and same-inf pairs (counted as equal)
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (auto c : count) t += c;
    return t;
  }
  void add(int cls, std::size_t index) {
    ++count[cls];
    if (first[cls].size() < kFirstIndices) first[cls].push_back(index);
  }
  void merge(const NonFiniteAcc& o) {
    matched += o.matched;
    for (int c = 0; c < kNfClasses; ++c) {
      count[c] += o.count[c];
      for (auto i : o.first[c])
        if (first[c].size() < kFirstIndices) first[c].push_back(i);
    }
  }
  void to_result(CompareResult& r) const;
};

// --- |a−g| by decades: [0] exact, [1] (0,1e-12], [2] (1e-12,1e-11] … [15] (10,100], [16] >100 ------
inline constexpr int kHistBins = 17;
const std::vector<std::string>& hist_labels();
// Bucket of one non-negative error (NaN goes to the last bucket).
int hist_bucket(double d);

// --- quantile histogram of a non-negative per-element quantity (min_passing) ----------------------
// 16 bins per binade over [2^-60, 2^60); bin 0 holds exact zeros, bin 1 (0, 2^-60), the last bin ≥ 2^60
// (and inf/NaN). upper_edge(b) bounds every value in bin b from above.
inline constexpr int kQMinExp = -60, kQMaxExp = 60, kQSub = 16;
inline constexpr int kQBins = (kQMaxExp - kQMinExp) * kQSub + 3;
inline int quantile_bin(double x) {  // branch-free; x ≥ 0 or NaN
  static_assert(kQMinExp == -60 && kQMaxExp == 60);
  const auto key = static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(x) >> 48);  // exponent + 4 bits
  std::int64_t b = 2 + key - ((1023 + kQMinExp) << 4);
  b = b < 1 ? 1 : (b > kQBins - 1 ? kQBins - 1 : b);  // (0, 2^-60) → 1; ≥ 2^60, inf, NaN → last
  return x == 0 ? 0 : static_cast<int>(b);
}
double quantile_upper_edge(int bin);
// Smallest value v (a bin's upper edge) such that at least k of the histogrammed values are ≤ v;
// +inf when only the last bin gets there, 0 when k ≤ the zeros.
double quantile_at_least(const std::vector<std::uint64_t>& hist, std::uint64_t k);

// --- helpers ----------------------------------------------------------------------------------------
std::string fmt_g(double x);  // shortest round-trip text of a double ("0.0009765625", "inf")
void add_figure(CompareResult& r, std::string name, double value, std::optional<double> limit = std::nullopt,
                std::string relation = {});
// ULP of the output dtype at x (complex: of its component; integers and bool: 1).
double ulp_of(DType d, double x);
DType component_dtype(DType d);  // complex32 → float16, complex64 → float32, complex128 → float64

// Fills r.worst from the candidates: re-decodes the elements, computes abs/rel/ULP errors.
void fill_worst(CompareResult& r, const TopK& top, const Tensor& a, const Tensor& g);
// Decoded value of element i (complex: its modulus).
double value_at(const Tensor& t, std::size_t i);

// Which code runs compare_float's streaming pass. Every choice gives bitwise the same results; tests
// compare them (fastest: the fused pass with AVX-512 intrinsics where the build has them, else the
// generic fused pass; generic_fused: the vector-extension fused pass; general: decode, then one loop
// per quantity).
enum class FloatPath { fastest, generic_fused, general };

// The raw accumulators of compare_float's pass, for those tests.
struct FloatPassStats {
  std::uint64_t pass = 0;
  double sum_rel = 0, max_rel = 0, dot = 0, norm_a = 0, norm_g = 0, max_d = 0;
  std::size_t arg_max = 0;
  std::vector<Candidate> worst;
  std::vector<std::uint64_t> hist, qhist, nonfinite;  // nonfinite: count per class, then the matched pairs
  int q_floor = 1;  // qhist is exact from this bin up; bin 0 holds all elements below it
};
// lazy_quantiles: mixed only counts the high bins one by one (what compare_float does first).
FloatPassStats float_pass_stats(const Tensor& a, const Tensor& g, Method m, const Tolerance& tol,
                                FloatPath path, bool lazy_quantiles);

// The first accumulator in which `x` differs bitwise from `ref`, in words; "" when none does. `ref` must
// have the full quantile histogram (q_floor 1): x's lazy one is compared with it folded below x.q_floor.
// For the twin tests and the compare_paths fuzzer.
std::string pass_stats_difference(const FloatPassStats& x, const FloatPassStats& ref);

// The methods' table entries (compare/methods.h), each defined in its family's file.
#define KC_METHOD_DECL(m) extern const MethodDef m##_method;
KC_COMPARE_METHODS(KC_METHOD_DECL)
#undef KC_METHOD_DECL

}  // namespace kc::cmp
