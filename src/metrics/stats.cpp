#include "metrics/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kc {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

double normal_quantile(double p) {
  if (!(p > 0.0)) return -INFINITY;
  if (!(p < 1.0)) return INFINITY;
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double plow = 0.02425;
  double x;
  if (p < plow) {
    double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - plow) {
    double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Φ(x) − p.
  double e = normal_cdf(x) - p;
  double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

std::pair<double, double> wilson_interval(std::uint64_t k, std::uint64_t n, double alpha) {
  if (n == 0) return {0.0, 1.0};
  double z = normal_quantile(1 - alpha / 2);
  double nn = static_cast<double>(n), ph = static_cast<double>(k) / nn, z2 = z * z;
  double denom = 1 + z2 / nn;
  double center = (ph + z2 / (2 * nn)) / denom;
  double half = z * std::sqrt(ph * (1 - ph) / nn + z2 / (4 * nn * nn)) / denom;
  // Exact ends at k = 0 and k = n (the formula gives them only up to rounding).
  return {k == 0 ? 0.0 : std::max(0.0, center - half), k == n ? 1.0 : std::min(1.0, center + half)};
}

namespace {
double log_choose(double n, double k) {
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}
}  // namespace

double fisher_greater(std::uint64_t k1, std::uint64_t n1, std::uint64_t k2, std::uint64_t n2) {
  if (k1 == 0) return 1.0;
  double N = static_cast<double>(n1) + static_cast<double>(n2);
  double K = static_cast<double>(k1) + static_cast<double>(k2);
  double n = static_cast<double>(n1);
  double x = static_cast<double>(k1);
  double x_max = std::min(K, n);
  // log pmf at x, then walk up with the ratio pmf(x+1)/pmf(x) = (K−x)(n−x) / ((x+1)(N−K−n+x+1)).
  double lp = log_choose(K, x) + log_choose(N - K, n - x) - log_choose(N, n);
  double first = lp, sum = 1.0;  // sum of exp(lp − first)
  for (double y = x; y < x_max; y += 1) {
    lp += std::log((K - y) * (n - y)) - std::log((y + 1) * (N - K - n + y + 1));
    double t = std::exp(lp - first);
    sum += t;
    if (t < 1e-17 * sum && lp < first) break;  // past the mode and negligible
  }
  return std::min(1.0, std::exp(first) * sum);
}

namespace {
// Continued fraction of the regularized incomplete beta I_x(a, b) (Numerical Recipes' betacf, Lentz).
double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300;
  double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return h;
}
double inc_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double lbt = std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1) / (a + b + 2)) return std::exp(lbt) * beta_cf(a, b, x) / a;
  return 1 - std::exp(lbt) * beta_cf(b, a, 1 - x) / b;
}
}  // namespace

double student_t_cdf(double t, double df) {
  if (std::isnan(t) || !(df > 0)) return NAN;
  if (std::isinf(df) || df > 1e7) return normal_cdf(t);
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * inc_beta(0.5 * df, 0.5, df / (df + t * t));  // P(T > |t|)
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0.0)) return -INFINITY;
  if (!(p < 1.0)) return INFINITY;
  if (!(df > 0)) return NAN;
  if (std::isinf(df) || df > 1e7) return normal_quantile(p);
  double lo = -1, hi = 1;
  while (student_t_cdf(lo, df) > p) lo *= 2;
  while (student_t_cdf(hi, df) < p) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * std::max(1.0, std::fabs(lo)); ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<bool> holm_reject(std::span<const double> p, double alpha) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] < p[b]; });
  std::vector<bool> rej(p.size(), false);
  const double m = static_cast<double>(p.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (p[order[i]] > alpha / (m - static_cast<double>(i))) break;
    rej[order[i]] = true;
  }
  return rej;
}

double sorted_quantile(std::span<const float> v, double q) {
  if (v.empty()) return NAN;
  double h = q * static_cast<double>(v.size() - 1);
  std::size_t lo = static_cast<std::size_t>(std::floor(h));
  std::size_t hi = std::min(lo + 1, v.size() - 1);
  double a = v[lo], b = v[hi];
  return a + (h - static_cast<double>(lo)) * (b - a);
}

}  // namespace kc
