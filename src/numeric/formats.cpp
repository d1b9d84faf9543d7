#include "numeric/formats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace kc {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Binary floating formats with a biased exponent, an implicit leading 1 and subnormals: f16, bf16,
// e4m3fn, e5m2, e2m1, f32 and hifloat32 (f32 range, 11 mantissa bits). One encoder for all of them rounds
// the exact f64 significand once, at the quantum of the target (RNE), so there is no double rounding.
// A code is laid out as (biased exponent << M) + mantissa, plus the sign bit.
struct IeeeFormat {
  int mant;                // explicit mantissa bits M
  int bias;                // exponent bias; smallest normal exponent is 1 - bias
  int sign_shift;          // position of the sign bit
  std::uint64_t max_code;  // largest finite magnitude code
  bool has_inf;
  std::uint64_t inf_code;
  bool has_nan;
  std::uint64_t nan_code;  // code for NaN input (no NaN: what NaN maps to)
};

constexpr IeeeFormat kF16{10, 15, 15, 0x7BFF, true, 0x7C00, true, 0x7E00};
constexpr IeeeFormat kBF16{7, 127, 15, 0x7F7F, true, 0x7F80, true, 0x7FC0};
constexpr IeeeFormat kE4M3{3, 7, 7, 0x7E, false, 0, true, 0x7F};
constexpr IeeeFormat kE5M2{2, 15, 7, 0x7B, true, 0x7C, true, 0x7E};
// float4_e2m1 has neither inf nor NaN: overflow and inf always clamp to ±6; NaN becomes +0 (code 0).
// (ml_dtypes maps NaN to a zero too, but with the NaN's sign inverted: +NaN → -0. We do not copy that.)
constexpr IeeeFormat kE2M1{1, 1, 3, 0x7, false, 0, false, 0x0};
// hifloat32 codes are f32 bit patterns shifted right by 23 - 11 = 12.
constexpr IeeeFormat kHiF32{11,   127,           19,   (0xFEull << 11) | 0x7FF,
                            true, 0xFFull << 11, true, (0xFFull << 11) | (1ull << 10)};

std::uint64_t encode_ieee(const IeeeFormat& f, double x, Saturation s) {
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  const bool neg = (u >> 63) != 0;
  const std::uint64_t a = u & ~(1ull << 63);
  const std::uint64_t sign = static_cast<std::uint64_t>(neg) << f.sign_shift;
  auto overflow = [&](bool input_inf) -> std::uint64_t {
    if (f.has_inf && (s == Saturation::none || input_inf)) return sign | f.inf_code;
    if (s == Saturation::none && f.has_nan) return sign | f.nan_code;
    return sign | f.max_code;
  };
  if (a >= 0x7FF0000000000000ull) {
    if (a > 0x7FF0000000000000ull) return f.has_nan ? (sign | f.nan_code) : f.nan_code;
    return overflow(true);
  }
  const int biased = static_cast<int>(a >> 52);
  if (biased == 0) return sign;  // f64 subnormal: below half the smallest subnormal of every target
  const int e = biased - 1023;
  const int emin = 1 - f.bias;
  const int emax_code = static_cast<int>(f.max_code >> f.mant) - f.bias;  // exponent of max finite
  if (e > emax_code + 1) return overflow(false);
  const std::uint64_t sig = (a & ((1ull << 52) - 1)) | (1ull << 52);  // value = sig * 2^(e-52)
  const int eq = std::max(e, emin);                                   // quantum is 2^(eq - M)
  const int shift = (eq - f.mant) - (e - 52);                         // >= 52 - M >= 29
  std::uint64_t r;
  if (shift >= 54) {
    r = 0;  // sig < 2^53 <= half a quantum
  } else {
    r = sig >> shift;
    const std::uint64_t rem = sig & ((1ull << shift) - 1);
    const std::uint64_t half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
  }
  // Subnormal range: eq = emin, so the exponent field is 0 and r (<= 2^M) is the code; a carry to 2^M
  // lands on the smallest normal. Normal: r in [2^M, 2^(M+1)], a carry moves to the next binade.
  const std::uint64_t code = (static_cast<std::uint64_t>(eq + f.bias - 1) << f.mant) + r;
  if (code > f.max_code) return overflow(false);
  return sign | code;
}

// ---------------------------------------------------------------------------------------------------
// Decoders written from the layouts (independent of the encoders above).

double decode_e4m3fn(std::uint8_t c) {
  const int E = (c >> 3) & 0xF, m = c & 7;
  double v;
  if (E == 15 && m == 7) {
    v = kNaN;
  } else if (E == 0) {
    v = std::ldexp(m, -9);
  } else {
    v = std::ldexp(8 + m, E - 10);
  }
  return (c & 0x80) ? -v : v;
}

double decode_e5m2(std::uint8_t c) {
  const int E = (c >> 2) & 0x1F, m = c & 3;
  double v;
  if (E == 31) {
    v = m == 0 ? kInf : kNaN;
  } else if (E == 0) {
    v = std::ldexp(m, -16);
  } else {
    v = std::ldexp(4 + m, E - 17);
  }
  return (c & 0x80) ? -v : v;
}

double decode_e8m0(std::uint8_t c) { return c == 0xFF ? kNaN : std::ldexp(1.0, c - 127); }

double decode_e2m1(std::uint8_t c) {
  const int E = (c >> 1) & 3, m = c & 1;
  const double v = E == 0 ? 0.5 * m : std::ldexp(2 + m, E - 2);
  return (c & 0x8) ? -v : v;
}

// HiFloat8: sign, prefix-coded dot field D, D exponent bits (sign-magnitude, implicit leading 1 in the
// magnitude), then the mantissa. See formats.h.
double decode_hif8(std::uint8_t c) {
  if (c == 0x00) return 0.0;
  if (c == 0x80) return kNaN;
  const bool neg = (c & 0x80) != 0;
  const int v = c & 0x7F;
  if (v == 0x6F) return neg ? -kInf : kInf;
  int D, mbits;
  if ((v >> 5) == 3) {
    D = 4, mbits = 1;
  } else if ((v >> 5) == 2) {
    D = 3, mbits = 2;
  } else if ((v >> 5) == 1) {
    D = 2, mbits = 3;
  } else if ((v >> 4) == 1) {
    D = 1, mbits = 3;
  } else if ((v >> 3) == 1) {
    D = 0, mbits = 3;
  } else {
    const double d = std::ldexp(1.0, (v & 7) - 23);  // denormal, m = 1..7
    return neg ? -d : d;
  }
  const int m = v & ((1 << mbits) - 1);
  const int ef = (v >> mbits) & ((1 << D) - 1);
  int E = 0;
  if (D > 0) {
    const int mag = (1 << (D - 1)) | (ef & ((1 << (D - 1)) - 1));
    E = (ef >> (D - 1)) ? -mag : mag;
  }
  const double d = std::ldexp((1 << mbits) + m, E - mbits);
  return neg ? -d : d;
}

// Per-format tables: every code's value, and the non-negative finite values in ascending order (the
// "code line" that the table-driven encoder, ulp and the hifloat8 encoder search).
struct Table8 {
  std::array<double, 256> value{};
  std::array<double, 256> pos{};             // ascending non-negative finite values
  std::array<std::uint8_t, 256> pos_code{};  // their codes
  int npos = 0;
};

Table8 make_table(double (*dec)(std::uint8_t), int ncodes) {
  Table8 t;
  for (int c = 0; c < ncodes; ++c) t.value[c] = dec(static_cast<std::uint8_t>(c));
  for (int c = 0; c < ncodes; ++c) {
    const double v = t.value[c];
    if (std::isfinite(v) && !std::signbit(v)) {
      t.pos[t.npos] = v;
      t.pos_code[t.npos] = static_cast<std::uint8_t>(c);
      ++t.npos;
    }
  }
  // Sort by value (insertion sort; at most 256 entries, done once).
  for (int i = 1; i < t.npos; ++i)
    for (int j = i; j > 0 && t.pos[j - 1] > t.pos[j]; --j) {
      std::swap(t.pos[j - 1], t.pos[j]);
      std::swap(t.pos_code[j - 1], t.pos_code[j]);
    }
  return t;
}

const Table8& table8(DType d) {
  static const Table8 e4m3 = make_table(decode_e4m3fn, 256);
  static const Table8 e5m2 = make_table(decode_e5m2, 256);
  static const Table8 hif8 = make_table(decode_hif8, 256);
  static const Table8 e8m0 = make_table(decode_e8m0, 256);
  static const Table8 e2m1 = make_table(decode_e2m1, 16);
  switch (d) {
    case DType::float8_e4m3fn:
      return e4m3;
    case DType::float8_e5m2:
      return e5m2;
    case DType::hifloat8:
      return hif8;
    case DType::float8_e8m0:
      return e8m0;
    case DType::float4_e2m1:
      return e2m1;
    default:
      KC_ASSERT(false, "table8: {} is not an 8-bit or 4-bit float format", dtype_name(d));
  }
  __builtin_unreachable();
}

// HiFloat8 rounds to the nearest code, ties away from zero. Above max (32768) the would-be next value is
// 49152 (code 0x6F if it were finite), so |x| >= 40960 overflows: inf (none) or ±32768 (clamp). There is
// no -0 (0x80 is NaN): anything that rounds to zero is 0x00.
std::uint8_t encode_hif8(double x, Saturation s) {
  if (std::isnan(x)) return 0x80;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  const Table8& t = table8(DType::hifloat8);
  const double max = t.pos[t.npos - 1];
  if (a >= max) {
    const bool to_inf = std::isinf(a) || (a >= (max + 49152.0) / 2 && s == Saturation::none);
    return sign | (to_inf ? 0x6F : 0x6E);
  }
  // i: last index with pos[i] <= a.
  const int i =
      static_cast<int>(std::upper_bound(t.pos.begin(), t.pos.begin() + t.npos, a) - t.pos.begin()) - 1;
  const double lo = t.pos[i], hi = t.pos[i + 1];
  const std::uint8_t code = a >= (lo + hi) / 2 ? t.pos_code[i + 1] : t.pos_code[i];  // midpoint exact in f64
  return code == 0 ? 0 : (sign | code);
}

// float8_e8m0 (fnu: finite, NaN, unsigned): 2^(code-127), 0xFF NaN. It has no mantissa, so every value
// has significand 1 and "ties to even" is undefined; like ml_dtypes and PyTorch, ties (1.5·2^e) round up.
// Zero, negatives and NaN have no code: NaN (0xFF), as in ml_dtypes. Positive values below 2^-127 round to
// the smallest code 0x00 (there is no zero). Overflow (>= 1.5·2^127) and inf: NaN (none) or 2^127 (clamp).
std::uint8_t encode_e8m0(double x, Saturation s) {
  if (!(x > 0)) return 0xFF;
  if (std::isinf(x)) return s == Saturation::clamp ? 0xFE : 0xFF;
  int e;
  const double fr = std::frexp(x, &e);  // x = fr * 2^e, fr in [0.5, 1)
  int k = e - 1;                        // x = (2 fr) * 2^k, 2 fr in [1, 2)
  if (fr >= 0.75) ++k;                  // 2 fr >= 1.5: round up (ties too)
  if (k < -127) return 0x00;
  if (k > 127) return s == Saturation::clamp ? 0xFE : 0xFF;
  return static_cast<std::uint8_t>(k + 127);
}

[[maybe_unused]] float f16_to_f32_scalar(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  std::uint32_t bits;
  if (e == 0x1F) {
    bits = sign | 0x7F800000u | (m << 13);
  } else if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  } else {
    bits = sign | ((e + 112) << 23) | (m << 13);
  }
  return std::bit_cast<float>(bits);
}

void check_span(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count) {
  KC_ASSERT(begin + count >= begin && storage_bytes(d, begin + count) <= bytes.size(),
            "{}: elements [{}, {}) need {} bytes, buffer has {}", dtype_name(d), begin, begin + count,
            storage_bytes(d, begin + count), bytes.size());
}

template <typename T>
void decode_plain(const std::uint8_t* p, std::size_t count, double* out) {
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<double>(load<T>(p + i * sizeof(T)));
}

void decode_f16_run(const std::uint8_t* p, std::size_t count, double* out) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    const __m256 f = _mm256_cvtph_ps(h);
    _mm256_storeu_pd(out + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    _mm256_storeu_pd(out + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
#endif
  for (; i < count; ++i) out[i] = f16_to_f32(load<std::uint16_t>(p + 2 * i));
}

// bf16 is the top half of an f32: widen, shift, convert (8 lanes per step; GCC/Clang vector extensions
// vectorise it, where the scalar loop with its memcpy loads did not).
void decode_bf16_run(const std::uint8_t* p, std::size_t count, double* out) {
  std::size_t i = 0;
#if defined(__GNUC__)
  typedef std::uint16_t v8u16 __attribute__((vector_size(16)));
  typedef std::uint32_t v8u32 __attribute__((vector_size(32)));
  typedef float v8f __attribute__((vector_size(32), aligned(4)));
  typedef double v8d __attribute__((vector_size(64), aligned(8)));
  for (; i + 8 <= count; i += 8) {
    v8u16 h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    const v8u32 w = __builtin_convertvector(h, v8u32) << 16;
    const v8d d = __builtin_convertvector((v8f)w, v8d);
    std::memcpy(out + i, &d, sizeof d);
  }
#endif
  for (; i < count; ++i) {
    const std::uint32_t b = static_cast<std::uint32_t>(load<std::uint16_t>(p + 2 * i)) << 16;
    out[i] = static_cast<double>(std::bit_cast<float>(b));
  }
}

// Round half to even and saturate to [lo, hi]; NaN → 0.
template <typename T>
T to_int_sat(double x) {
  if (std::isnan(x)) return 0;
  const double r = std::nearbyint(x);  // default rounding mode: ties to even
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  // hi as a double may round up (int64: 2^63), so compare with >= against the next power of two.
  constexpr double hi_excl = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  if (r <= lo) return std::numeric_limits<T>::min();
  if (r >= hi_excl) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}

template <typename T>
void encode_int(const double* in, std::size_t count, std::uint8_t* out) {
  for (std::size_t i = 0; i < count; ++i) {
    const T v = to_int_sat<T>(in[i]);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

std::int64_t int4_of(std::uint8_t nibble) {
  return (nibble & 0x8) ? static_cast<std::int64_t>(nibble) - 16 : nibble;
}

std::uint8_t nibble_at(std::span<const std::uint8_t> bytes, std::size_t i) {
  return (i & 1) ? (bytes[i / 2] >> 4) : (bytes[i / 2] & 0xF);
}

}  // namespace

// --- scalar codecs -------------------------------------------------------------------------------------

float f16_to_f32(std::uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32_scalar(h);
#endif
}

std::uint16_t f32_to_f16(double x, Saturation s) {
  return static_cast<std::uint16_t>(encode_ieee(kF16, x, s));
}

float bf16_to_f32(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t f32_to_bf16(double x, Saturation s) {
  return static_cast<std::uint16_t>(encode_ieee(kBF16, x, s));
}

double decode8(DType d, std::uint8_t code) {
  if (d == DType::float4_e2m1)
    KC_ASSERT(code < 16, "decode8: float4_e2m1 code {} is not a nibble", static_cast<int>(code));
  return table8(d).value[code];
}

std::uint8_t encode8(DType d, double x, Saturation s) {
  switch (d) {
    case DType::float8_e4m3fn:
      return static_cast<std::uint8_t>(encode_ieee(kE4M3, x, s));
    case DType::float8_e5m2:
      return static_cast<std::uint8_t>(encode_ieee(kE5M2, x, s));
    case DType::float4_e2m1:
      return static_cast<std::uint8_t>(encode_ieee(kE2M1, x, Saturation::clamp));
    case DType::hifloat8:
      return encode_hif8(x, s);
    case DType::float8_e8m0:
      return encode_e8m0(x, s);
    default:
      KC_ASSERT(false, "encode8: {} is not an 8-bit or 4-bit float format", dtype_name(d));
  }
  __builtin_unreachable();
}

float to_hifloat32(double x) {
  const std::uint64_t c = encode_ieee(kHiF32, x, Saturation::none);
  const std::uint32_t bits = static_cast<std::uint32_t>(((c >> 19) & 1) << 31) |
                             static_cast<std::uint32_t>((c & ((1ull << 19) - 1)) << 12);
  return std::bit_cast<float>(bits);
}

namespace {
struct Range {
  double max, min_normal, min_subnormal;
};

Range range_of(DType d) {
  switch (d) {
    case DType::float64:
      return {DBL_MAX, DBL_MIN, std::ldexp(1.0, -1074)};
    case DType::float32:
      return {FLT_MAX, FLT_MIN, std::ldexp(1.0, -149)};
    case DType::hifloat32:
      return {std::ldexp(2.0 - std::ldexp(1.0, -11), 127), FLT_MIN, std::ldexp(1.0, -137)};
    case DType::float16:
      return {65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24)};
    case DType::bfloat16:
      return {std::ldexp(2.0 - std::ldexp(1.0, -7), 127), std::ldexp(1.0, -126), std::ldexp(1.0, -133)};
    case DType::float8_e4m3fn:
      return {448.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9)};
    case DType::float8_e5m2:
      return {57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16)};
    case DType::hifloat8:
      return {32768.0, std::ldexp(1.0, -15), std::ldexp(1.0, -22)};
    case DType::float8_e8m0:
      return {std::ldexp(1.0, 127), std::ldexp(1.0, -127), std::ldexp(1.0, -127)};
    case DType::float4_e2m1:
      return {6.0, 1.0, 0.5};
    case DType::int4:
      return {7.0, 1.0, 1.0};
    case DType::int8:
      return {127.0, 1.0, 1.0};
    case DType::int16:
      return {32767.0, 1.0, 1.0};
    case DType::int32:
      return {2147483647.0, 1.0, 1.0};
    case DType::int64:
      return {9223372036854775807.0, 1.0, 1.0};
    case DType::uint8:
      return {255.0, 1.0, 1.0};
    case DType::uint16:
      return {65535.0, 1.0, 1.0};
    case DType::uint32:
      return {4294967295.0, 1.0, 1.0};
    case DType::uint64:
      return {18446744073709551615.0, 1.0, 1.0};
    case DType::boolean:
      return {1.0, 1.0, 1.0};
    case DType::complex32:
      return range_of(DType::float16);
    case DType::complex64:
      return range_of(DType::float32);
    case DType::complex128:
      return range_of(DType::float64);
  }
  KC_ASSERT(false, "range_of: bad dtype {}", static_cast<int>(d));
  __builtin_unreachable();
}
}  // namespace

double max_finite(DType d) { return range_of(d).max; }
double min_normal(DType d) { return range_of(d).min_normal; }
double min_subnormal(DType d) { return range_of(d).min_subnormal; }

double ulp(DType d, double x) {
  if (!std::isfinite(x)) return kNaN;
  const double a = std::fabs(x);
  switch (d) {
    case DType::complex32:
      return ulp(DType::float16, x);
    case DType::complex64:
      return ulp(DType::float32, x);
    case DType::complex128:
      return ulp(DType::float64, x);
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::hifloat8:
    case DType::float8_e8m0:
    case DType::float4_e2m1: {
      // From the code line: the gap above the largest value <= |x|; at or beyond max, the last gap; below
      // the smallest value (e8m0 has no zero), the first gap.
      const Table8& t = table8(d);
      int i =
          static_cast<int>(std::upper_bound(t.pos.begin(), t.pos.begin() + t.npos, a) - t.pos.begin()) - 1;
      i = std::clamp(i, 0, t.npos - 2);
      return t.pos[i + 1] - t.pos[i];
    }
    default:
      break;
  }
  if (!is_float(d)) return 1.0;
  const int mant = dtype_info(d).mantissa_bits;
  const int emin = std::ilogb(min_normal(d));
  const int emax = std::ilogb(max_finite(d));
  const int e = a == 0 ? emin : std::clamp(std::ilogb(a), emin, emax);
  return std::ldexp(1.0, e - mant);
}

double round_mantissa(double x, int bits) {
  KC_ASSERT(bits >= 0, "round_mantissa: bits must be >= 0, got {}", bits);
  if (bits >= 52) return x;
  const std::uint64_t u = std::bit_cast<std::uint64_t>(x);
  const std::uint64_t sign = u & (1ull << 63), a = u & ~(1ull << 63);
  if (a >= 0x7FF0000000000000ull) return x;
  const int shift = 52 - bits;
  const std::uint64_t mask = (1ull << shift) - 1;
  std::uint64_t r = (a + (mask >> 1) + ((a >> shift) & 1)) & ~mask;
  r = std::min<std::uint64_t>(r, 0x7FEFFFFFFFFFFFFFull & ~mask);
  return std::bit_cast<double>(sign | r);
}

float round_mantissa(float x, int bits) {
  KC_ASSERT(bits >= 0, "round_mantissa: bits must be >= 0, got {}", bits);
  if (bits >= 23) return x;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return x;
  const int shift = 23 - bits;
  const std::uint32_t mask = (1u << shift) - 1;
  std::uint32_t r = (a + (mask >> 1) + ((a >> shift) & 1)) & ~mask;
  r = std::min(r, 0x7F7FFFFFu & ~mask);
  return std::bit_cast<float>(sign | r);
}

void round_mantissa_inplace(float* x, std::size_t n, int bits) {
  KC_ASSERT(bits >= 0, "round_mantissa_inplace: bits must be >= 0, got {}", bits);
  if (bits >= 23) return;
  const int shift = 23 - bits;
  const std::uint32_t mask = (1u << shift) - 1, half_m1 = mask >> 1, keep = ~mask;
  const std::uint32_t maxr = 0x7F7FFFFFu & keep;
  // Branch-free so that the compiler vectorises it (same arithmetic as the scalar round_mantissa).
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, 4);
    const std::uint32_t a = u & 0x7FFFFFFFu;
    std::uint32_t r = (a + half_m1 + ((a >> shift) & 1)) & keep;
    r = r < maxr ? r : maxr;
    const std::uint32_t out = a >= 0x7F800000u ? u : ((u & 0x80000000u) | r);
    std::memcpy(x + i, &out, 4);
  }
}

namespace {
// Rounds floats in place to a binary format with M mantissa bits, smallest normal 2^emin and largest
// finite maxv, without leaving the float domain and without branches, so that it vectorises. The input is
// a float, so this is the same single RNE rounding as encode_ieee (the scalar twin, see formats_test).
struct QuantParams {
  int mant, emin;
  float maxv;
  float on_overflow;  // magnitude a finite overflow becomes (inf, NaN or maxv)
  float on_inf;       // magnitude ±inf becomes
  bool nan_to_zero;   // float4_e2m1: NaN → +0; others keep a (quiet) NaN with its sign
};

void quantize_ieee(float* x, std::size_t n, const QuantParams& q) {
  const int shift = 23 - q.mant;
  const std::uint32_t mask = (1u << shift) - 1, half_m1 = mask >> 1, keep = ~mask;
  const float min_normal = std::ldexp(1.0f, q.emin);
  const float magic = std::ldexp(1.0f, q.emin - q.mant + 23);  // a + magic rounds a at quantum 2^(emin-M)
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Locals, not q's members: the compiler cannot prove that x does not alias q.
  const float maxv = q.maxv, on_overflow = q.on_overflow, on_inf = q.on_inf;
  const float on_nan = q.nan_to_zero ? 0.0f : qnan;
  const std::uint32_t nan_sign_mask = q.nan_to_zero ? 0u : 0x80000000u;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, x + i, 4);
    const std::uint32_t a = u & 0x7FFFFFFFu;
    const float fa = std::bit_cast<float>(a);
    const float normal = std::bit_cast<float>((a + half_m1 + ((a >> shift) & 1)) & keep);
    const float sub = (fa + magic) - magic;
    float r = fa < min_normal ? sub : normal;
    r = r > maxv ? on_overflow : r;
    r = fa == inf ? on_inf : r;
    const bool nan = a > 0x7F800000u;
    r = nan ? on_nan : r;
    const std::uint32_t out = std::bit_cast<std::uint32_t>(r) | (u & (nan ? nan_sign_mask : 0x80000000u));
    std::memcpy(x + i, &out, 4);
  }
}
}  // namespace

void quantize_inplace(DType d, float* x, std::size_t n, Saturation s) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool clamp = s == Saturation::clamp;
  const float mx = static_cast<float>(max_finite(d == DType::float64 ? DType::float32 : d));
  switch (d) {
    case DType::float64:
    case DType::float32:
      return;  // a float is already a float32 (and a float64) value
    case DType::hifloat32:
      return quantize_ieee(x, n, {11, -126, mx, clamp ? mx : inf, inf, false});
    case DType::bfloat16:
      return quantize_ieee(x, n, {7, -126, mx, clamp ? mx : inf, inf, false});
    case DType::float16:
      return quantize_ieee(x, n, {10, -14, mx, clamp ? mx : inf, inf, false});
    case DType::float8_e4m3fn:
      return quantize_ieee(x, n, {3, -6, mx, clamp ? mx : nan, clamp ? mx : nan, false});
    case DType::float8_e5m2:
      return quantize_ieee(x, n, {2, -14, mx, clamp ? mx : inf, inf, false});
    case DType::float4_e2m1:
      return quantize_ieee(x, n, {1, 0, mx, mx, mx, true});
    case DType::hifloat8:
    case DType::float8_e8m0: {
      const Table8& t = table8(d);
      for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(t.value[encode8(d, x[i], s)]);
      return;
    }
    default:
      KC_ASSERT(false, "quantize_inplace: {} is not a real float dtype", dtype_name(d));
  }
}

// --- bulk access -----------------------------------------------------------------------------------------

void decode_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                  double* out) {
  KC_ASSERT(!is_complex(d), "decode_block: {} is complex; use decode_complex_block", dtype_name(d));
  check_span(d, bytes, begin, count);
  const std::uint8_t* p = bytes.data();
  switch (d) {
    case DType::float64:
      if (count) std::memcpy(out, p + 8 * begin, 8 * count);
      return;
    case DType::float32:
    case DType::hifloat32:
      return decode_plain<float>(p + 4 * begin, count, out);
    case DType::float16:
      return decode_f16_run(p + 2 * begin, count, out);
    case DType::bfloat16:
      return decode_bf16_run(p + 2 * begin, count, out);
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::hifloat8:
    case DType::float8_e8m0: {
      const double* v = table8(d).value.data();
      for (std::size_t i = 0; i < count; ++i) out[i] = v[p[begin + i]];
      return;
    }
    case DType::float4_e2m1: {
      const double* v = table8(d).value.data();
      for (std::size_t i = 0; i < count; ++i) out[i] = v[nibble_at(bytes, begin + i)];
      return;
    }
    case DType::int4:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = static_cast<double>(int4_of(nibble_at(bytes, begin + i)));
      return;
    case DType::int8:
      return decode_plain<std::int8_t>(p + begin, count, out);
    case DType::int16:
      return decode_plain<std::int16_t>(p + 2 * begin, count, out);
    case DType::int32:
      return decode_plain<std::int32_t>(p + 4 * begin, count, out);
    case DType::int64:
      return decode_plain<std::int64_t>(p + 8 * begin, count, out);
    case DType::uint8:
      return decode_plain<std::uint8_t>(p + begin, count, out);
    case DType::uint16:
      return decode_plain<std::uint16_t>(p + 2 * begin, count, out);
    case DType::uint32:
      return decode_plain<std::uint32_t>(p + 4 * begin, count, out);
    case DType::uint64:
      return decode_plain<std::uint64_t>(p + 8 * begin, count, out);
    case DType::boolean:
      for (std::size_t i = 0; i < count; ++i) out[i] = p[begin + i] != 0 ? 1.0 : 0.0;
      return;
    default:
      break;
  }
  KC_ASSERT(false, "decode_block: unhandled dtype {}", dtype_name(d));
}

void decode_complex_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                          double* out) {
  if (!is_complex(d)) {
    // A real tensor read as complex: imaginary parts are 0. Decode into the upper half, then spread.
    decode_block(d, bytes, begin, count, out + count);
    for (std::size_t i = 0; i < count; ++i) {
      out[2 * i] = out[count + i];
      out[2 * i + 1] = 0.0;
    }
    return;
  }
  check_span(d, bytes, begin, count);
  const std::uint8_t* p = bytes.data();
  switch (d) {
    case DType::complex32:
      return decode_f16_run(p + 4 * begin, 2 * count, out);
    case DType::complex64:
      return decode_plain<float>(p + 8 * begin, 2 * count, out);
    case DType::complex128:
      if (count) std::memcpy(out, p + 16 * begin, 16 * count);
      return;
    default:
      break;
  }
  KC_ASSERT(false, "decode_complex_block: unhandled dtype {}", dtype_name(d));
}

std::int64_t int_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i) {
  check_span(d, bytes, i, 1);
  const std::uint8_t* p = bytes.data();
  switch (d) {
    case DType::int4:
      return int4_of(nibble_at(bytes, i));
    case DType::int8:
      return load<std::int8_t>(p + i);
    case DType::int16:
      return load<std::int16_t>(p + 2 * i);
    case DType::int32:
      return load<std::int32_t>(p + 4 * i);
    case DType::int64:
      return load<std::int64_t>(p + 8 * i);
    case DType::uint8:
      return load<std::uint8_t>(p + i);
    case DType::uint16:
      return load<std::uint16_t>(p + 2 * i);
    case DType::uint32:
      return load<std::uint32_t>(p + 4 * i);
    case DType::uint64:
      return static_cast<std::int64_t>(load<std::uint64_t>(p + 8 * i));
    case DType::boolean:
      return p[i] != 0;
    default:
      break;
  }
  KC_ASSERT(false, "int_at: {} is not an integer type", dtype_name(d));
  __builtin_unreachable();
}

std::uint8_t code_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i) {
  const int bits = dtype_info(d).bits;
  KC_ASSERT(bits == 8 || bits == 4, "code_at: {} is not an 8-bit or 4-bit type", dtype_name(d));
  check_span(d, bytes, i, 1);
  return bits == 4 ? nibble_at(bytes, i) : bytes[i];
}

void encode_block(DType d, const double* in, std::size_t count, std::uint8_t* out, Saturation s) {
  KC_ASSERT(!is_complex(d), "encode_block: complex dtype {} is not supported", dtype_name(d));
  switch (d) {
    case DType::float64:
      if (count) std::memcpy(out, in, 8 * count);
      return;
    case DType::float32:
      for (std::size_t i = 0; i < count; ++i) {
        float f = static_cast<float>(in[i]);  // hardware RNE, single rounding from f64
        if (s == Saturation::clamp && std::isinf(f) && !std::isinf(in[i])) f = std::copysign(FLT_MAX, f);
        std::memcpy(out + 4 * i, &f, 4);
      }
      return;
    case DType::hifloat32:
      for (std::size_t i = 0; i < count; ++i) {
        float f = to_hifloat32(in[i]);
        if (s == Saturation::clamp && std::isinf(f) && !std::isinf(in[i]))
          f = std::copysign(static_cast<float>(max_finite(d)), f);
        std::memcpy(out + 4 * i, &f, 4);
      }
      return;
    case DType::float16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t h = f32_to_f16(in[i], s);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::bfloat16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t h = f32_to_bf16(in[i], s);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::float8_e4m3fn:
    case DType::float8_e5m2:
    case DType::hifloat8:
    case DType::float8_e8m0:
      for (std::size_t i = 0; i < count; ++i) out[i] = encode8(d, in[i], s);
      return;
    case DType::float4_e2m1:
    case DType::int4: {
      std::memset(out, 0, storage_bytes(d, count));
      for (std::size_t i = 0; i < count; ++i) {
        // int4: round half to even, saturate to [-8, 7], NaN → 0 (as encode_int).
        const std::uint8_t nib =
            d == DType::int4
                ? static_cast<std::uint8_t>(static_cast<int>(std::clamp(
                                                std::isnan(in[i]) ? 0.0 : std::nearbyint(in[i]), -8.0, 7.0)) &
                                            0xF)
                : encode8(d, in[i], s);
        out[i / 2] |= static_cast<std::uint8_t>(nib << ((i & 1) * 4));
      }
      return;
    }
    case DType::int8:
      return encode_int<std::int8_t>(in, count, out);
    case DType::int16:
      return encode_int<std::int16_t>(in, count, out);
    case DType::int32:
      return encode_int<std::int32_t>(in, count, out);
    case DType::int64:
      return encode_int<std::int64_t>(in, count, out);
    case DType::uint8:
      return encode_int<std::uint8_t>(in, count, out);
    case DType::uint16:
      return encode_int<std::uint16_t>(in, count, out);
    case DType::uint32:
      return encode_int<std::uint32_t>(in, count, out);
    case DType::uint64:
      return encode_int<std::uint64_t>(in, count, out);
    case DType::boolean:
      for (std::size_t i = 0; i < count; ++i) out[i] = in[i] != 0 ? 1 : 0;
      return;
    default:
      break;
  }
  KC_ASSERT(false, "encode_block: unhandled dtype {}", dtype_name(d));
}

}  // namespace kc
