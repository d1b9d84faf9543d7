// Statistics the judge needs: compensated sums, the normal distribution, binomial confidence intervals,
// the one-sided Fisher exact test and Holm's step-down correction. Plain functions, no state.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace kc {

// Sum in double-double (Knuth TwoSum): error ~1e-32 relative, so a sum merged from shards and a
// single-pass sum round to the same double except in pathological cases. Mergeable, order-insensitive to
// the last bit of a double in practice.
struct ExactSum {
  double hi = 0.0, lo = 0.0;
  void add(double x) {
    double s = hi + x;
    double bp = s - hi;
    double err = (hi - (s - bp)) + (x - bp);
    hi = s;
    lo += err;
  }
  void merge(const ExactSum& o) {
    add(o.hi);
    add(o.lo);
  }
  double value() const { return hi + lo; }
};

// Φ(x) and Φ⁻¹(p) (Acklam's rational approximation refined by one Halley step: ~1e-15 absolute).
double normal_cdf(double x);
double normal_quantile(double p);

// Student's t distribution with df > 0 degrees of freedom (df = +inf: the normal). The CDF is the
// regularized incomplete beta (Lentz's continued fraction, ~1e-14); the quantile inverts it by bisection.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// Wilson score interval for k successes in n trials at two-sided confidence 1 − alpha. n = 0 → [0, 1].
std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double alpha = 0.05);

// One-sided Fisher exact test, H1: rate1 = k1/n1 is greater than rate2 = k2/n2.
// Returns P(X ≥ k1) for X hypergeometric(N = n1 + n2, K = k1 + k2, draws n1). 1 when k1 = 0.
double fisher_greater(std::uint64_t k1, std::uint64_t n1, std::uint64_t k2, std::uint64_t n2);

// Holm–Bonferroni: which of the hypotheses with these p-values are rejected at family-wise level alpha.
std::vector<bool> holm_reject(std::span<const double> p_values, double alpha);

// Linear-interpolated quantile of sorted values (numpy.percentile's default "linear" method), q in [0, 1].
double sorted_quantile(std::span<const float> sorted, double q);

}  // namespace kc
