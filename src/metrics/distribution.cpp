#include "metrics/distribution.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "metrics/fastmath.h"

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

// Eight independent f32 lane sums over blocks of 8 ids (kept out of line: inside score_topk's control flow
// GCC does not vectorise it).
struct Lanes {
  static constexpr int B = 8;
  alignas(32) float kl[B] = {}, mass[B] = {}, q[B] = {}, d[B] = {}, d2[B] = {};
  alignas(32) std::int32_t bad[B] = {};
  [[gnu::noinline]] void add(const float* __restrict a, const float* __restrict b) {
    for (int l = 0; l < B; ++l) {
      const float p = fastmath::exp_f32(a[l]);
      const float qq = fastmath::exp_f32(b[l]);
      const float dd = b[l] - a[l];
      // p·(lp − lq) with 0·x = 0 (p = 0 where lp = −inf): zero δ by a bit mask, which stays branch-free.
      const float dk =
          std::bit_cast<float>(std::bit_cast<std::int32_t>(dd) & -static_cast<std::int32_t>(p > 0.0f));
      kl[l] -= p * dk;
      mass[l] += p;
      q[l] += qq;
      d[l] += dd;
      d2[l] += dd * dd;
      bad[l] |= static_cast<std::int32_t>(dd - dd != dd - dd);  // δ is ±inf or NaN
    }
  }
};

}  // namespace

PositionScore score_topk(const float* lp, float lp_other, const float* lq, float lq_other,
                         const std::uint8_t* covered, int k) {
  PositionScore s;
  double p_o = fastmath::exp_f64(static_cast<double>(lp_other));
  if (!covered) {
    // Fast path (every id covered): blocks of 8 ids, element-wise f32 exp and 8
    // independent f32 lane sums (≤ 512 terms each for k ≤ 4096), added up in f64 in a fixed order: the
    // compiler vectorises it without reassociating, so the result does not depend on the build.
    constexpr int B = Lanes::B;
    Lanes lanes;
    for (int j0 = 0; j0 < k; j0 += B) {
      const int m = k - j0 < B ? k - j0 : B;
      if (m == B) {
        lanes.add(lp + j0, lq + j0);
        continue;
      }
      // The last, partial block, padded with equal finite log-probs far below exp's range: p = q = 0 and
      // δ = 0, so no masks are needed.
      alignas(32) float a[B], b[B];
      for (int l = 0; l < B; ++l) {
        a[l] = l < m ? lp[j0 + l] : -200.0f;
        b[l] = l < m ? lq[j0 + l] : -200.0f;
      }
      lanes.add(a, b);
    }
    double kl = 0, mass = 0, sum_q = 0, sum_d = 0, sum_d2 = 0;
    bool nonfinite = false;
    for (int l = 0; l < B; ++l) {
      kl += lanes.kl[l];
      mass += lanes.mass[l];
      sum_q += lanes.q[l];
      sum_d += lanes.d[l];
      sum_d2 += lanes.d2[l];
      nonfinite |= lanes.bad[l] != 0;
    }
    double ln_q_o;
    if (!std::isnan(lq_other)) {
      ln_q_o = lq_other;
    } else {
      double q_o = 1.0 - sum_q, floor = q_other_floor(k);
      if (!(q_o >= floor)) {
        if (!std::isnan(q_o)) s.q_other_clamped = true;
        q_o = std::isnan(q_o) ? q_o : floor;
      }
      ln_q_o = std::log(q_o);
    }
    kl += other_term(p_o, lp_other, ln_q_o);
    s.kl = s.kl_upper = kl;
    s.covered = k;
    s.mass = s.mass_covered = mass;
    if (k >= 2 && !nonfinite) {
      double kk = k;
      s.sigma2 = (sum_d2 - sum_d * sum_d / kk) / (kk - 1);
      if (s.sigma2 < 0) s.sigma2 = 0;
    }
    return s;
  }
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
