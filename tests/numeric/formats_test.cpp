// Numeric formats: codecs, rounding, ulp, bulk paths. Exhaustive cross-checks against ml_dtypes, en_dtypes
// and numpy live in tests/py/test_numeric.py; here the properties that need no oracle (round trips, ties,
// saturation, carries) and the scalar twins of every fast path.
#include "numeric/formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "numeric/dtype.h"

namespace kc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr DType kSmallFloats[] = {DType::float8_e4m3fn, DType::float8_e5m2, DType::hifloat8,
                                  DType::float8_e8m0, DType::float4_e2m1};

int ncodes(DType d) { return d == DType::float4_e2m1 ? 16 : 256; }

// Canonical NaN code that encode gives for a NaN of the given sign (see formats.h).
int nan_code(DType d, bool neg) {
  switch (d) {
    case DType::float8_e4m3fn:
      return neg ? 0xFF : 0x7F;
    case DType::float8_e5m2:
      return neg ? 0xFE : 0x7E;
    case DType::hifloat8:
      return 0x80;
    case DType::float8_e8m0:
      return 0xFF;
    default:
      return 0x0;  // float4_e2m1: NaN → +0
  }
}

// ---- dtype table ------------------------------------------------------------------------------------

TEST(DType, CanonicalNamesParseToThemselves) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto d = static_cast<DType>(i);
    ASSERT_EQ(dtype_info(d).dtype, d);
    auto p = parse_dtype(dtype_name(d));
    ASSERT_TRUE(p.has_value()) << dtype_name(d);
    EXPECT_EQ(*p, d);
  }
}

TEST(DType, AliasesAreCaseInsensitive) {
  const std::pair<const char*, DType> cases[] = {
      {"F32", DType::float32},
      {"fp32", DType::float32},
      {"float", DType::float32},
      {"Half", DType::float16},
      {"BF16", DType::bfloat16},
      {"e4m3", DType::float8_e4m3fn},
      {"FP8_E4M3", DType::float8_e4m3fn},
      {"F8_E5M2", DType::float8_e5m2},
      {"hif8", DType::hifloat8},
      {"HiFloat8", DType::hifloat8},
      {"float8_e8m0fnu", DType::float8_e8m0},
      {"e8m0", DType::float8_e8m0},
      {"fp4", DType::float4_e2m1},
      {"float4_e2m1fn", DType::float4_e2m1},
      {"e2m1", DType::float4_e2m1},
      {"hif32", DType::hifloat32},
      {"i4", DType::int4},
      {"i64", DType::int64},
      {"U8", DType::uint8},
      {"u64", DType::uint64},
      {"bool", DType::boolean},
      {"c32", DType::complex32},
      {"complex32", DType::complex32},
      {"c128", DType::complex128},
      {"torch.bfloat16", DType::bfloat16},
      {"np.float64", DType::float64},
      {"f64", DType::float64},
  };
  for (const auto& [name, d] : cases) {
    auto p = parse_dtype(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(*p, d) << name;
  }
  EXPECT_FALSE(parse_dtype("float7").has_value());
  EXPECT_FALSE(parse_dtype("").has_value());
  EXPECT_NE(dtype_names_list().find("float8_e8m0 ("), std::string::npos);
}

TEST(DType, StorageAndDescr) {
  EXPECT_EQ(storage_bytes(DType::float4_e2m1, 0), 0u);
  EXPECT_EQ(storage_bytes(DType::float4_e2m1, 5), 3u);
  EXPECT_EQ(storage_bytes(DType::int4, 6), 3u);
  EXPECT_EQ(storage_bytes(DType::complex32, 3), 12u);
  EXPECT_EQ(storage_bytes(DType::complex128, 3), 48u);
  EXPECT_EQ(storage_bytes(DType::boolean, 7), 7u);
  EXPECT_STREQ(dtype_info(DType::float16).numpy_descr, "<f2");
  EXPECT_STREQ(dtype_info(DType::int8).numpy_descr, "|i1");
  EXPECT_STREQ(dtype_info(DType::boolean).numpy_descr, "|b1");
  EXPECT_STREQ(dtype_info(DType::complex64).numpy_descr, "<c8");
  EXPECT_EQ(dtype_info(DType::bfloat16).numpy_descr, nullptr);
  EXPECT_EQ(dtype_info(DType::complex32).numpy_descr, nullptr);
  EXPECT_TRUE(is_packed4(DType::int4));
  EXPECT_TRUE(is_float(DType::hifloat8));
  EXPECT_TRUE(is_complex(DType::complex32));
  EXPECT_FALSE(dtype_info(DType::float8_e8m0).is_signed);
}

// ---- round trips ------------------------------------------------------------------------------------

TEST(Formats, EverySmallCodeRoundTrips) {
  for (DType d : kSmallFloats) {
    for (int c = 0; c < ncodes(d); ++c) {
      const double v = decode8(d, static_cast<std::uint8_t>(c));
      const bool neg = std::signbit(v);
      const int want = std::isnan(v) ? nan_code(d, neg) : c;
      EXPECT_EQ(encode8(d, v), want) << dtype_name(d) << " code " << c << " value " << v;
      // Clamp changes nothing for representable values (inf stays inf where the format has it).
      if (!std::isnan(v)) {
        EXPECT_EQ(encode8(d, v, Saturation::clamp), c) << dtype_name(d) << " code " << c;
      }
    }
  }
}

TEST(Formats, Every16BitCodeRoundTrips) {
  for (int c = 0; c < 65536; ++c) {
    const auto h = static_cast<std::uint16_t>(c);
    const double f = f16_to_f32(h);
    const double b = bf16_to_f32(h);
    const std::uint16_t sign = h & 0x8000;
    EXPECT_EQ(f32_to_f16(f), std::isnan(f) ? (sign | 0x7E00) : h) << c;
    EXPECT_EQ(f32_to_bf16(b), std::isnan(b) ? (sign | 0x7FC0) : h) << c;
  }
}

// f16 decode against the textbook formula (the F16C path and the table must agree with it).
TEST(Formats, Float16DecodeMatchesFormula) {
  for (int c = 0; c < 65536; ++c) {
    const int E = (c >> 10) & 31, m = c & 1023;
    double v = E == 31 ? (m ? kNaN : kInf) : E == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, E - 25);
    if (c & 0x8000) v = -v;
    const double got = f16_to_f32(static_cast<std::uint16_t>(c));
    if (std::isnan(v))
      EXPECT_TRUE(std::isnan(got)) << c;
    else
      EXPECT_EQ(got, v) << c;
  }
}

// ---- rounding: ties, once-only rounding from f64 ----------------------------------------------------

struct Point {
  double value;
  int code;
};

std::vector<Point> code_line(DType d) {
  std::vector<Point> pts;
  for (int c = 0; c < ncodes(d); ++c) {
    const double v = decode8(d, static_cast<std::uint8_t>(c));
    if (std::isfinite(v) && !std::signbit(v)) pts.push_back({v, c});
  }
  std::sort(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.value < b.value; });
  return pts;
}

TEST(Formats, MidpointsGoToEvenOrAway) {
  for (DType d : kSmallFloats) {
    const auto pts = code_line(d);
    for (std::size_t i = 0; i + 1 < pts.size(); ++i) {
      const Point lo = pts[i], hi = pts[i + 1];
      const double mid = (lo.value + hi.value) / 2;  // exact: one more bit than the format
      int want;
      if (d == DType::hifloat8 || d == DType::float8_e8m0)
        want = hi.code;  // half away from zero; e8m0 ties up
      else
        want = (lo.code & 1) == 0 ? lo.code : hi.code;  // even mantissa
      EXPECT_EQ(encode8(d, mid), want) << dtype_name(d) << " mid " << mid;
      EXPECT_EQ(encode8(d, std::nextafter(mid, kInf)), hi.code) << dtype_name(d) << " above " << mid;
      EXPECT_EQ(encode8(d, std::nextafter(mid, 0.0)), lo.code) << dtype_name(d) << " below " << mid;
      if (d != DType::float8_e8m0) {  // negatives mirror (hifloat8 has no -0: a zero code stays 0x00)
        const int sign = d == DType::float4_e2m1 ? 0x8 : 0x80;
        const int neg_want = (want == 0 && d == DType::hifloat8) ? 0 : (want | sign);
        EXPECT_EQ(encode8(d, -mid), neg_want) << dtype_name(d) << " -mid " << mid;
      }
    }
  }
}

TEST(Formats, RoundsOnceFromDouble) {
  // 1 + 2^-4 + 2^-40: just above the e4m3 midpoint of 1 and 1.125. Through f32 it would become the
  // midpoint and then round to even (1.0); rounding once gives 1.125.
  EXPECT_EQ(decode8(DType::float8_e4m3fn, encode8(DType::float8_e4m3fn, 1.0625 + std::ldexp(1, -40))), 1.125);
  EXPECT_EQ(decode8(DType::float8_e5m2, encode8(DType::float8_e5m2, 1.125 + std::ldexp(1, -40))), 1.25);
  EXPECT_EQ(f16_to_f32(f32_to_f16(1 + std::ldexp(1, -11) + std::ldexp(1, -40))), 1 + std::ldexp(1, -10));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1 + std::ldexp(1, -8) + std::ldexp(1, -40))), 1 + std::ldexp(1, -7));
  EXPECT_EQ(to_hifloat32(1 + std::ldexp(1, -12) + std::ldexp(1, -40)), 1 + std::ldexp(1, -11));
  EXPECT_EQ(decode8(DType::float8_e8m0, encode8(DType::float8_e8m0, 1.5 - std::ldexp(1, -40))), 1.0);
  // Far below the f32 range: still the nearest e8m0 value (2^-127), not NaN.
  EXPECT_EQ(encode8(DType::float8_e8m0, 1e-300), 0x00);
}

TEST(Formats, SubnormalsAndZeros) {
  EXPECT_EQ(encode8(DType::float8_e4m3fn, std::ldexp(1, -10)), 0x00);                     // tie → even 0
  EXPECT_EQ(encode8(DType::float8_e4m3fn, std::nextafter(std::ldexp(1, -10), 1)), 0x01);  // 2^-9
  EXPECT_EQ(encode8(DType::float8_e4m3fn, -0.0), 0x80);
  EXPECT_EQ(encode8(DType::float8_e5m2, std::ldexp(3, -17)), 0x02);  // 1.5 quanta → even 2
  EXPECT_EQ(encode8(DType::hifloat8, std::ldexp(1, -23)), 0x01);     // half of 2^-22, away from 0
  EXPECT_EQ(encode8(DType::hifloat8, -std::ldexp(1, -24)), 0x00);    // no -0
  EXPECT_EQ(encode8(DType::hifloat8, -0.0), 0x00);
  EXPECT_EQ(encode8(DType::float4_e2m1, 0.25), 0x0);   // tie → even 0
  EXPECT_EQ(encode8(DType::float4_e2m1, -0.75), 0xA);  // tie 0.5|1 → 1 (even)
  EXPECT_EQ(f32_to_f16(std::ldexp(1, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::nextafter(std::ldexp(1, -25), 1)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5, -24)), 0x0400);  // carry from subnormal into the smallest normal
  EXPECT_EQ(f32_to_bf16(std::ldexp(1, -140)), 0x0000);
  EXPECT_EQ(f32_to_bf16(std::ldexp(3, -134)), 0x0002);  // 1.5 quanta of 2^-133 → even 2
  EXPECT_EQ(encode8(DType::float8_e8m0, 0.0), 0xFF);
  EXPECT_EQ(encode8(DType::float8_e8m0, -4.0), 0xFF);
  EXPECT_EQ(encode8(DType::float8_e8m0, std::ldexp(1, -140)), 0x00);
}

// hifloat8 between 2^-16 (0x07, the largest denormal) and 2^-15 (0x7E): the midpoint 1.5·2^-16 ties away.
TEST(Formats, HiFloat8DenormalToNormalEdge) {
  EXPECT_EQ(decode8(DType::hifloat8, 0x07), std::ldexp(1, -16));
  EXPECT_EQ(decode8(DType::hifloat8, 0x7E), std::ldexp(1, -15));
  EXPECT_EQ(encode8(DType::hifloat8, std::ldexp(1.5, -16)), 0x7E);
  EXPECT_EQ(encode8(DType::hifloat8, std::nextafter(std::ldexp(1.5, -16), 0)), 0x07);
}

// ---- saturation ---------------------------------------------------------------------------------------

TEST(Formats, Saturation) {
  using S = Saturation;
  const auto e4 = DType::float8_e4m3fn, e5 = DType::float8_e5m2, h8 = DType::hifloat8,
             e8 = DType::float8_e8m0, f4 = DType::float4_e2m1;
  EXPECT_EQ(encode8(e4, 464.0), 0x7E);  // midpoint 448|480 → even 448
  EXPECT_EQ(encode8(e4, std::nextafter(464.0, kInf)), 0x7F);
  EXPECT_EQ(encode8(e4, std::nextafter(464.0, kInf), S::clamp), 0x7E);
  EXPECT_EQ(encode8(e4, -1e30), 0xFF);
  EXPECT_EQ(encode8(e4, -1e30, S::clamp), 0xFE);
  EXPECT_EQ(encode8(e4, kInf), 0x7F);
  EXPECT_EQ(encode8(e4, -kInf, S::clamp), 0xFE);
  EXPECT_EQ(encode8(e5, 61440.0), 0x7C);  // midpoint 57344|65536 → even = inf
  EXPECT_EQ(encode8(e5, std::nextafter(61440.0, 0)), 0x7B);
  EXPECT_EQ(encode8(e5, 61440.0, S::clamp), 0x7B);
  EXPECT_EQ(encode8(e5, kInf, S::clamp), 0x7C);  // inf input stays inf
  EXPECT_EQ(encode8(e5, -1e300, S::clamp), 0xFB);
  EXPECT_EQ(encode8(h8, 40960.0), 0x6F);  // midpoint 32768|49152 → away = inf
  EXPECT_EQ(encode8(h8, std::nextafter(40960.0, 0)), 0x6E);
  EXPECT_EQ(encode8(h8, -40960.0, S::clamp), 0xEE);
  EXPECT_EQ(encode8(h8, -kInf, S::clamp), 0xEF);
  EXPECT_EQ(encode8(h8, kNaN), 0x80);
  EXPECT_EQ(encode8(e8, std::ldexp(1.5, 127)), 0xFF);
  EXPECT_EQ(encode8(e8, std::nextafter(std::ldexp(1.5, 127), 0)), 0xFE);
  EXPECT_EQ(encode8(e8, std::ldexp(1.5, 127), S::clamp), 0xFE);
  EXPECT_EQ(encode8(e8, kInf, S::clamp), 0xFE);
  EXPECT_EQ(encode8(f4, 1e30), 0x7);  // no inf: always clamps
  EXPECT_EQ(encode8(f4, -kInf), 0xF);
  EXPECT_EQ(encode8(f4, kNaN), 0x0);
  EXPECT_EQ(f32_to_f16(65520.0), 0x7C00);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0, 0)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(-65520.0, S::clamp), 0xFBFF);
  EXPECT_EQ(f32_to_f16(kInf, S::clamp), 0x7C00);
  const double bf_max = max_finite(DType::bfloat16);
  EXPECT_EQ(f32_to_bf16(bf_max + ulp(DType::bfloat16, bf_max) / 2), 0x7F80);
  EXPECT_EQ(f32_to_bf16(1e300, S::clamp), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(-kNaN), 0xFFC0);
  EXPECT_TRUE(std::isinf(to_hifloat32(1e39)));
  std::vector<double> big = {1e39, -1e39, kInf};
  std::vector<std::uint8_t> out(12);
  encode_block(DType::hifloat32, big.data(), 3, out.data(), S::clamp);
  float f[3];
  std::memcpy(f, out.data(), 12);
  EXPECT_EQ(f[0], static_cast<float>(max_finite(DType::hifloat32)));
  EXPECT_EQ(f[1], -static_cast<float>(max_finite(DType::hifloat32)));
  EXPECT_TRUE(std::isinf(f[2]));
  encode_block(DType::float32, big.data(), 3, out.data(), S::clamp);
  std::memcpy(f, out.data(), 12);
  EXPECT_EQ(f[0], FLT_MAX);
  EXPECT_TRUE(std::isinf(f[2]));
}

// ---- ulp and ranges -------------------------------------------------------------------------------

TEST(Formats, UlpAtRepresentativeValues) {
  const auto p = [](int e) { return std::ldexp(1.0, e); };
  EXPECT_EQ(ulp(DType::float32, 1.0), p(-23));
  EXPECT_EQ(ulp(DType::float32, -1.5), p(-23));
  EXPECT_EQ(ulp(DType::float32, 0.0), p(-149));
  EXPECT_EQ(ulp(DType::float32, 1e-40), p(-149));
  EXPECT_EQ(ulp(DType::float64, 1.0), p(-52));
  EXPECT_EQ(ulp(DType::float64, 0.0), p(-1074));
  EXPECT_EQ(ulp(DType::float16, 1.0), p(-10));
  EXPECT_EQ(ulp(DType::float16, 65504.0), 32.0);
  EXPECT_EQ(ulp(DType::float16, 1e6), 32.0);
  EXPECT_EQ(ulp(DType::float16, 0.0), p(-24));
  EXPECT_EQ(ulp(DType::bfloat16, 1.0), p(-7));
  EXPECT_EQ(ulp(DType::bfloat16, 3.0), p(-6));
  EXPECT_EQ(ulp(DType::hifloat32, 1.0), p(-11));
  EXPECT_EQ(ulp(DType::float8_e4m3fn, 1.0), 0.125);
  EXPECT_EQ(ulp(DType::float8_e4m3fn, 448.0), 32.0);
  EXPECT_EQ(ulp(DType::float8_e4m3fn, 0.0), p(-9));
  EXPECT_EQ(ulp(DType::float8_e5m2, 1.0), 0.25);
  EXPECT_EQ(ulp(DType::hifloat8, 1.0), 0.125);
  EXPECT_EQ(ulp(DType::hifloat8, 17.0), 4.0);        // between 16 and 20
  EXPECT_EQ(ulp(DType::hifloat8, 32768.0), 8192.0);  // last gap 24576 → 32768
  EXPECT_EQ(ulp(DType::hifloat8, p(-22)), p(-22));   // 2^-22 → 2^-21
  EXPECT_EQ(ulp(DType::hifloat8, 0.0), p(-22));
  EXPECT_EQ(ulp(DType::float8_e8m0, 1.0), 1.0);
  EXPECT_EQ(ulp(DType::float8_e8m0, 0.0), p(-127));
  EXPECT_EQ(ulp(DType::float4_e2m1, 6.0), 2.0);
  EXPECT_EQ(ulp(DType::float4_e2m1, -0.1), 0.5);
  EXPECT_EQ(ulp(DType::int8, 5.0), 1.0);
  EXPECT_EQ(ulp(DType::complex32, 1.0), p(-10));
  EXPECT_TRUE(std::isnan(ulp(DType::float32, kNaN)));
  EXPECT_TRUE(std::isnan(ulp(DType::float16, -kInf)));
}

// The formula-based ulp of f16 and bf16 equals the gap to the next code, at every finite code.
TEST(Formats, UlpEqualsNextCodeGap16) {
  for (int c = 0; c < 0x7BFF; ++c) {
    const double v = f16_to_f32(static_cast<std::uint16_t>(c));
    EXPECT_EQ(ulp(DType::float16, v), f16_to_f32(static_cast<std::uint16_t>(c + 1)) - v) << c;
    const double b = bf16_to_f32(static_cast<std::uint16_t>(c));
    EXPECT_EQ(ulp(DType::bfloat16, b), bf16_to_f32(static_cast<std::uint16_t>(c + 1)) - b) << c;
  }
}

TEST(Formats, RangesMatchTheCodeTables) {
  for (DType d : kSmallFloats) {
    const auto pts = code_line(d);
    EXPECT_EQ(max_finite(d), pts.back().value) << dtype_name(d);
    const double smallest = pts[0].value > 0 ? pts[0].value : pts[1].value;
    EXPECT_EQ(min_subnormal(d), smallest) << dtype_name(d);
  }
  EXPECT_EQ(max_finite(DType::float16), f16_to_f32(0x7BFF));
  EXPECT_EQ(min_normal(DType::float16), f16_to_f32(0x0400));
  EXPECT_EQ(min_subnormal(DType::bfloat16), bf16_to_f32(0x0001));
  EXPECT_EQ(max_finite(DType::bfloat16), bf16_to_f32(0x7F7F));
  EXPECT_EQ(max_finite(DType::hifloat32), round_mantissa(FLT_MAX, 11));
  EXPECT_EQ(min_normal(DType::hifloat8), decode8(DType::hifloat8, 0x7E));
}

// ---- round_mantissa ---------------------------------------------------------------------------------

// Reference by arithmetic, not bit patterns: scale so that the kept bits are the integer part, round half
// to even with nearbyint, scale back; clamp to the largest value with `bits` mantissa bits.
double ref_round(double x, int bits, int emin, int emax) {
  if (!std::isfinite(x) || x == 0) return x;
  const int e = std::max(std::ilogb(x), emin);
  const double q = std::ldexp(1.0, e - bits);
  double r = std::nearbyint(x / q) * q;
  const double maxv = std::ldexp(2.0 - std::ldexp(1.0, -bits), emax);
  if (std::fabs(r) > maxv) r = std::copysign(maxv, x);
  return r;
}

TEST(RoundMantissa, MatchesArithmeticReferenceFloat) {
  std::mt19937_64 rng(7);
  std::vector<float> xs;
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(rng());
    const float f = std::bit_cast<float>(u);
    if (std::isfinite(f)) xs.push_back(f);
  }
  for (float f : {1.0f, 1.5f, FLT_MAX, -FLT_MAX, FLT_MIN, 1e-45f, 3e-45f, 0.0f, -0.0f}) xs.push_back(f);
  for (int bits = 0; bits <= 23; ++bits) {
    for (float f : xs) {
      const double want = ref_round(f, bits, -126, 127);
      const float got = round_mantissa(f, bits);
      ASSERT_EQ(static_cast<double>(got), want) << "bits " << bits << " x " << f;
      ASSERT_EQ(std::signbit(got), std::signbit(f));
    }
  }
}

TEST(RoundMantissa, MatchesArithmeticReferenceDouble) {
  std::mt19937_64 rng(11);
  for (int bits = 0; bits <= 52; bits += 3) {
    for (int i = 0; i < 3000; ++i) {
      const double x = std::bit_cast<double>(rng());
      if (!std::isfinite(x)) continue;
      ASSERT_EQ(round_mantissa(x, bits), ref_round(x, bits, -1022, 1023)) << bits << " " << x;
    }
  }
}

TEST(RoundMantissa, Cases) {
  const auto p = [](int e) { return std::ldexp(1.0, e); };
  EXPECT_EQ(round_mantissa(1.0f + static_cast<float>(p(-8)), 7), 1.0f);  // tie → even
  EXPECT_EQ(round_mantissa(1.0f + static_cast<float>(3 * p(-8)), 7),
            1.0f + static_cast<float>(p(-6)));      // tie → even
  EXPECT_EQ(round_mantissa(1.9999999f, 10), 2.0f);  // carry into the exponent
  EXPECT_EQ(round_mantissa(FLT_MAX, 10), static_cast<float>(std::ldexp(2.0 - p(-10), 127)));  // clamp, no inf
  EXPECT_EQ(round_mantissa(-FLT_MAX, 0), -static_cast<float>(p(127)));
  EXPECT_EQ(round_mantissa(static_cast<float>(p(-148)), 22), static_cast<float>(p(-148)));  // quantum 2^-148
  EXPECT_EQ(round_mantissa(static_cast<float>(3 * p(-149)), 21), static_cast<float>(4 * p(-149)));
  EXPECT_EQ(round_mantissa(static_cast<float>(2 * p(-149)), 21), 0.0f);  // tie at the subnormal position
  EXPECT_TRUE(std::isnan(round_mantissa(std::numeric_limits<float>::quiet_NaN(), 3)));
  EXPECT_EQ(round_mantissa(-std::numeric_limits<float>::infinity(), 3),
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_mantissa(1.5, 0), 2.0);
  EXPECT_EQ(round_mantissa(3.0, 0), 2.0);  // ties to the even exponent
  const float odd = std::bit_cast<float>(0x3F8FFFFFu);
  EXPECT_EQ(round_mantissa(odd, 23), odd);
  EXPECT_EQ(round_mantissa(odd, 30), odd);
  EXPECT_EQ(round_mantissa(0.1, 52), 0.1);
  EXPECT_EQ(round_mantissa(0.1, 23), static_cast<double>(0.1f));  // same rounding as the f32 cast
  EXPECT_EQ(round_mantissa(0.1f, 7), bf16_to_f32(f32_to_bf16(0.1f)));
}

TEST(RoundMantissa, BulkMatchesScalar) {
  std::mt19937_64 rng(3);
  std::vector<float> xs(10007);
  for (auto& x : xs) x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));  // includes NaN/inf
  for (int bits : {0, 1, 5, 7, 10, 11, 16, 22, 23, 40}) {
    auto y = xs;
    round_mantissa_inplace(y.data(), y.size(), bits);
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const std::uint32_t want = std::bit_cast<std::uint32_t>(round_mantissa(xs[i], bits));
      ASSERT_EQ(std::bit_cast<std::uint32_t>(y[i]), want) << bits << " " << i;
    }
  }
}

TEST(Formats, HiFloat32IsRoundMantissa11WithInf) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_hifloat32(f)));
      continue;
    }
    // Overflow threshold: midpoint of max = (2 - 2^-11)·2^127 and 2^128; the tie goes to even (inf).
    const double thr = std::ldexp(2.0 - std::ldexp(1.0, -12), 127);
    const float want = std::fabs(f) >= thr ? std::copysign(std::numeric_limits<float>::infinity(), f)
                                           : round_mantissa(f, 11);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(to_hifloat32(f)), std::bit_cast<std::uint32_t>(want)) << f;
  }
}

// ---- bulk decode / encode: fast paths against scalar decoders -----------------------------------------

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

TEST(Bulk, DecodeBlockMatchesScalar) {
  const auto bytes_all = random_bytes(8 * 1000 + 1, 9);
  // Offset by one byte so that no load is aligned.
  const std::span<const std::uint8_t> bytes(bytes_all.data() + 1, bytes_all.size() - 1);
  for (DType d :
       {DType::float64,       DType::float32,     DType::hifloat32, DType::float16,     DType::bfloat16,
        DType::float8_e4m3fn, DType::float8_e5m2, DType::hifloat8,  DType::float8_e8m0, DType::float4_e2m1,
        DType::int4,          DType::int8,        DType::int16,     DType::int32,       DType::int64,
        DType::uint8,         DType::uint16,      DType::uint32,    DType::uint64,      DType::boolean}) {
    const std::size_t n = bytes.size() * 8 / dtype_info(d).bits;
    for (std::size_t begin : {std::size_t{0}, std::size_t{3}, std::size_t{17}}) {
      const std::size_t count = n - begin - 5;
      std::vector<double> out(count);
      decode_block(d, bytes, begin, count, out.data());
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = begin + k;
        const std::uint8_t* p = bytes.data();
        double want;
        switch (d) {
          case DType::float64: {
            double v;
            std::memcpy(&v, p + 8 * i, 8);
            want = v;
            break;
          }
          case DType::float32:
          case DType::hifloat32: {
            float v;
            std::memcpy(&v, p + 4 * i, 4);
            want = v;
            break;
          }
          case DType::float16:
            want = f16_to_f32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
            break;
          case DType::bfloat16:
            want = bf16_to_f32(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
            break;
          case DType::float4_e2m1:
            want = decode8(d, (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 0xF);
            break;
          case DType::int4: {
            const int nib = (i & 1) ? p[i / 2] >> 4 : p[i / 2] & 0xF;
            want = nib >= 8 ? nib - 16 : nib;
            break;
          }
          case DType::boolean:
            want = p[i] ? 1 : 0;
            break;
          default:
            if (is_integer(d)) {
              want = static_cast<double>(int_at(d, bytes, i));
              if (d == DType::uint64) {
                std::uint64_t u;
                std::memcpy(&u, p + 8 * i, 8);
                want = static_cast<double>(u);
              }
            } else {
              want = decode8(d, p[i]);
            }
        }
        ASSERT_TRUE(same(out[k], want))
            << dtype_name(d) << " i=" << i << " got " << out[k] << " want " << want;
      }
    }
  }
}

TEST(Bulk, DecodeComplex) {
  std::vector<std::uint16_t> h = {0x3C00, 0xC000, 0x3800, 0x0001};  // 1, -2, 0.5, 2^-24
  std::vector<std::uint8_t> b(8);
  std::memcpy(b.data(), h.data(), 8);
  double out[4];
  decode_complex_block(DType::complex32, b, 0, 2, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], -2.0);
  EXPECT_EQ(out[2], 0.5);
  EXPECT_EQ(out[3], std::ldexp(1, -24));
  decode_complex_block(DType::float16, b, 1, 2, out);  // real read as complex: im = 0
  EXPECT_EQ(out[0], -2.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 0.5);
  EXPECT_EQ(out[3], 0.0);
}

TEST(Bulk, EncodeBlockIntegersAndPacking) {
  const std::vector<double> in = {2.5, 3.5, -2.5, 1e19, -1e19, kNaN, 127.4, -128.6};
  std::vector<std::uint8_t> out(8);
  encode_block(DType::int8, in.data(), in.size(), out.data());
  const std::vector<std::int8_t> want8 = {2, 4, -2, 127, -128, 0, 127, -128};
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(static_cast<std::int8_t>(out[i]), want8[i]) << i;
  std::vector<std::uint8_t> o64(64);
  encode_block(DType::int64, in.data(), in.size(), o64.data());
  EXPECT_EQ(int_at(DType::int64, o64, 3), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(int_at(DType::int64, o64, 4), std::numeric_limits<std::int64_t>::min());
  encode_block(DType::uint8, in.data(), in.size(), out.data());
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 255);
  // int4: element 2i in the low nibble of byte i; odd count leaves the last high nibble 0.
  const std::vector<double> q = {1, -1, 7.6, -9, 3};
  std::vector<std::uint8_t> p(3, 0xAA);
  encode_block(DType::int4, q.data(), q.size(), p.data());
  EXPECT_EQ(p[0], 0xF1);
  EXPECT_EQ(p[1], 0x87);
  EXPECT_EQ(p[2], 0x03);
  for (std::size_t i = 0; i < q.size(); ++i)
    EXPECT_EQ(int_at(DType::int4, p, i), std::clamp<double>(std::nearbyint(q[i]), -8, 7)) << i;
  const std::vector<double> f = {0.5, -6, 1e9, 1.25, 3};
  encode_block(DType::float4_e2m1, f.data(), f.size(), p.data());
  EXPECT_EQ(p[0], 0xF1);  // 0.5 = 0x1, -6 = 0xF
  EXPECT_EQ(p[1], 0x27);  // 6 = 0x7, 1.25 → 1.0 (tie to even) = 0x2
  EXPECT_EQ(p[2], 0x05);  // 3 = 0x5
  EXPECT_EQ(code_at(DType::float4_e2m1, p, 3), 0x2);
  encode_block(DType::boolean, in.data(), in.size(), out.data());
  EXPECT_EQ(out[5], 1);  // NaN is truthy, as in numpy
}

TEST(Bulk, QuantizeInplace) {
  std::vector<float> x = {1.0f, 1.0625f, 500.0f, -1e-3f, std::numeric_limits<float>::infinity()};
  auto e4 = x;
  quantize_inplace(DType::float8_e4m3fn, e4.data(), e4.size());
  EXPECT_EQ(e4[0], 1.0f);
  EXPECT_EQ(e4[1], 1.0f);
  EXPECT_TRUE(std::isnan(e4[2]));
  EXPECT_EQ(e4[3], -std::ldexp(1.0f, -9));  // subnormal quantum 2^-9: 1e-3 is 0.512 quanta
  auto e4c = x;
  quantize_inplace(DType::float8_e4m3fn, e4c.data(), e4c.size(), Saturation::clamp);
  EXPECT_EQ(e4c[2], 448.0f);
  EXPECT_EQ(e4c[4], 448.0f);
  auto bf = x;
  quantize_inplace(DType::bfloat16, bf.data(), bf.size());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(bf[i], bf16_to_f32(f32_to_bf16(x[i]))) << i;
}

// quantize_inplace's float-domain fast paths against the scalar encoders (decode(encode(x))).
TEST(Bulk, QuantizeInplaceMatchesScalarCodecs) {
  std::mt19937_64 rng(21);
  std::vector<float> xs(50000);
  for (auto& v : xs) v = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));  // NaN, inf, subnormals
  for (std::size_t i = 0; i < 2000; ++i)
    xs[i] = std::ldexp(static_cast<float>(rng() % 4096), static_cast<int>(rng() % 40) - 30);
  for (DType d : {DType::bfloat16, DType::float16, DType::float8_e4m3fn, DType::float8_e5m2,
                  DType::float4_e2m1, DType::hifloat32, DType::hifloat8, DType::float8_e8m0}) {
    for (Saturation s : {Saturation::none, Saturation::clamp}) {
      auto y = xs;
      quantize_inplace(d, y.data(), y.size(), s);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        double want;
        if (d == DType::bfloat16) {
          want = bf16_to_f32(f32_to_bf16(xs[i], s));
        } else if (d == DType::float16) {
          want = f16_to_f32(f32_to_f16(xs[i], s));
        } else if (d == DType::hifloat32) {
          std::uint8_t b[4];
          const double in = xs[i];
          encode_block(d, &in, 1, b, s);
          float f;
          std::memcpy(&f, b, 4);
          want = f;
        } else {
          want = decode8(d, encode8(d, xs[i], s));
        }
        ASSERT_TRUE(same(y[i], want) && std::signbit(y[i]) == std::signbit(want))
            << dtype_name(d) << " sat " << static_cast<int>(s) << " x " << xs[i] << " got " << y[i]
            << " want " << want;
      }
    }
  }
}

TEST(BulkDeathTest, ShortBufferIsABug) {
  std::vector<std::uint8_t> b(7);
  double out[4];
  EXPECT_DEATH(decode_block(DType::float16, b, 0, 4, out), "float16");
  EXPECT_DEATH(decode_block(DType::float4_e2m1, std::span<const std::uint8_t>(b.data(), 1), 1, 2, out), "");
}

}  // namespace
}  // namespace kc
