// The one exp of kerncheck's hot loops: Cephes' expf (Cody–Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2,
// ln2 in two parts; degree-6 minimax polynomial for e^r; scaling by 2^n through the exponent bits), branch-
// free so that loops over it vectorise (std::exp is a scalar libm call, and does not vectorise without
// -ffast-math). exp_core holds the arithmetic once, for a scalar float or a GCC vector of floats; the entry
// points differ only in how its multiply-adds round and in the range they clamp to:
//   exp_fma (the engine: softmax, SiLU, GDN decays): every multiply-add an explicit fma, so the vector body
//     and the scalar tail of a loop give the same bits. Relative error < 1e-7 (measured 8.2e-8); exp_fma(0)
//     = 1 exactly; x < -87.34 gives 0 (the true value is subnormal), x > 88.37 gives +inf (exp(88.37 … 88.72)
//     is finite: not reached by the engine's uses, arguments ≤ 0 and silu's exp(-g)); NaN gives NaN.
//   exp_f32 (metrics: exp of log-probs and of logit − max, both ≤ 0): separately rounded multiply and add
//     (fp-contract is off: -std=c++20), ~2 ulp on [-87, 88]; below -87.3 it returns 0, above 88 +inf; NaN
//     propagates. distribution.cpp runs exp_core<false> on 16-lane vectors: the same bits as exp_f32.
// exp_f64: the same reduction in f64 with a degree-12 Taylor series, ~2 ulp of f64 on [-708, 709]; below
// -708 it returns 0, above 709 +inf; NaN propagates.
// Tested against f64 exp and its scalar/vector twins in tests/numeric/fastmath_test.cpp.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kc::fastmath {

// 2^n · e^r for xc already clamped to the finite range. F: float or a GCC vector of floats, I: the matching
// int32 type. Fused: fma for every multiply-add (scalar float only).
template <bool Fused, class F, class I>
inline F exp_core(F xc) {
  static_assert(!Fused || std::is_same_v<F, float>, "fused exp_core is scalar");
  auto madd = [](F a, F b, F c) -> F {
    if constexpr (Fused)
      return std::fma(a, b, c);
    else
      return a * b + c;
  };
  constexpr float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer held in the low bits
  const F t = madd(xc, F{} + 1.44269504088896341f, F{} + kRound);  // t = n + kRound, n = round(x / ln 2)
  const F fn = t - kRound;
  F r = madd(fn, F{} - 0.693359375f, xc);  // r = x − n·ln 2, ln 2 in a short part (exact product) and a small one
  r = madd(fn, F{} + 2.12194440e-4f, r);
  F p = F{} + 1.9875691500e-4f;
  p = madd(p, r, F{} + 1.3981999507e-3f);
  p = madd(p, r, F{} + 8.3334519073e-3f);
  p = madd(p, r, F{} + 4.1665795894e-2f);
  p = madd(p, r, F{} + 1.6666665459e-1f);
  p = madd(p, r, F{} + 5.0000001201e-1f);
  if constexpr (Fused)
    p = std::fma(p, r * r, r) + 1.0f;
  else
    p = p * r * r + r + 1.0f;
  const I n = std::bit_cast<I>(t) - std::bit_cast<std::int32_t>(kRound);  // n ∈ [-126, 127]
  return p * std::bit_cast<F>((n + 127) << 23);
}

inline float exp_fma(float x) {
  constexpr float kHi = 88.3762626647949f, kLo = -87.3365402221680f;
  const float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  const float y = exp_core<true, float, std::int32_t>(xc);
  return x < kLo ? 0.0f : (x > kHi ? INFINITY : y);
}

inline constexpr float kExpF32Hi = 88.0f, kExpF32Lo = -87.3f;  // exp_f32's range (also distribution.cpp's)

inline float exp_f32(float x) {
  const float xc = x < kExpF32Lo ? kExpF32Lo : (x > kExpF32Hi ? kExpF32Hi : x);
  float y = exp_core<false, float, std::int32_t>(xc);
  y = x < kExpF32Lo ? 0.0f : y;
  y = x > kExpF32Hi ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

inline double exp_f64(double x) {
  const double hi = 709.0, lo = -708.0;
  double xc = x < lo ? lo : (x > hi ? hi : x);
  const double magic = 6755399441055744.0;  // 1.5·2^52
  double t = xc * 1.4426950408889634 + magic;
  double n = t - magic;
  double r = xc - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  // Taylor series to degree 12 on |r| ≤ 0.347: truncation error < 1e-17 relative.
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r * r + r + 1.0;
  std::int64_t ni = static_cast<std::int64_t>(n);
  double scale = std::bit_cast<double>((ni + 1023) << 52);
  double y = p * scale;
  y = x < lo ? 0.0 : y;
  y = x > hi ? std::numeric_limits<double>::infinity() : y;
  return x != x ? x : y;
}

}  // namespace kc::fastmath
