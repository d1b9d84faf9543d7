#include "numeric/dtype.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "core/error.h"

namespace kc {
namespace {

using K = DKind;

// Indexed by DType. mantissa_bits of a complex type is its component's (f16: 10, f32: 23, f64: 52).
constexpr std::array<DTypeInfo, kDTypeCount> kInfo = {{
    {DType::float64, "float64", 64, K::floating, true, 52, "<f8"},
    {DType::float32, "float32", 32, K::floating, true, 23, "<f4"},
    {DType::hifloat32, "hifloat32", 32, K::floating, true, 11, nullptr},
    {DType::float16, "float16", 16, K::floating, true, 10, "<f2"},
    {DType::bfloat16, "bfloat16", 16, K::floating, true, 7, nullptr},
    {DType::float8_e4m3fn, "float8_e4m3fn", 8, K::floating, true, 3, nullptr},
    {DType::float8_e5m2, "float8_e5m2", 8, K::floating, true, 2, nullptr},
    {DType::hifloat8, "hifloat8", 8, K::floating, true, 3, nullptr},
    {DType::float8_e8m0, "float8_e8m0", 8, K::floating, false, 0, nullptr},
    {DType::float4_e2m1, "float4_e2m1", 4, K::floating, true, 1, nullptr},
    {DType::int4, "int4", 4, K::integer, true, 0, nullptr},
    {DType::int8, "int8", 8, K::integer, true, 0, "|i1"},
    {DType::int16, "int16", 16, K::integer, true, 0, "<i2"},
    {DType::int32, "int32", 32, K::integer, true, 0, "<i4"},
    {DType::int64, "int64", 64, K::integer, true, 0, "<i8"},
    {DType::uint8, "uint8", 8, K::integer, false, 0, "|u1"},
    {DType::uint16, "uint16", 16, K::integer, false, 0, "<u2"},
    {DType::uint32, "uint32", 32, K::integer, false, 0, "<u4"},
    {DType::uint64, "uint64", 64, K::integer, false, 0, "<u8"},
    {DType::boolean, "bool", 8, K::boolean, false, 0, "|b1"},
    {DType::complex32, "complex32", 32, K::complex, true, 10, nullptr},
    {DType::complex64, "complex64", 64, K::complex, true, 23, "<c8"},
    {DType::complex128, "complex128", 128, K::complex, true, 52, "<c16"},
}};

constexpr bool table_is_indexed() {
  for (int i = 0; i < kDTypeCount; ++i)
    if (static_cast<int>(kInfo[i].dtype) != i) return false;
  return true;
}
static_assert(table_is_indexed(), "kInfo must be in DType order");

struct Aliases {
  DType dtype;
  const char* names;  // lower case, space separated
};

// Aliases besides the canonical names: short forms, torch/numpy/ml_dtypes spellings and safetensors
// dtype codes (lower-cased: F32, BF16, F8_E4M3, F8_E5M2, F8_E8M0, F4, I8, U8, BOOL, C64 …).
constexpr Aliases kAliases[] = {
    {DType::float64, "f64 fp64 double"},
    {DType::float32, "f32 fp32 float"},
    {DType::hifloat32, "hif32 hf32"},
    {DType::float16, "f16 fp16 half"},
    {DType::bfloat16, "bf16"},
    {DType::float8_e4m3fn, "e4m3 e4m3fn fp8_e4m3 fp8_e4m3fn float8_e4m3 f8_e4m3 f8_e4m3fn"},
    {DType::float8_e5m2, "e5m2 fp8_e5m2 f8_e5m2"},
    {DType::hifloat8, "hif8"},
    {DType::float8_e8m0, "e8m0 e8m0fnu float8_e8m0fnu fp8_e8m0 f8_e8m0 f8_e8m0fnu"},
    {DType::float4_e2m1, "fp4 e2m1 e2m1fn float4_e2m1fn fp4_e2m1 f4 f4_e2m1"},
    {DType::int4, "i4 s4"},
    {DType::int8, "i8"},
    {DType::int16, "i16"},
    {DType::int32, "i32"},
    {DType::int64, "i64"},
    {DType::uint8, "u8"},
    {DType::uint16, "u16"},
    {DType::uint32, "u32"},
    {DType::uint64, "u64"},
    {DType::boolean, "boolean"},
    {DType::complex32, "c32 chalf"},
    {DType::complex64, "c64 cfloat"},
    {DType::complex128, "c128 cdouble"},
};

bool in_list(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const std::size_t sp = list.find(' ');
    if (list.substr(0, sp) == name) return true;
    if (sp == std::string_view::npos) break;
    list.remove_prefix(sp + 1);
  }
  return false;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

const DTypeInfo& dtype_info(DType d) {
  const int i = static_cast<int>(d);
  KC_ASSERT(i >= 0 && i < kDTypeCount, "dtype_info: bad DType value {}", i);
  return kInfo[i];
}

std::size_t storage_bytes(DType d, std::size_t n) {
  const int bits = dtype_info(d).bits;
  if (bits == 4) return n / 2 + (n & 1);
  return n * static_cast<std::size_t>(bits / 8);
}

std::optional<DType> parse_dtype(std::string_view s) {
  std::string k = lower(s);
  // torch.float16, np.float16, numpy.float16 all name the same type.
  for (std::string_view prefix : {"torch.", "numpy.", "np.", "ml_dtypes."})
    if (k.starts_with(prefix)) {
      k.erase(0, prefix.size());
      break;
    }
  for (const auto& info : kInfo)
    if (k == info.name) return info.dtype;
  for (const auto& a : kAliases)
    if (in_list(a.names, k)) return a.dtype;
  return std::nullopt;
}

std::string dtype_names_list() {
  std::string r;
  for (const auto& info : kInfo) {
    if (!r.empty()) r += ", ";
    r += info.name;
    for (const auto& a : kAliases)
      if (a.dtype == info.dtype) {
        std::string al = a.names;
        std::replace(al.begin(), al.end(), ' ', '/');
        r += " (" + al + ")";
      }
  }
  return r;
}

}  // namespace kc
