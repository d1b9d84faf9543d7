// ggml tensor types (the element types of GGUF files) and their dequantization to f32.
//
// Block layouts follow ggml `ggml-common.h`; values equal the `gguf` PyPI package's
// `gguf.quants.dequantize` bit for bit (same f32 operations in the same order, no fused multiply-add),
// which tests/py/test_gguf.py checks for every supported type.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace kc {

// ggml type ids as stored in a GGUF tensor info (ggml.h `enum ggml_type`; gaps are removed types).
enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
  Q1_0 = 41,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;          // "Q4_1"
  std::uint32_t block_size;  // elements per block
  std::uint32_t type_size;   // bytes per block
  bool dequantizable;        // dequantize_row() supports it
};

// nullptr for an id that is not a ggml type (or one ggml removed).
const GgmlTypeInfo* ggml_type_info(std::uint32_t id);
inline const GgmlTypeInfo& ggml_type_info(GgmlType t) {
  return *ggml_type_info(static_cast<std::uint32_t>(t));
}
// "F32, F16, BF16, Q4_0, …": the types dequantize_row supports, for error messages.
std::string ggml_dequantizable_list();

// Dequantizes n elements (a multiple of the block size) from `src` (n / block_size blocks) into dst.
// KC_ASSERTs that the type is dequantizable: callers check GgmlTypeInfo::dequantizable and throw a
// kc::Error naming the tensor first.
void dequantize_row(GgmlType t, const std::uint8_t* src, float* dst, std::size_t n);

// Dequantizes a [rows, row_len] tensor, rows in parallel (deterministic: every element is computed the
// same way whatever the thread count). src must hold rows * row_len / block_size blocks.
void dequantize(GgmlType t, std::span<const std::uint8_t> src, std::span<float> dst, std::size_t row_len);

// A row-major [rows, cols] matrix of ggml blocks, e.g. one tensor of a mapped GGUF file (not owned).
struct QuantMatrix {
  GgmlType type = GgmlType::F32;
  const std::uint8_t* data = nullptr;
  std::size_t rows = 0, cols = 0, row_bytes = 0;
};

// Whether quant_gemv has a kernel for t: the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
bool quant_gemv_supported(GgmlType t);

// Decode GEMV straight from the blocks: y[r] = Σ_j W[i, j] · x[j] (+ bias[r]), i = row_map ? row_map[r] : r,
// where W[i, j] is bitwise the value dequantize_row gives (the same block code) and each product is an
// f32 fma into 32 lanes added in a fixed tree: only the summation order differs from an f32 GEMV over the
// dequantized weights. Rows in fixed chunks (kc::parallel_for): the same bits for any thread count.
void quant_gemv(const QuantMatrix& w, const float* x, float* y, const std::uint32_t* row_map = nullptr,
                const float* bias = nullptr);
// Several GEMVs in one parallel region (decode's Q/K/V, gate/up), each of m activation rows (a batch of
// decode steps: x [m, cols], y [m, rows], row-major): every element as quant_gemv computes it for that row
// alone, bit for bit (a batch row's arithmetic does not depend on the other rows); with m > 1 each weight
// row is dequantized once for all m rows.
struct QuantGemv {
  QuantMatrix w;
  const float* x = nullptr;
  float* y = nullptr;
  const std::uint32_t* row_map = nullptr;
  const float* bias = nullptr;
  std::size_t m = 1;
};
void quant_gemv(std::span<const QuantGemv> jobs);

// Exact IEEE half → float (NaN payloads kept, like numpy's astype).
float half_to_float(std::uint16_t h);

}  // namespace kc
