// Encoders and decoders of the floating formats, ULP sizes and mantissa rounding.
//
// Conventions
// - Encoders take f64 (f32 converts exactly) and round to nearest, ties to even, except hifloat8, which
//   rounds half away from zero. Encoding is exact round-once from f64 (no double rounding through f32).
// - Overflow: Saturation::none gives what the format does natively (inf where it has inf, NaN for e4m3fn
//   and e8m0, which have no inf); Saturation::clamp clamps finite overflow to ±max (an infinite input
//   stays inf where the format has inf, else becomes ±max). float4_e2m1 has no inf/NaN: it always clamps.
// - NaN in gives the format's NaN (float4_e2m1: documented in encode_fp4).
// - hifloat8 layout: bit 7 sign; then a prefix "dot" field: 11 → 4 exponent bits + 1 mantissa bit;
//   10 → 3 + 2; 01 → 2 + 3; 001 → 1 + 3; 0001 → 0 + 3; 0000 → denormal 2^(m−23) (m the last 3 bits).
//   Exponent is sign-magnitude with an implicit leading 1 in the magnitude (D bits: ±[2^(D−1), 2^D−1],
//   D = 0 → 0). 0x00 = +0, 0x80 = NaN, 0x6F / 0xEF = ±inf.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "numeric/dtype.h"

namespace kc {

enum class Saturation : std::uint8_t { none, clamp };

// --- scalar codecs -------------------------------------------------------------------------------
float f16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(double x, Saturation s = Saturation::none);
float bf16_to_f32(std::uint16_t b);
std::uint16_t f32_to_bf16(double x, Saturation s = Saturation::none);

// 8-bit formats (float8_e4m3fn, float8_e5m2, hifloat8, float8_e8m0) and float4_e2m1 (code 0..15).
double decode8(DType d, std::uint8_t code);
std::uint8_t encode8(DType d, double x, Saturation s = Saturation::none);

// hifloat32: an f32 kept to 11 mantissa bits (RNE), f32 exponent range.
float to_hifloat32(double x);

// Largest finite value of a float dtype; smallest positive normal; smallest positive subnormal.
double max_finite(DType d);
double min_normal(DType d);
double min_subnormal(DType d);

// Size of one unit in the last place of dtype d at value x: the gap between the two representable
// values around |x| (at an exact representable value, the gap to the next one away from zero; at ±max,
// the last gap). For x = 0 or subnormals, the subnormal spacing. NaN/inf → NaN.
double ulp(DType d, double x);

// Keep `bits` mantissa bits (0..52 for f64, 0..23 for f32), RNE on the bit pattern, exponent range
// unchanged: a value whose rounding would overflow is clamped to the largest finite value with `bits`
// mantissa bits (no inf appears that the input did not have); subnormals round at the same bit position.
// NaN and inf pass through. bits >= the format's width returns x unchanged.
double round_mantissa(double x, int bits);
float round_mantissa(float x, int bits);

// --- bulk access ---------------------------------------------------------------------------------
// Decode elements [begin, begin + count) of a buffer holding dtype d into doubles. Real types only
// (complex: use decode_complex_block, which writes re,im pairs). Booleans decode to 0/1; integers exactly
// (int64/uint64 beyond 2^53 round). bytes must hold storage_bytes(d, begin + count).
void decode_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                  double* out);
void decode_complex_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                          double* out /* 2*count */);

// Integer view of element i for integer/bool/packed-int types (sign-extended int4), exact.
std::int64_t int_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i);
// Raw code of element i for 8-bit and 4-bit float formats (requant's int8 view, binary's diff listing).
std::uint8_t code_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i);

// Encode doubles into dtype d (real types; integers round half to even and saturate to the type's range;
// bool is x != 0). out must hold storage_bytes(d, count). For packed types the buffer is written whole.
void encode_block(DType d, const double* in, std::size_t count, std::uint8_t* out,
                  Saturation s = Saturation::none);

}  // namespace kc
