// Every element type kerncheck reads, writes or compares (docs/compare.md), with its names and storage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kc {

enum class DType : std::uint8_t {
  float64,
  float32,
  hifloat32,      // f32 range, 11 explicit mantissa bits, stored as an f32 bit pattern
  float16,
  bfloat16,
  float8_e4m3fn,  // no inf; 0x7F/0xFF NaN; max 448
  float8_e5m2,    // IEEE-like; max 57344
  hifloat8,       // prefix-coded "dot" field, see numeric/formats.h
  float8_e8m0,    // exponent only, 2^(code-127); 0xFF NaN
  float4_e2m1,    // packed two per byte, low nibble first; max 6
  int4,           // packed two per byte, low nibble first; two's complement
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  boolean,
  complex32,   // two f16 (real, imag)
  complex64,   // two f32
  complex128,  // two f64
};
inline constexpr int kDTypeCount = static_cast<int>(DType::complex128) + 1;

enum class DKind : std::uint8_t { floating, integer, boolean, complex };

struct DTypeInfo {
  DType dtype;
  const char* name;         // canonical name used in reports, CSV and TOML (numpy/ml_dtypes spelling)
  int bits;                 // bits per element (4 for packed types; 32 for complex32)
  DKind kind;
  bool is_signed;           // integers: two's complement; floats: have a sign bit
  int mantissa_bits;        // explicit fraction bits of a float (hifloat8: the widest, 3); 0 otherwise
  const char* numpy_descr;  // npy "descr" for types numpy knows natively, else nullptr
};

const DTypeInfo& dtype_info(DType d);
inline const char* dtype_name(DType d) { return dtype_info(d).name; }
inline bool is_float(DType d) { return dtype_info(d).kind == DKind::floating; }
inline bool is_complex(DType d) { return dtype_info(d).kind == DKind::complex; }
inline bool is_integer(DType d) { return dtype_info(d).kind == DKind::integer; }
inline bool is_packed4(DType d) { return dtype_info(d).bits == 4; }

// Bytes that n elements occupy (packed 4-bit types round up to whole bytes).
std::size_t storage_bytes(DType d, std::size_t n);

// Accepts the canonical names and the usual aliases: f32/fp32/float, f16/half, bf16, e4m3/fp8_e4m3,
// e5m2, hif8, e8m0, fp4/e2m1, i8, u8, bool, c64 … Case-insensitive. nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view s);

// One line listing the accepted names, for error messages ("expected one of …").
std::string dtype_names_list();

}  // namespace kc
