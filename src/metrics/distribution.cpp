#include "metrics/distribution.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "numeric/fastmath.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace kc {

int margin_bin(double m) {
  if (!(m > 0)) return 0;
  for (int b = 1; b < kMarginBins; ++b)
    if (m <= kMarginUpper[b]) return b;
  return kMarginBins - 1;
}

std::string margin_bin_label(int b) {
  static const char* labels[kMarginBins] = {"0",       "(0,0.1]", "(0.1,0.25]", "(0.25,0.5]",
                                            "(0.5,1]", "(1,2]",   "(2,5]",      ">5"};
  return labels[b];
}

double q_other_floor(int k) { return std::ldexp(static_cast<double>(k < 1 ? 1 : k), -24); }

namespace {

// p_o (lp_o − ln q_o) with the 0·x = 0 convention.
inline double other_term(double p_o, double lp_o, double ln_q_o) {
  return p_o > 0 ? p_o * (lp_o - ln_q_o) : 0.0;
}

// One row per lane (GCC vector extensions: AVX-512 where the build has it, narrower vectors otherwise).
typedef float V16f __attribute__((vector_size(4 * kScoreRows)));
typedef std::int32_t V16i __attribute__((vector_size(4 * kScoreRows)));

// fastmath::exp_f32's arithmetic (exp_core) on lanes already clamped to its range.
inline V16f exp16_clamped(V16f xc) { return fastmath::exp_core<false, V16f, V16i>(xc); }
constexpr float kExpHi = fastmath::kExpF32Hi, kExpLo = fastmath::kExpF32Lo;

// fastmath::exp_f32 on every lane: the same operations, so the same results.
inline V16f exp16(V16f x) {
  V16f xc = x < kExpLo ? V16f{} + kExpLo : x;
  xc = xc > kExpHi ? V16f{} + kExpHi : xc;
  V16f y = exp16_clamped(xc);
  y = x < kExpLo ? V16f{} : y;
  y = x > kExpHi ? V16f{} + std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

// exp16 for the reference log-probs, which the golden's checks bound to ≤ 10⁻³ (rows that fail them are
// refused, so their values do not matter; NaN and x > 88 give some finite value here): the same arithmetic,
// so the same results on every valid x (−inf included: 0), without exp16's overflow and NaN selects.
inline V16f exp16_le0(V16f x) {
#if defined(__AVX512F__)
  static_assert(sizeof(V16f) == sizeof(__m512));
  // vmaxps/vminps are exactly `a > b ? a : b` / `a < b ? a : b` (GCC does not match the selects to them).
  V16f xc = reinterpret_cast<V16f>(_mm512_min_ps(
      _mm512_max_ps(reinterpret_cast<__m512>(x), _mm512_set1_ps(kExpLo)), _mm512_set1_ps(kExpHi)));
#else
  V16f xc = x > kExpLo ? x : V16f{} + kExpLo;  // NaN → lo
  xc = xc < kExpHi ? xc : V16f{} + kExpHi;
#endif
  return x < kExpLo ? V16f{} : exp16_clamped(xc);
}

// Column j of `rows` rows with stride k; missing rows read as `pad`.
struct Columns {
#ifdef __AVX512F__
  __m512i idx;
  __mmask16 mask;
  Columns(int k, int rows)
      : idx(_mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                               _mm512_set1_epi32(k))),
        mask(static_cast<__mmask16>((1u << rows) - 1)) {}
  V16f get(const float* base, int j, float pad) const {
    return reinterpret_cast<V16f>(_mm512_mask_i32gather_ps(_mm512_set1_ps(pad), mask, idx, base + j, 4));
  }
#else
  int k, rows;
  Columns(int k_, int rows_) : k(k_), rows(rows_) {}
  V16f get(const float* base, int j, float pad) const {
    V16f v;
    for (int r = 0; r < kScoreRows; ++r) v[r] = r < rows ? base[r * k + j] : pad;
    return v;
  }
#endif
};

}  // namespace

void score_topk_rows(const float* lp, const float* lp_other, const float* lq, const float* lq_other, int k,
                     int rows, RowScores& out) {
  constexpr int R = kScoreRows;
  const Columns col(k, rows);
  bool need_q = false;  // 1 − Σq is needed only for rows whose candidate tail mass is unknown
  for (int r = 0; r < rows; ++r) need_q |= std::isnan(lq_other[r]);
  // Sums over the k ids in f32, per lane: two accumulators each (even and odd j) for KL and δ, which
  // halves the rounding chain. δ is taken relative to δ_0 (the variance does not change; the normalisation
  // shift between the two rows no longer cancels in Σδ² − (Σδ)²/k). Padded rows: p = q = δ = 0.
  V16f kl0{}, kl1{}, mass{}, q0{}, q1{}, e0{}, e1{}, s0{}, s1{};
  const V16f a0 = col.get(lp, 0, -200.0f), b0 = col.get(lq, 0, -200.0f);
  const V16f shift = b0 - a0;
  std::memcpy(out.lp0, &a0, sizeof out.lp0);
  // Column j (its two gathers a, b) into the even (j even) or odd accumulators; the loop below takes j in
  // pairs (no branch on j). NeedQ as a template argument keeps the loop free of the test (and of spills).
  auto sums = [&](auto need_q_c) {
    constexpr bool kNeedQ = decltype(need_q_c)::value;
    auto column = [&](const V16f a, const V16f b, V16f& kl_acc, V16f& e_acc, V16f& s_acc, V16f& q_acc) {
      const V16f p = exp16_le0(a);
      const V16f dd = b - a;
      // p·(lp − lq) with 0·x = 0 (p = 0 where lp = −inf): zero δ by a bit mask, which stays branch-free.
      const V16f dk = reinterpret_cast<V16f>(reinterpret_cast<V16i>(dd) & (p > 0.0f));
      const V16f e = dd - shift;
      kl_acc -= p * dk;
      e_acc += e;
      s_acc += e * e;
      mass += p;
      if constexpr (kNeedQ) q_acc += exp16(b);
      // No separate test for a δ that is ±inf or NaN: it makes Σe or Σe² ±inf or NaN (nothing brings a
      // sum back from ±inf), and then the variance below is NaN (inf − inf or NaN), as it must be.
    };
    int j = 0;
    if (k >= 2) {
      const V16f a1 = col.get(lp, 1, -200.0f);
      std::memcpy(out.lp1, &a1, sizeof out.lp1);
      column(a0, b0, kl0, e0, s0, q0);
      column(a1, col.get(lq, 1, -200.0f), kl1, e1, s1, q1);
      j = 2;
    }
    for (; j + 1 < k; j += 2) {
      column(col.get(lp, j, -200.0f), col.get(lq, j, -200.0f), kl0, e0, s0, q0);
      column(col.get(lp, j + 1, -200.0f), col.get(lq, j + 1, -200.0f), kl1, e1, s1, q1);
    }
    if (j < k) {
      if (j == 0)
        column(a0, b0, kl0, e0, s0, q0);
      else
        column(col.get(lp, j, -200.0f), col.get(lq, j, -200.0f), kl0, e0, s0, q0);
    }
  };
  if (k < 2) std::fill(out.lp1, out.lp1 + R, NAN);  // no second log-prob
  if (need_q)
    sums(std::true_type{});
  else
    sums(std::false_type{});
  // The f64 part on all 16 lanes in plain loops (vectorised; padded rows repeat row 0's tail masses).
  alignas(64) float k0[R], k1[R], ms[R], se0[R], se1[R], ss0[R], ss1[R];
  std::memcpy(k0, &kl0, sizeof k0);
  std::memcpy(k1, &kl1, sizeof k1);
  std::memcpy(ms, &mass, sizeof ms);
  std::memcpy(se0, &e0, sizeof se0);
  std::memcpy(se1, &e1, sizeof se1);
  std::memcpy(ss0, &s0, sizeof ss0);
  std::memcpy(ss1, &s1, sizeof ss1);
  alignas(64) double lpo[R], lqo[R];
  for (int r = 0; r < R; ++r) {
    lpo[r] = lp_other[r < rows ? r : 0];
    lqo[r] = lq_other[r < rows ? r : 0];
  }
  // Every value computed unconditionally and then selected: GCC if-converts only selects of computed values
  // (it will not speculate a floating-point operation out of a branch), so the loop stays vectorised.
  const double kk = k;
  const bool var_ok = k >= 2;
  for (int r = 0; r < R; ++r) {
    const double p_o = fastmath::exp_f64(lpo[r]);
    const double other = p_o * (lpo[r] - lqo[r]);
    out.kl[r] = (static_cast<double>(k0[r]) + static_cast<double>(k1[r])) + (p_o > 0 ? other : 0.0);
    out.mass[r] = ms[r];
    const double sd = static_cast<double>(se0[r]) + static_cast<double>(se1[r]);
    const double sd2 = static_cast<double>(ss0[r]) + static_cast<double>(ss1[r]);
    const double v = (sd2 - sd * sd / kk) / (kk - 1);
    const double v0 = v < 0 ? 0.0 : v;
    out.sigma2[r] = var_ok ? v0 : NAN;
    out.q_other_clamped[r] = false;
  }
  if (!need_q) return;
  for (int r = 0; r < rows; ++r) {
    if (!std::isnan(lq_other[r])) continue;
    // Unknown candidate tail: 1 − Σq, clamped at the resolution of that difference.
    double q_o = 1.0 - (static_cast<double>(q0[r]) + static_cast<double>(q1[r])), floor = q_other_floor(k);
    if (!(q_o >= floor) && !std::isnan(q_o)) {
      out.q_other_clamped[r] = true;
      q_o = floor;
    }
    const double p_o = fastmath::exp_f64(lpo[r]);
    out.kl[r] =
        (static_cast<double>(k0[r]) + static_cast<double>(k1[r])) + other_term(p_o, lpo[r], std::log(q_o));
  }
}

PositionScore score_topk(const float* lp, float lp_other, const float* lq, float lq_other,
                         const std::uint8_t* covered, int k) {
  PositionScore s;
  if (!covered) {
    RowScores rs;
    score_topk_rows(lp, &lp_other, lq, &lq_other, k, 1, rs);
    s.kl = s.kl_upper = rs.kl[0];
    s.covered = k;
    s.mass = s.mass_covered = rs.mass[0];
    s.sigma2 = rs.sigma2[0];
    s.q_other_clamped = rs.q_other_clamped[0];
    return s;
  }
  double p_o = fastmath::exp_f64(static_cast<double>(lp_other));
  // Partial coverage: missing ids join the other bucket on both sides.
  double kl = 0, mass = 0, mass_cov = 0, sum_q = 0, sum_d = 0, sum_d2 = 0;
  double missing_p = 0;
  int n_cov = 0;
  bool nonfinite = false;
  for (int j = 0; j < k; ++j) {
    double p = std::exp(static_cast<double>(lp[j]));
    mass += p;
    if (!covered[j]) {
      missing_p += p;
      continue;
    }
    double d = static_cast<double>(lq[j]) - static_cast<double>(lp[j]);
    kl += p > 0 ? p * -d : 0.0;
    mass_cov += p;
    sum_q += std::exp(static_cast<double>(lq[j]));
    sum_d += d;
    sum_d2 += d * d;
    nonfinite |= !std::isfinite(d);
    ++n_cov;
  }
  double p_o2 = p_o + missing_p;
  double lp_o2 = std::log(p_o2);
  double q_o = 1.0 - sum_q, floor = q_other_floor(k);
  if (!(q_o >= floor) && !std::isnan(q_o)) {
    s.q_other_clamped = true;
    q_o = floor;
  }
  kl += other_term(p_o2, lp_o2, std::log(q_o));
  s.kl = kl;
  s.kl_upper = missing_p > 0 ? std::numeric_limits<double>::infinity() : kl;
  s.covered = n_cov;
  s.mass = mass;
  s.mass_covered = mass_cov;
  if (n_cov >= 2 && !nonfinite) {
    double m = n_cov;
    s.sigma2 = std::max(0.0, (sum_d2 - sum_d * sum_d / m) / (m - 1));
  }
  return s;
}

namespace {

// Returns max and log Σ exp(x − max) in f64; NaN if any NaN.
void log_sum_exp(const float* x, std::size_t n, double& mx, double& lse) {
  float m = -INFINITY;
  bool nan = false;
  for (std::size_t i = 0; i < n; ++i) {
    nan |= std::isnan(x[i]);
    m = x[i] > m ? x[i] : m;
  }
  if (nan) {
    mx = lse = NAN;
    return;
  }
  mx = m;
  if (std::isinf(m)) {  // all −inf (no distribution) or a +inf logit: not a distribution
    lse = NAN;
    return;
  }
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += fastmath::exp_f64(static_cast<double>(x[i]) - mx);
  lse = mx + std::log(s);
}

}  // namespace

double full_vocab_kl(const float* ref, const float* cand, std::size_t v) {
  double mp, lp, mq, lq;
  log_sum_exp(ref, v, mp, lp);
  log_sum_exp(cand, v, mq, lq);
  if (std::isnan(lp) || std::isnan(lq)) return NAN;
  double kl = 0;
  for (std::size_t i = 0; i < v; ++i) {
    double a = static_cast<double>(ref[i]) - lp;
    double b = static_cast<double>(cand[i]) - lq;
    double p = fastmath::exp_f64(a);
    kl += p > 0 ? p * (a - b) : 0.0;
  }
  return kl;
}

}  // namespace kc
