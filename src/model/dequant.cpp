// Dequantization kernels. Each formula is written in the operation order of gguf-py's numpy code
// (gguf/quants.py), and fused multiply-add is disabled in this file: numpy rounds d*q and then + m
// separately, so a contracted FMA would differ in the last bit.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "model/dequant.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

#if defined(__AVX512F__) && defined(__F16C__)
#include <immintrin.h>
#define KC_ALWAYS_INLINE [[gnu::always_inline]] inline
#endif

namespace kc {
namespace {

constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},
    {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true},
    {GgmlType::Q8_1, "Q8_1", 32, 36, false},
    {GgmlType::Q2_K, "Q2_K", 256, 84, false},
    {GgmlType::Q3_K, "Q3_K", 256, 110, false},
    {GgmlType::Q4_K, "Q4_K", 256, 144, true},
    {GgmlType::Q5_K, "Q5_K", 256, 176, true},
    {GgmlType::Q6_K, "Q6_K", 256, 210, true},
    {GgmlType::Q8_K, "Q8_K", 256, 292, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, false},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, false},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, false},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, false},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, false},
    {GgmlType::BF16, "BF16", 1, 2, true},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, false},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, false},
    {GgmlType::MXFP4, "MXFP4", 32, 17, false},
    {GgmlType::NVFP4, "NVFP4", 64, 36, false},
    {GgmlType::Q1_0, "Q1_0", 128, 18, false},
};

inline std::uint16_t rd16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline std::uint32_t rd32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// Exact IEEE half → float (NaN payloads kept), inline: the GEMV converts two per block.
inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  std::uint32_t man = h & 0x3FF;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: value = man · 2^-24, exact in f32
    float v = static_cast<float>(man) * 0x1p-24f;
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline float h2f(const std::uint8_t* p) { return half_bits_to_float(rd16(p)); }

// One block of 32 values of each 32-element format: the single definition of the format, shared by the
// load-time dequantizer (dequantize_row) and the decode GEMV (quant_gemv), so both give the same bits.
inline void block_q4_0(const std::uint8_t* b, float* y) {
  const float d = h2f(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

#if defined(__AVX512F__) && defined(__F16C__)
// Q4_1 and Q8_0, the types of most GGUF checkpoints' weights, in AVX-512 (the compiler scalarised the
// nibble unpacking and the f16 scales): per element the same f32 operations as the scalar code below (d·q
// rounded, then + m rounded: fp-contract is off in this file), so the same bits.
#define KC_QUANT_SIMD 1
constexpr std::size_t kPrefetchBytes = 4096;

// A block's f16 scale (and min) by F16C, exact for finite values and infinities. NaN headers take the
// scalar conversion: vcvtph2ps sets the quiet bit of a signalling NaN, the gguf package keeps it.
KC_ALWAYS_INLINE void h2f_pair(const std::uint8_t* b, float& d, float& m) {
  const std::uint32_t v = rd32(b);
  if ((v & 0x7C00u) == 0x7C00u || (v & 0x7C000000u) == 0x7C000000u) {
    d = h2f(b), m = h2f(b + 2);
    return;
  }
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(v)));
  d = _mm_cvtss_f32(f), m = _mm_cvtss_f32(_mm_movehdup_ps(f));
}

KC_ALWAYS_INLINE void block_q4_1(const std::uint8_t* b, float* y) {
  float df, mf;
  h2f_pair(b, df, mf);
  const __m512 d = _mm512_set1_ps(df), m = _mm512_set1_ps(mf);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
  _mm512_storeu_ps(y, _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo))), m));
  _mm512_storeu_ps(y + 16, _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi))), m));
}

KC_ALWAYS_INLINE void block_q8_0(const std::uint8_t* b, float* y) {
  const std::uint16_t h = rd16(b);
  const float df = (h & 0x7C00u) == 0x7C00u ? h2f(b) : _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
  const __m512 d = _mm512_set1_ps(df);
  for (int k = 0; k < 2; ++k) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * k));
    _mm512_storeu_ps(y + 16 * k, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
  }
}
#else
inline void block_q4_1(const std::uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

inline void block_q8_0(const std::uint8_t* b, float* y) {
  const float d = h2f(b);
  const auto* qs = reinterpret_cast<const std::int8_t*>(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}
#endif

inline void block_q5_0(const std::uint8_t* b, float* y) {
  const float d = h2f(b);
  const std::uint32_t qh = rd32(b + 2);
  const std::uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
    y[j] = d * static_cast<float>(((qs[j] & 0x0F) | (h0 << 4)) - 16);
    y[j + 16] = d * static_cast<float>(((qs[j] >> 4) | (h1 << 4)) - 16);
  }
}

inline void block_q5_1(const std::uint8_t* b, float* y) {
  const float d = h2f(b), m = h2f(b + 2);
  const std::uint32_t qh = rd32(b + 4);
  const std::uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = (qh >> j) & 1, h1 = (qh >> (j + 16)) & 1;
    y[j] = d * static_cast<float>((qs[j] & 0x0F) | (h0 << 4)) + m;
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) | (h1 << 4)) + m;
  }
}

template <void (*Block)(const std::uint8_t*, float*), std::size_t Bytes>
void deq_blocks(const std::uint8_t* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i) Block(b + i * Bytes, y + 32 * i);
}

// The one summation of every quantized product: Σ_j w_j·x_j in 32 lanes of f32 fma (lane l sums the elements
// j ≡ l mod 32 in order, block after block), then the lanes added pairwise in a fixed tree. dot_blocks (one
// activation row, the block dequantized in registers) and dot_rows (several rows over one dequantized weight
// row) both run it, so a row of a batch gets the bits of the single-row GEMV.
#if defined(KC_QUANT_SIMD)
struct Lanes {  // a0 lane i is lane l = i, a1 lane i is lane l = 16 + i
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  KC_ALWAYS_INLINE void fma(const float* w, const float* x) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w), _mm512_loadu_ps(x), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + 16), _mm512_loadu_ps(x + 16), a1);
  }
  // Tree: l + (l+16) for l < 16, then l + (l+8), l + (l+4), l + (l+2), l + (l+1).
  KC_ALWAYS_INLINE float sum() const {
    const __m512 a16 = _mm512_add_ps(a0, a1);
    const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a16),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a16), 1)));
    const __m128 a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
    const __m128 a2 = _mm_add_ps(a4, _mm_movehl_ps(a4, a4));
    return _mm_cvtss_f32(_mm_add_ss(a2, _mm_shuffle_ps(a2, a2, 1)));
  }
};
#else
struct Lanes {
  float acc[32] = {};
  void fma(const float* w, const float* x) {
    for (int l = 0; l < 32; ++l) acc[l] = std::fma(w[l], x[l], acc[l]);
  }
  float sum() const {
    float a[32];
    std::copy(acc, acc + 32, a);
    for (int h = 16; h >= 1; h /= 2)
      for (int l = 0; l < h; ++l) a[l] = a[l] + a[l + h];
    return a[0];
  }
};
#endif

// Σ_j w_j·x_j over one row of nb blocks, each block dequantized into registers (Lanes above).
template <void (*Block)(const std::uint8_t*, float*), std::size_t Bytes>
float dot_blocks(const std::uint8_t* b, const float* x, std::size_t nb) {
  Lanes acc;
  for (std::size_t i = 0; i < nb; ++i) {
#if defined(KC_QUANT_SIMD)
    // The blocks are one stream (rows follow each other), yet without a software prefetch the loads
    // waited on memory: SmolLM2 decode took 36 ms of CPU per token on one core, 18 ms with 4 KiB ahead
    // (1 KiB: 22, 8 KiB: 24). Past the row end it fetches the next rows, which the caller reads next.
    _mm_prefetch(reinterpret_cast<const char*>(b + i * Bytes) + kPrefetchBytes, _MM_HINT_T0);
#endif
    alignas(64) float w[32];
    Block(b + i * Bytes, w);
    acc.fma(w, x + 32 * i);
  }
  return acc.sum();
}

// v + *bias, or v itself (not v + 0, which turns −0 into +0).
KC_ALWAYS_INLINE float with_bias(float v, const float* bias) { return bias ? v + *bias : v; }

// y[r·ldy + q] = Σ_j w[q·ldw + j]·x[r·ldx + j] (+ bias[q]) for WR weight rows q (dequantized f32) and XR
// activation rows r: each sum is dot_blocks' (Lanes: the same lanes in the same order, the same tree), with
// every weight vector loaded once for XR rows and every activation vector once for WR rows.
template <int WR, int XR>
KC_ALWAYS_INLINE void lanes_block(const float* w, std::size_t ldw, const float* x, std::size_t ldx, std::size_t nb,
                                  float* y, std::size_t ldy, const float* bias) {
  Lanes acc[WR][XR];
  for (std::size_t i = 0; i < nb; ++i) {
#if defined(KC_QUANT_SIMD)
    __m512 w0[WR], w1[WR];
#pragma GCC unroll 4
    for (int q = 0; q < WR; ++q)
      w0[q] = _mm512_loadu_ps(w + q * ldw + 32 * i), w1[q] = _mm512_loadu_ps(w + q * ldw + 32 * i + 16);
#pragma GCC unroll 4
    for (int r = 0; r < XR; ++r) {
      const __m512 x0 = _mm512_loadu_ps(x + r * ldx + 32 * i), x1 = _mm512_loadu_ps(x + r * ldx + 32 * i + 16);
#pragma GCC unroll 4
      for (int q = 0; q < WR; ++q)
        acc[q][r].a0 = _mm512_fmadd_ps(w0[q], x0, acc[q][r].a0), acc[q][r].a1 = _mm512_fmadd_ps(w1[q], x1, acc[q][r].a1);
    }
#else
    for (int q = 0; q < WR; ++q)
      for (int r = 0; r < XR; ++r) acc[q][r].fma(w + q * ldw + 32 * i, x + r * ldx + 32 * i);
#endif
  }
  for (int q = 0; q < WR; ++q)
    for (int r = 0; r < XR; ++r) y[r * ldy + q] = with_bias(acc[q][r].sum(), bias ? bias + q : nullptr);
}

// WR weight rows (dequantized, ldw apart) against all m activation rows: four at a time, then one by one.
template <int WR>
void rows_block(const float* w, std::size_t ldw, const float* x, std::size_t ldx, std::size_t m, std::size_t nb,
                float* y, std::size_t ldy, const float* bias) {
  std::size_t r = 0;
  for (; r + 4 <= m; r += 4) lanes_block<WR, 4>(w, ldw, x + r * ldx, ldx, nb, y + r * ldy, ldy, bias);
  for (; r < m; ++r) lanes_block<WR, 1>(w, ldw, x + r * ldx, ldx, nb, y + r * ldy, ldy, bias);
}

// Weight rows r0 … r1-1 of a quantized matrix (row_map: the file's row of each) against m activation rows:
// three weight rows at a time are dequantized into `w` (3·nb·32 floats) and multiplied by every activation
// row (rows_block). Each output is bitwise dot_blocks' for its row alone.
template <void (*Block)(const std::uint8_t*, float*), std::size_t Bytes>
void dot_rows(const std::uint8_t* data, std::size_t row_bytes, const std::uint32_t* row_map, std::size_t r0,
              std::size_t r1, const float* x, std::size_t m, std::size_t nb, float* w, float* y, std::size_t ldy,
              const float* bias) {
  const std::size_t cols = nb * 32;
  for (std::size_t r = r0; r < r1;) {
    const std::size_t g = std::min<std::size_t>(3, r1 - r);
    for (std::size_t q = 0; q < g; ++q) {
      const std::uint8_t* b = data + (row_map ? row_map[r + q] : r + q) * row_bytes;
      for (std::size_t i = 0; i < nb; ++i) Block(b + i * Bytes, w + q * cols + 32 * i);
    }
    const float* bq = bias ? bias + r : nullptr;
    if (g == 3)
      rows_block<3>(w, cols, x, cols, m, nb, y + r, ldy, bq);
    else if (g == 2)
      rows_block<2>(w, cols, x, cols, m, nb, y + r, ldy, bq);
    else
      rows_block<1>(w, cols, x, cols, m, nb, y + r, ldy, bq);
    r += g;
  }
}

using DotFn = float (*)(const std::uint8_t*, const float*, std::size_t);
using RowsFn = void (*)(const std::uint8_t*, std::size_t, const std::uint32_t*, std::size_t, std::size_t,
                        const float*, std::size_t, std::size_t, float*, float*, std::size_t, const float*);
struct QuantKernels {
  DotFn dot = nullptr;
  RowsFn rows = nullptr;
};
template <void (*Block)(const std::uint8_t*, float*), std::size_t Bytes>
constexpr QuantKernels kernels_of() {
  return {dot_blocks<Block, Bytes>, dot_rows<Block, Bytes>};
}

QuantKernels quant_kernels(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
      return kernels_of<block_q4_0, 18>();
    case GgmlType::Q4_1:
      return kernels_of<block_q4_1, 20>();
    case GgmlType::Q5_0:
      return kernels_of<block_q5_0, 22>();
    case GgmlType::Q5_1:
      return kernels_of<block_q5_1, 24>();
    case GgmlType::Q8_0:
      return kernels_of<block_q8_0, 34>();
    default:
      return {};
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes (ggml get_scale_min_k4).
inline void scale_min_k4(int j, const std::uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void deq_q4_k(const std::uint8_t* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, b += 144, y += 256) {
    const float d = h2f(b), dmin = h2f(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qs = b + 16;
    for (int k = 0; k < 4; ++k) {  // 64 values per step: low nibbles then high nibbles of 32 bytes
      int sc0, m0, sc1, m1;
      scale_min_k4(2 * k, scales, sc0, m0);
      scale_min_k4(2 * k + 1, scales, sc1, m1);
      const float d0 = d * static_cast<float>(sc0), dm0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), dm1 = dmin * static_cast<float>(m1);
      const std::uint8_t* q = qs + 32 * k;
      float* o = y + 64 * k;
      for (int l = 0; l < 32; ++l) {
        o[l] = d0 * static_cast<float>(q[l] & 0x0F) - dm0;
        o[l + 32] = d1 * static_cast<float>(q[l] >> 4) - dm1;
      }
    }
  }
}

void deq_q5_k(const std::uint8_t* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, b += 176, y += 256) {
    const float d = h2f(b), dmin = h2f(b + 2);
    const std::uint8_t* scales = b + 4;
    const std::uint8_t* qh = b + 16;
    const std::uint8_t* qs = b + 48;
    for (int k = 0; k < 4; ++k) {
      int sc0, m0, sc1, m1;
      scale_min_k4(2 * k, scales, sc0, m0);
      scale_min_k4(2 * k + 1, scales, sc1, m1);
      const float d0 = d * static_cast<float>(sc0), dm0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), dm1 = dmin * static_cast<float>(m1);
      const std::uint8_t* q = qs + 32 * k;
      float* o = y + 64 * k;
      for (int l = 0; l < 32; ++l) {
        const int h0 = (qh[l] >> (2 * k)) & 1, h1 = (qh[l] >> (2 * k + 1)) & 1;
        o[l] = d0 * static_cast<float>((q[l] & 0x0F) | (h0 << 4)) - dm0;
        o[l + 32] = d1 * static_cast<float>((q[l] >> 4) | (h1 << 4)) - dm1;
      }
    }
  }
}

void deq_q6_k(const std::uint8_t* b, float* y, std::size_t nb) {
  for (std::size_t i = 0; i < nb; ++i, b += 210, y += 256) {
    const float d = h2f(b + 208);
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h) {  // two halves of 128 values
      const std::uint8_t* ql = b + 64 * h;
      const std::uint8_t* qh = b + 128 + 32 * h;
      const std::int8_t* s = sc + 8 * h;
      float* o = y + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        o[l] = (d * static_cast<float>(s[is + 0])) * static_cast<float>(q1);
        o[l + 32] = (d * static_cast<float>(s[is + 2])) * static_cast<float>(q2);
        o[l + 64] = (d * static_cast<float>(s[is + 4])) * static_cast<float>(q3);
        o[l + 96] = (d * static_cast<float>(s[is + 6])) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

float half_to_float(std::uint16_t h) { return half_bits_to_float(h); }

const GgmlTypeInfo* ggml_type_info(std::uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<std::uint32_t>(t.type) == id) return &t;
  return nullptr;
}

std::string ggml_dequantizable_list() {
  std::string s;
  for (const auto& t : kTypes) {
    if (!t.dequantizable) continue;
    if (!s.empty()) s += ", ";
    s += t.name;
  }
  return s;
}

void dequantize_row(GgmlType t, const std::uint8_t* src, float* dst, std::size_t n) {
  const GgmlTypeInfo& info = ggml_type_info(t);
  KC_ASSERT(info.dequantizable && n % info.block_size == 0, "dequantize_row: type {} n {}", info.name, n);
  const std::size_t nb = n / info.block_size;
  switch (t) {
    case GgmlType::F32:
      std::memcpy(dst, src, n * 4);
      return;
    case GgmlType::F16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = half_to_float(rd16(src + 2 * i));
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(rd16(src + 2 * i)) << 16;
        std::memcpy(dst + i, &bits, 4);
      }
      return;
    case GgmlType::Q4_0:
      return deq_blocks<block_q4_0, 18>(src, dst, nb);
    case GgmlType::Q4_1:
      return deq_blocks<block_q4_1, 20>(src, dst, nb);
    case GgmlType::Q5_0:
      return deq_blocks<block_q5_0, 22>(src, dst, nb);
    case GgmlType::Q5_1:
      return deq_blocks<block_q5_1, 24>(src, dst, nb);
    case GgmlType::Q8_0:
      return deq_blocks<block_q8_0, 34>(src, dst, nb);
    case GgmlType::Q4_K:
      return deq_q4_k(src, dst, nb);
    case GgmlType::Q5_K:
      return deq_q5_k(src, dst, nb);
    case GgmlType::Q6_K:
      return deq_q6_k(src, dst, nb);
    default:
      KC_ASSERT(false, "dequantize_row: no kernel for {}", info.name);
  }
}

void dequantize(GgmlType t, std::span<const std::uint8_t> src, std::span<float> dst, std::size_t row_len) {
  const GgmlTypeInfo& info = ggml_type_info(t);
  KC_ASSERT(row_len > 0 && row_len % info.block_size == 0 && dst.size() % row_len == 0,
            "dequantize: {} row_len {} n {}", info.name, row_len, dst.size());
  const std::size_t rows = dst.size() / row_len;
  const std::size_t row_bytes = row_len / info.block_size * info.type_size;
  KC_ASSERT(src.size() >= rows * row_bytes, "dequantize: {} bytes for {} rows of {}", src.size(), rows,
            row_bytes);
  // Chunks of ~64K elements: enough work per task, independent of the thread count.
  const std::size_t chunk = std::max<std::size_t>(1, (std::size_t{1} << 16) / row_len);
  parallel_for(rows, chunk, [&](std::size_t, std::size_t r0, std::size_t r1) {
    dequantize_row(t, src.data() + r0 * row_bytes, dst.data() + r0 * row_len, (r1 - r0) * row_len);
  });
}

bool quant_gemv_supported(GgmlType t) { return quant_kernels(t).dot != nullptr; }

void quant_gemv(std::span<const QuantGemv> jobs) {
  // Chunks of ~32K weights per matrix (functions of the shapes only), all matrices' chunks in one
  // parallel region: decode's Q/K/V and gate/up then wait on one barrier instead of three or two.
  std::vector<std::size_t> first_chunk{0};  // job j owns chunks [first_chunk[j], first_chunk[j+1])
  std::vector<std::size_t> rows_per_chunk;
  std::size_t widest = 0;
  for (const auto& j : jobs) {
    const QuantMatrix& w = j.w;
    const GgmlTypeInfo& info = ggml_type_info(w.type);
    KC_ASSERT(quant_kernels(w.type).dot && w.cols % 32 == 0 && w.row_bytes == w.cols / 32 * info.type_size &&
                  j.m >= 1,
              "quant_gemv: type {} cols {} row_bytes {} m {}", info.name, w.cols, w.row_bytes, j.m);
    rows_per_chunk.push_back(std::max<std::size_t>(8, (std::size_t{1} << 15) / w.cols));
    first_chunk.push_back(first_chunk.back() + chunk_count(w.rows, rows_per_chunk.back()));
    widest = std::max(widest, w.cols);
  }
  parallel_for(first_chunk.back(), 1, [&](std::size_t c, std::size_t, std::size_t) {
    const std::size_t ji =
        std::upper_bound(first_chunk.begin(), first_chunk.end(), c) - first_chunk.begin() - 1;
    const QuantGemv& j = jobs[ji];
    const QuantKernels K = quant_kernels(j.w.type);
    const std::size_t nb = j.w.cols / 32;
    const std::size_t r0 = (c - first_chunk[ji]) * rows_per_chunk[ji];
    const std::size_t r1 = std::min(j.w.rows, r0 + rows_per_chunk[ji]);
    if (j.m > 1) {  // y[i, r] for every activation row i: the same sums, each weight row dequantized once
      thread_local std::vector<float> w_rows;
      w_rows.resize(3 * widest);
      K.rows(j.w.data, j.w.row_bytes, j.row_map, r0, r1, j.x, j.m, nb, w_rows.data(), j.y, j.w.rows, j.bias);
      return;
    }
    for (std::size_t r = r0; r < r1; ++r) {
      const std::uint8_t* row = j.w.data + (j.row_map ? j.row_map[r] : r) * j.w.row_bytes;
      j.y[r] = with_bias(K.dot(row, j.x, nb), j.bias ? j.bias + r : nullptr);
    }
  });
}

void quant_gemv(const QuantMatrix& w, const float* x, float* y, const std::uint32_t* row_map,
                const float* bias) {
  const QuantGemv job{w, x, y, row_map, bias};
  quant_gemv({&job, 1});
}

}  // namespace kc
