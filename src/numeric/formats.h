// Encoders and decoders of the floating formats, ULP sizes and mantissa rounding.
//
// Conventions
// - Encoders take f64 (f32 converts exactly) and round to nearest, ties to even, except hifloat8, which
//   rounds half away from zero. Encoding is exact round-once from f64 (no double rounding through f32).
// - Overflow: Saturation::none gives what the format does natively (inf where it has inf, NaN for e4m3fn
//   and e8m0, which have no inf); Saturation::clamp clamps finite overflow to ±max (an infinite input
//   stays inf where the format has inf, else becomes ±max). float4_e2m1 has no inf/NaN: it always clamps.
// - NaN in gives the format's NaN with the input's sign where the format has signed NaNs (f16, bf16,
//   e4m3fn 0x7F/0xFF, e5m2 0x7E/0xFE); hifloat8 0x80, e8m0 0xFF; float4_e2m1 has no NaN: NaN → +0.
// - float8_e8m0 has no zero and no sign: 0, negatives and NaN → 0xFF (NaN); 0 < x < 2^-127 → 0x00.
//   It has no mantissa, so "ties to even" is undefined: ties (1.5·2^e) round up, as in ml_dtypes/PyTorch.
// - hifloat8 at the top: max finite 0x6E = 32768, the would-be next value is 49152 (0x6F, which is inf),
//   so |x| >= 40960 (their midpoint, ties away from zero) overflows; below 40960 it rounds to ±32768.
//   There is no -0 (0x80 is NaN): anything that rounds to zero encodes as 0x00. Rounding picks the
//   nearest value by plain distance, also among the power-of-two denormals (as en_dtypes does).
// - Packed 4-bit types (float4_e2m1, int4) hold two elements per byte, element 2i in the low nibble of
//   byte i (safetensors "F4"/"I4" style). numpy/ml_dtypes arrays of int4/float4_e2m1fn are unpacked
//   (one element per byte): repack them before handing them to this layer.
// - Nothing here starts threads (kc::parallel_for does not nest): callers split big arrays into chunks.
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

// hifloat32: an f32 kept to 11 mantissa bits (RNE, rounded once from f64), f32 exponent range; subnormals
// round at the normal bit position (quantum 2^-137); overflow → ±inf.
float to_hifloat32(double x);

// Largest finite value of a float dtype; smallest positive normal; smallest positive subnormal.
// hifloat8: 32768, 2^-15, 2^-22; float8_e8m0: 2^127, 2^-127, 2^-127; hifloat32: (2-2^-11)·2^127, 2^-126,
// 2^-137 (rounding keeps the normal bit position). Integers: type max, 1, 1. Complex: the component's.
double max_finite(DType d);
double min_normal(DType d);
double min_subnormal(DType d);

// Size of one unit in the last place of dtype d at value x: the gap between the two representable
// values around |x| (at an exact representable value, the gap to the next one away from zero; at ±max,
// the last gap; beyond ±max, the last gap too). For x = 0 or subnormals, the subnormal spacing. NaN/inf →
// NaN. 8-bit formats and float4_e2m1 read it off the code table (hifloat8's gaps are irregular; e8m0 at 0:
// the first gap, 2^-127). Integers and bool: 1. Complex: the component type's ulp.
double ulp(DType d, double x);

// Keep `bits` mantissa bits (0..52 for f64, 0..23 for f32), RNE on the bit pattern, exponent range
// unchanged: a value whose rounding would overflow is clamped to the largest finite value with `bits`
// mantissa bits (no inf appears that the input did not have); subnormals round at the same bit position.
// NaN and inf pass through. bits >= the format's width returns x unchanged.
// bits = 0 keeps only the exponent (ties to even exponent, unlike e8m0's ties-up).
double round_mantissa(double x, int bits);
float round_mantissa(float x, int bits);
// round_mantissa(float) over a whole array, in place; branch-free so that it vectorises.
void round_mantissa_inplace(float* x, std::size_t n, int bits);

// x[i] ← the value of dtype d nearest to x[i] (decode(encode(x[i], s))), for every real float dtype
// (float32/float64: unchanged). The lab uses it to round a tensor to bf16, f16, fp8 … in place.
void quantize_inplace(DType d, float* x, std::size_t n, Saturation s = Saturation::none);

// --- bulk access ---------------------------------------------------------------------------------
// Decode elements [begin, begin + count) of a buffer holding dtype d into doubles. Real types only
// (complex: use decode_complex_block, which writes re,im pairs; given a real dtype it writes im = 0).
// Booleans decode to 0/1 (any non-zero byte is 1); integers exactly (int64/uint64 beyond 2^53 round).
// bytes must hold storage_bytes(d, begin + count) (checked: a short buffer is a bug, KC_ASSERT).
void decode_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                  double* out);
void decode_complex_block(DType d, std::span<const std::uint8_t> bytes, std::size_t begin, std::size_t count,
                          double* out /* 2*count */);

// Integer view of element i for integer/bool/packed-int types (sign-extended int4), exact except uint64
// values >= 2^63, which come back as their two's complement bit pattern.
std::int64_t int_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i);
// Raw code of element i for 8-bit and 4-bit float formats (requant's int8 view, binary's diff listing).
std::uint8_t code_at(DType d, std::span<const std::uint8_t> bytes, std::size_t i);

// Encode doubles into dtype d (real types; integers round half to even and saturate to the type's range,
// NaN → 0; bool is x != 0). out must hold storage_bytes(d, count). For packed types the buffer is written
// whole (an odd count leaves the last high nibble 0).
void encode_block(DType d, const double* in, std::size_t count, std::uint8_t* out,
                  Saturation s = Saturation::none);

}  // namespace kc
