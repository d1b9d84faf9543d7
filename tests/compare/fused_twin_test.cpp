// The fused passes (AVX-512 intrinsics where the build has them, and the generic vector-extension one)
// against the general path (decode, then one plain loop per quantity): every accumulator bitwise equal,
// on random and adversarial inputs — NaN/inf in some blocks, ±0, subnormals, decade edges, zero
// tolerances (NaN scores), float overflow of |a−g|, tails that are not a multiple of 8 or 16.
// Also min_passing with the lazy quantile histogram, including the case that needs the second pass.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "compare/compare_internal.h"
#include "core/parallel.h"
#include "io/tensor.h"

namespace kc::cmp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

Tensor make(DType dt, const std::vector<double>& v) {
  return make_tensor_f64(dt, {static_cast<std::int64_t>(v.size())}, v, "<t>");
}

void expect_same(const FloatPassStats& x, const FloatPassStats& ref, const std::string& what) {
  EXPECT_EQ(pass_stats_difference(x, ref), "") << what;  // every accumulator, bitwise
}

// Every path and, for mixed, the lazy histogram, against the general path.
void check_all_paths(const Tensor& a, const Tensor& g, Method m, const Tolerance& tol,
                     const std::string& what) {
  const FloatPassStats ref = float_pass_stats(a, g, m, tol, FloatPath::general, false);
  expect_same(float_pass_stats(a, g, m, tol, FloatPath::fastest, false), ref, what + " fastest");
  expect_same(float_pass_stats(a, g, m, tol, FloatPath::generic_fused, false), ref, what + " generic_fused");
  if (m == Method::mixed) {
    const FloatPassStats lazy = float_pass_stats(a, g, m, tol, FloatPath::fastest, true);
    expect_same(lazy, ref, what + " fastest lazy");
    EXPECT_EQ(float_pass_stats(a, g, m, tol, FloatPath::generic_fused, true).qhist, lazy.qhist) << what;
  }
}

Tolerance mixed_tol(double rtol, double atol) {
  Tolerance t;
  t.rtol = rtol, t.atol = atol, t.limit = 1e-2;
  return t;
}
Tolerance stat_tol() {
  Tolerance t;
  t.threshold = std::ldexp(1.0, -13);
  return t;
}

// Adversarial values: decade edges and their neighbours, subnormals, ±0, huge and tiny magnitudes.
std::vector<double> edge_values() {
  std::vector<double> v = {0.0,   -0.0, 1.0,   -1.0,    5e-324,   -5e-324, 1e-310, 1.17549435e-38,
                           1e-45, 3e38, -3e38, 1.7e308, -1.7e308, 1e-300,  1e300,  65504,
                           0.5,   2,    1e-7};
  for (int m = -14; m <= 4; ++m) {
    const double p = std::pow(10.0, m);
    for (double x : {p, std::nextafter(p, 0.0), std::nextafter(p, kInf),
                     std::ldexp(1.0, static_cast<int>(std::floor(std::log2(p)))),
                     std::ldexp(1.0, static_cast<int>(std::floor(std::log2(p))) + 1)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  return v;
}

// n elements: a mix of smooth random data, exact pairs, golden zeros, edge values and (if specials)
// NaN/inf placed in some 1024-element blocks only.
void make_pair(std::size_t n, std::uint64_t seed, bool specials, std::vector<double>& av,
               std::vector<double>& gv) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  std::uniform_int_distribution<int> kind(0, 19);
  const std::vector<double> edges = edge_values();
  std::uniform_int_distribution<std::size_t> pick(0, edges.size() - 1);
  av.resize(n), gv.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double g = nd(rng) * std::pow(10.0, std::uniform_int_distribution<int>(-3, 3)(rng));
    double a = g * (1 + 1e-3 * nd(rng));
    double gg = g;
    switch (kind(rng)) {
      case 0:
        a = gg;
        break;  // exact
      case 1:
        gg = 0, a = 1e-6 * nd(rng);
        break;  // zero golden
      case 2:
        gg = 0, a = edges[pick(rng)];
        break;  // |a − g| exactly an edge value
      case 3:
        gg = edges[pick(rng)], a = edges[pick(rng)];
        break;
      case 4:
        gg = 0.0, a = -0.0;
        break;  // ±0
      case 5:
        gg = 1e-40 * nd(rng), a = 1e-41 * nd(rng);
        break;  // float subnormals
      default:
        break;
    }
    gv[i] = gg, av[i] = a;
  }
  if (specials) {
    // NaN/inf in blocks 1 and 5 only (the other blocks stay on the fused path).
    for (std::size_t blk : {std::size_t{1}, std::size_t{5}}) {
      const std::size_t b = blk * 1024;
      if (b + 40 > n) continue;
      gv[b + 3] = kNaN;
      av[b + 7] = kNaN;
      gv[b + 11] = av[b + 11] = kInf;
      gv[b + 13] = kInf, av[b + 13] = -kInf;
      gv[b + 17] = kNaN, av[b + 17] = kNaN;
      av[b + 19] = -kInf;
    }
  }
}

TEST(FusedTwin, EveryPathBitwiseEqualToTheGeneralPath) {
  set_thread_count(2);
  struct Case {
    DType da, dg;
    std::size_t n;
  };
  const Case cases[] = {{DType::float32, DType::float32, 70000 + 13},  // two chunks, a tail of 5
                        {DType::float32, DType::float32, 8200},        // a tail of 8 (16-wide loop remainder)
                        {DType::bfloat16, DType::bfloat16, 20000 + 24},
                        {DType::float16, DType::float16, 9000 + 3},
                        {DType::float64, DType::float64, 12000 + 7},
                        {DType::bfloat16, DType::float32, 9000 + 16},  // mixed dtypes: decoded loads
                        {DType::float8_e4m3fn, DType::float8_e4m3fn, 5000}};
  std::uint64_t seed = 1;
  for (const Case& c : cases)
    for (bool specials : {false, true}) {
      if (specials && c.da == DType::float8_e4m3fn) continue;  // no infinities in e4m3fn
      std::vector<double> av, gv;
      make_pair(c.n, seed++, specials, av, gv);
      const Tensor a = make(c.da, av), g = make(c.dg, gv);
      const std::string what = std::string(dtype_name(c.da)) + "/" + dtype_name(c.dg) +
                               " n=" + std::to_string(c.n) + (specials ? " with NaN/inf" : "");
      check_all_paths(a, g, Method::mixed, mixed_tol(std::ldexp(1.0, -10), std::ldexp(1.0, -16)), what);
      check_all_paths(a, g, Method::mixed, mixed_tol(0, 0), what + " zero tolerance (NaN and inf scores)");
      check_all_paths(a, g, Method::mixed, mixed_tol(1e30, 0), what + " huge rtol (inf tolerances)");
      check_all_paths(a, g, Method::stat_rel_err, stat_tol(), what);
    }
  set_thread_count(0);
}

TEST(FusedTwin, FloatOverflowOfTheErrorAndTinyErrors) {
  // |a − g| above FLT_MAX (the float score becomes inf or NaN) and below the float range (0/0 = NaN).
  std::vector<double> gv(4096), av(4096);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  for (std::size_t i = 0; i < gv.size(); ++i) {
    gv[i] = 3e38 * (i % 2 ? 1 : -1), av[i] = -gv[i] * (1 - 1e-3 * std::abs(nd(rng)));
    if (i % 3 == 0) gv[i] = 1e-300 * nd(rng), av[i] = gv[i] + 1e-310 * nd(rng);
  }
  for (DType dt : {DType::float32, DType::float64}) {
    const Tensor a = make(dt, av), g = make(dt, gv);
    check_all_paths(a, g, Method::mixed, mixed_tol(std::ldexp(1.0, -10), std::ldexp(1.0, -16)),
                    dtype_name(dt));
    check_all_paths(a, g, Method::mixed, mixed_tol(0, 0), std::string(dtype_name(dt)) + " zero tolerance");
    check_all_paths(a, g, Method::stat_rel_err, stat_tol(), dtype_name(dt));
  }
}

// The float-lane pass (fused_mixed32: float32/bfloat16/float16 pairs) decides the verdict and the decade
// bucket in float and redoes elements near either edge in double. Elements placed on, and a few float ulps
// around, the tolerance atol + rtol·|g| (with golden 0: |a| = float(atol) ± k ulps, where the float and the
// double comparisons disagree) and the decade edges 10^m, with tolerances that floats do not
// represent exactly (rtol 0.004, atol 1e-45 (a float subnormal), rtol 2^-126) and ones that switch the
// float score off (rtol 2, atol 2^101): every path bitwise equal to the general path.
TEST(FusedTwin, FloatLanesAtTheVerdictAndDecadeEdges) {
  set_thread_count(2);
  std::mt19937_64 rng(21);
  std::normal_distribution<double> nd;
  struct Tol {
    double rtol, atol;
  };
  const Tol tols[] = {
      {std::ldexp(1.0, -10), std::ldexp(1.0, -16)}, {0.004, 1e-45}, {std::ldexp(1.0, -126), 0},  {0, 3e-3},
      {std::ldexp(1.0, -6), std::ldexp(1.0, -6)},   {2, 0},         {1e-3, std::ldexp(1.0, 101)}};
  for (DType dt : {DType::float32, DType::bfloat16, DType::float16})
    for (const Tol& t : tols) {
      const std::size_t n = 3 * 1024 + 8;
      std::vector<double> av(n), gv(n);
      for (std::size_t i = 0; i < n; ++i) {
        // golden: a value of the dtype (re-encoded below), sometimes tiny
        double g = nd(rng) * std::pow(10.0, std::uniform_int_distribution<int>(-6, 3)(rng));
        if (i % 37 == 0) g = std::ldexp(nd(rng), -140);
        g = value_at(make(dt, {g}), 0);
        // one kind per 16 elements (one AVX-512 step), so a step near one kind of edge does not send the
        // others to the double redo
        const std::size_t kind = i / 16 % 3;
        double a;
        if (kind == 2) {  // golden 0: |a| = atol as a float, then k float steps (float and double disagree)
          float f = static_cast<float>(t.atol);
          const int k = static_cast<int>(i % 5) - 2;
          for (int s = 0; s < std::abs(k); ++s) f = std::nextafter(f, k > 0 ? 1e30f : 0.0f);
          g = 0, a = (i % 4 == 1 ? -1 : 1) * static_cast<double>(f);
        } else if (kind == 0) {  // on the tolerance, then k steps of the dtype away from it
          const double tol = std::fma(t.rtol, std::abs(g), t.atol);
          a = value_at(make(dt, {g + (i % 4 == 0 ? tol : -tol)}), 0);
          const int k = static_cast<int>(i % 7) - 3;
          for (int s = 0; s < std::abs(k); ++s)
            a = std::nextafter(static_cast<float>(a), k > 0 ? 1e30f : -1e30f);
        } else {  // |a − g| on a decade edge (golden 0) or near one
          const double e = std::pow(10.0, static_cast<int>(i % 15) - 12);
          float f = static_cast<float>(e);
          const int k = static_cast<int>(i / 16 % 9) - 4;
          for (int s = 0; s < std::abs(k); ++s) f = std::nextafter(f, k > 0 ? 1e30f : 0.0f);
          g = i % 3 == 0 ? 0.0 : g;
          a = g + (i % 5 == 0 ? -1 : 1) * static_cast<double>(f);
        }
        av[i] = a, gv[i] = g;
      }
      const Tensor a = make(dt, av), g = make(dt, gv);
      check_all_paths(a, g, Method::mixed, mixed_tol(t.rtol, t.atol),
                      fmt::format("{} rtol={} atol={}", dtype_name(dt), t.rtol, t.atol));
    }
  set_thread_count(0);
}

// bfloat16/float16 pairs where most codes are bitwise equal: the fastest path compresses each block to its
// differing elements (sparse16, AVX-512 VBMI2 builds) and must give every figure bitwise as the general
// path does. Blocks with 0, 1, 0.1 … 45 % (sparse) and 80 % (dense: the next blocks skip the screen)
// differing codes; equal scores and equal |a−g| at several indices (ties in the worst list and the
// maximum), ±0 pairs (different codes, zero error), equal subnormals, a golden NaN/inf pair and an actual
// inf against a finite golden in otherwise sparse blocks (the general path takes those blocks), a tail
// that is not a multiple of 32.
TEST(FusedTwin, SparseSixteenBitBlocksOfMostlyEqualCodes) {
  set_thread_count(2);
  for (DType dt : {DType::bfloat16, DType::float16})
    for (bool specials : {false, true}) {
      const std::size_t n = 80 * 1024 + 40;  // two chunks
      std::mt19937_64 rng(dt == DType::bfloat16 ? 31 : 32);
      std::normal_distribution<double> nd;
      std::uniform_real_distribution<double> u(0, 1);
      const double p_block[] = {0, 0.003, 0.03, 0.3, 0.45, 0.03, 0.03, 0.0, 0.3, 0.001};
      std::vector<double> av(n), gv(n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t blk = i / 1024;
        const double g = value_at(make(dt, {nd(rng) * (blk % 3 == 0 ? 1e-3 : 1.0)}), 0);
        double a = g;
        // dense blocks 4 and 66 (the screen then pauses for 15 blocks), sparse ones elsewhere
        if (u(rng) < (blk == 4 || blk == 66 ? 0.8 : p_block[blk % 10])) a = g * (1 + 0.05 * nd(rng));
        av[i] = a, gv[i] = g;
      }
      av[1024 * 2 + 5] = 1.0, gv[1024 * 2 + 5] = 0.5;  // one differing element in a sparse block…
      av[1024 * 7 + 9] = 3.0, gv[1024 * 7 + 9] = 2.5;  // … and in an all-equal one
      for (std::size_t i : {std::size_t{1024 * 11 + 3}, std::size_t{1024 * 11 + 700},
                            std::size_t{1024 * 12 + 1}, std::size_t{1024 * 70 + 2}}) {
        av[i] = 8.0, gv[i] = 6.0;  // the same (largest) |a−g| and score at four indices
      }
      for (std::size_t i = 1024 * 13; i < 1024 * 13 + 64; i += 4) {
        av[i] = 0.0, gv[i] = -0.0;                       // ±0: different codes, no error
        av[i + 1] = gv[i + 1] = 6e-8;                    // float16 subnormal (bfloat16: normal)
        av[i + 2] = 0.25 + 0.0078125, gv[i + 2] = 0.25;  // equal scores within a block
      }
      av[n - 3] = 1.5, gv[n - 3] = 1.25;  // in the tail
      if (specials) {
        gv[1024 * 20 + 4] = av[1024 * 20 + 4] = kNaN;   // equal NaN pair: golden not finite
        gv[1024 * 21 + 6] = av[1024 * 21 + 6] = -kInf;  // same infinity
        av[1024 * 22 + 8] = kInf;                       // actual inf, golden finite: a differing lane
        av[1024 * 23 + 9] = kNaN;
      }
      const Tensor a = make(dt, av), g = make(dt, gv);
      const std::string what = std::string(dtype_name(dt)) + (specials ? " with NaN/inf" : "");
      check_all_paths(a, g, Method::mixed, mixed_tol(std::ldexp(1.0, -6), std::ldexp(1.0, -6)), what);
      check_all_paths(a, g, Method::mixed, mixed_tol(0, 0), what + " zero tolerance");
      check_all_paths(a, g, Method::stat_rel_err, stat_tol(), what);
    }
  set_thread_count(0);
}

// Smallest k with k/n ≥ 0.99 in double (what compare_float asks the histogram for).
std::uint64_t count_99(std::uint64_t n) {
  std::uint64_t k = 0;
  while (!(static_cast<double>(k) / static_cast<double>(n) >= 0.99)) ++k;
  return k;
}

TEST(FusedTwin, LazyMinPassingEqualsTheFullHistogramsEvenWhenItNeedsTheSecondPass) {
  set_thread_count(2);
  const std::size_t n = 4 * 65536;
  std::mt19937_64 rng(11);
  std::normal_distribution<double> nd;
  // (1) homogeneous errors: the lazy floor is far below the 99 % quantile;
  // (2) large errors in the first block only (0.4 % of the elements), small errors in 2 % of the rest:
  //     the first chunk's floor is far above the 99 % quantile, so compare_float must redo the pass.
  for (int variant : {1, 2}) {
    std::vector<double> gv(n), av(n);
    for (std::size_t i = 0; i < n; ++i) {
      gv[i] = nd(rng);
      av[i] = variant == 1 || i < 1024 ? gv[i] * (1 + (variant == 1 ? 1e-4 : 1e-2) * nd(rng)) : gv[i];
      if (variant == 2 && i >= 1024 && i % 50 == 0) av[i] = gv[i] * (1 + 1e-5 * nd(rng));  // small errors
    }
    const Tensor a = make(DType::float32, av), g = make(DType::float32, gv);
    const Tolerance tol = mixed_tol(std::ldexp(1.0, -10), std::ldexp(1.0, -16));
    const FloatPassStats full = float_pass_stats(a, g, Method::mixed, tol, FloatPath::general, false);
    const FloatPassStats lazy = float_pass_stats(a, g, Method::mixed, tol, FloatPath::fastest, true);
    const double want = quantile_at_least(full.qhist, count_99(n));
    const bool needs_second_pass = lazy.qhist[0] >= count_99(n);
    EXPECT_EQ(needs_second_pass, variant == 2) << "floor " << lazy.q_floor;
    if (!needs_second_pass) {
      EXPECT_EQ(bits(quantile_at_least(lazy.qhist, count_99(n))), bits(want));
    }
    Route r;
    r.method = Method::mixed;
    r.source = "test";
    const CompareResult res = compare({&a, &g, nullptr}, r);
    const std::string expect_prefix = fmt::format("rtol and atol scaled by {:.4g} ", want);
    EXPECT_EQ(res.min_passing.substr(0, expect_prefix.size()), expect_prefix) << res.min_passing;
  }
  set_thread_count(0);
}

// The worst list with equal scores spread over chunks, against a full sort (score down, index up): chunks
// skip scores below the largest 10th place of the chunks already finished, so an equal score at a lower
// index in a chunk that finishes later must still get in. Chunk 2 is slow (an equal NaN pair in every
// block sends each block to the general path) and ends with 4 tied elements; chunk 3 starts with 12, so
// with 2 threads (chunks 2 and 3 start together) it often finishes first and publishes the tied score as
// its 10th place while chunk 2 is still running.
TEST(FusedTwin, WorstListWithTiesAcrossChunksMatchesAFullSort) {
  const std::size_t n = 6 * 65536;
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> av(n), gv(n);
  for (std::size_t i = 0; i < n; ++i) {
    gv[i] = static_cast<float>(1 + 0.5 * u(rng));
    av[i] = static_cast<float>(gv[i] * (1 + 1e-3 * (u(rng) - 0.5)));
  }
  for (std::size_t b = 128; b < 192; ++b) av[1024 * b + 100] = gv[1024 * b + 100] = kNaN;  // chunk 2: slow
  std::vector<std::size_t> ties = {3 * 65536 - 6, 3 * 65536 - 5, 3 * 65536 - 4, 3 * 65536 - 3};
  for (std::size_t i = 0; i < 12; ++i) ties.push_back(3 * 65536 + i);
  for (std::size_t i : {270000, 280000, 330000, 390000}) ties.push_back(i);
  for (std::size_t i : ties) av[i] = 1.5, gv[i] = 1.0;
  const Tensor a = make(DType::float32, av), g = make(DType::float32, gv);
  // the reference: stat_rel_err's score |a−g| / (|g| + 1e-7) of every finite pair, fully sorted
  std::vector<Candidate> all;
  for (std::size_t i = 0; i < n; ++i)
    if (std::isfinite(av[i])) all.push_back({std::abs(av[i] - gv[i]) / (std::abs(gv[i]) + 1e-7), i});
  std::sort(all.begin(), all.end(), [](const Candidate& x, const Candidate& y) {
    return x.score != y.score ? x.score > y.score : x.index < y.index;
  });
  for (int threads : {1, 2, 2, 2, 2, 2, 2, 2, 2})
    for (FloatPath path : {FloatPath::fastest, FloatPath::generic_fused, FloatPath::general}) {
      set_thread_count(threads);
      const FloatPassStats st = float_pass_stats(a, g, Method::stat_rel_err, stat_tol(), path, false);
      ASSERT_EQ(st.worst.size(), std::size_t{kWorst});
      for (int k = 0; k < kWorst; ++k) {
        EXPECT_EQ(st.worst[k].index, all[k].index) << threads << " threads, path " << int(path) << ", " << k;
        EXPECT_EQ(bits(st.worst[k].score), bits(all[k].score)) << k;
      }
      if (path == FloatPath::fastest) {  // mixed: the same list for any thread count (float scores)
        const FloatPassStats m2 = float_pass_stats(a, g, Method::mixed, mixed_tol(1e-3, 1e-5), path, false);
        set_thread_count(1);
        const FloatPassStats m1 = float_pass_stats(a, g, Method::mixed, mixed_tol(1e-3, 1e-5), path, false);
        expect_same(m2, m1, "mixed, " + std::to_string(threads) + " threads");
        ASSERT_EQ(m1.worst.size(), std::size_t{kWorst});
        for (int k = 0; k < kWorst; ++k) EXPECT_EQ(m1.worst[k].index, ties[k]) << k;
      }
    }
  set_thread_count(0);
}

}  // namespace
}  // namespace kc::cmp
