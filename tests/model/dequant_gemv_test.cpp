// quant_gemv (the decode GEMV over ggml blocks) against dequantize_row, the load-time dequantizer that
// tests/py/test_gguf.py checks bit for bit against the gguf package: its in-register weights are the same
// bits (unit vectors read them out), its sums equal a scalar twin with the documented order bit for bit and
// an f64 reference to f32 rounding, row maps and bias apply, and the thread count changes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "model/dequant.h"
#include "numeric/formats.h"

namespace kc {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q8_0};

// Random blocks whose f16 scale and min (the first 2 or 4 bytes) are finite normals of either sign.
std::vector<std::uint8_t> random_blocks(GgmlType t, std::size_t rows, std::size_t cols, std::mt19937& rng) {
  const auto& info = ggml_type_info(t);
  const std::size_t nb = rows * cols / 32;
  std::vector<std::uint8_t> b(nb * info.type_size);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& x : b) x = static_cast<std::uint8_t>(byte(rng));
  const bool has_min = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
  for (std::size_t i = 0; i < nb; ++i) {
    std::uint8_t* blk = b.data() + i * info.type_size;
    for (int k = 0; k < (has_min ? 2 : 1); ++k) {
      const std::uint16_t h = f32_to_f16(scale(rng) + (k ? 0.0f : 1e-3f));
      std::memcpy(blk + 2 * k, &h, 2);
    }
  }
  return b;
}

QuantMatrix matrix(GgmlType t, const std::vector<std::uint8_t>& b, std::size_t rows, std::size_t cols) {
  return {t, b.data(), rows, cols, cols / 32 * ggml_type_info(t).type_size};
}

std::vector<float> dequantized(const QuantMatrix& m) {
  std::vector<float> w(m.rows * m.cols);
  dequantize_row(m.type, m.data, w.data(), w.size());
  return w;
}

// The documented order, written out scalar: lane l = Σ_{j ≡ l mod 32} fma in j order, then lanes
// added pairwise (16, 8, 4, 2, 1).
float scalar_twin(const float* w, const float* x, std::size_t n) {
  float acc[32] = {};
  for (std::size_t j = 0; j < n; ++j) acc[j % 32] = std::fma(w[j], x[j], acc[j % 32]);
  for (int h = 16; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) acc[l] = acc[l] + acc[l + h];
  return acc[0];
}

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(QuantGemv, SupportedTypes) {
  for (GgmlType t : kTypes) EXPECT_TRUE(quant_gemv_supported(t)) << ggml_type_info(t).name;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_K, GgmlType::Q6_K})
    EXPECT_FALSE(quant_gemv_supported(t)) << ggml_type_info(t).name;
}

// x = e_j reads column j of the in-register weights out exactly (fma(w, 1, 0) = w; every other lane 0).
TEST(QuantGemv, UnitVectorsReadBackDequantizeRowBitwise) {
  std::mt19937 rng(7);
  const std::size_t rows = 13, cols = 96;
  for (GgmlType t : kTypes) {
    const auto b = random_blocks(t, rows, cols, rng);
    const auto m = matrix(t, b, rows, cols);
    const auto w = dequantized(m);
    std::vector<float> x(cols, 0.0f), y(rows);
    std::size_t nonzero = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      x[j] = 1.0f;
      quant_gemv(m, x.data(), y.data());
      x[j] = 0.0f;
      for (std::size_t r = 0; r < rows; ++r) {
        const float ref = w[r * cols + j];
        nonzero += ref != 0;
        if (ref == 0) {  // −0 comes back as +0 (−0 + +0)
          EXPECT_EQ(y[r], 0.0f);
        } else {
          ASSERT_EQ(bits(y[r]), bits(ref)) << ggml_type_info(t).name << " r " << r << " j " << j;
        }
      }
    }
    EXPECT_GT(nonzero, rows * cols / 2) << ggml_type_info(t).name;
  }
}

// Edge scales (f16 subnormals, ±0, the largest finite, inf, NaN) in the block headers: the kernels' f16
// conversion (F16C where available) equals the scalar half_to_float; every product d·q is exact in f32
// (≤ 19 significant bits), so the expected value is d·q + m rounded once.
TEST(QuantGemv, EdgeScalesDequantizeExactly) {
  const std::uint16_t heads[] = {0x0001, 0x03FF, 0x8000, 0x0000, 0x7BFF, 0xFBFF,
                                 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x7D01};
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q8_0}) {
    const auto& info = ggml_type_info(t);
    for (std::uint16_t hd : heads)
      for (std::uint16_t hm : {std::uint16_t{0x0001}, std::uint16_t{0xBC00}, std::uint16_t{0x7C00}}) {
        std::vector<std::uint8_t> b(info.type_size);
        std::memcpy(b.data(), &hd, 2);
        if (t == GgmlType::Q4_1) std::memcpy(b.data() + 2, &hm, 2);
        for (std::size_t j = t == GgmlType::Q4_1 ? 4 : 2; j < b.size(); ++j)
          b[j] = static_cast<std::uint8_t>(j * 37 + 11);
        float y[32];
        dequantize_row(t, b.data(), y, 32);
        const double d = half_to_float(hd), m = t == GgmlType::Q4_1 ? half_to_float(hm) : 0.0;
        for (int j = 0; j < 32; ++j) {
          const int q = t == GgmlType::Q4_1 ? (j < 16 ? b[4 + j] & 0x0F : b[4 + j - 16] >> 4)
                                            : static_cast<std::int8_t>(b[2 + j]);
          const float want = static_cast<float>(t == GgmlType::Q4_1 ? d * q + m : d * q);  // Q8_0: no + 0
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(y[j])) << info.name << " " << hd << " " << hm << " j " << j;
          } else {
            EXPECT_EQ(bits(y[j]), bits(want)) << info.name << " " << hd << " " << hm << " j " << j;
          }
        }
        if (!std::isfinite(d) || !std::isfinite(m)) continue;
        // and the GEMV reads the same values (unit vectors)
        const QuantMatrix qm{t, b.data(), 1, 32, info.type_size};
        std::vector<float> x(32, 0.0f);
        for (int j = 0; j < 32; ++j) {
          float out;
          x[j] = 1.0f;
          quant_gemv(qm, x.data(), &out);
          x[j] = 0.0f;
          EXPECT_EQ(out, y[j]) << info.name << " " << hd << " " << hm << " j " << j;
          if (y[j] != 0) {
            EXPECT_EQ(bits(out), bits(y[j]));
          }
        }
      }
  }
}

TEST(QuantGemv, SumsEqualScalarTwinAndF64Reference) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t rows = 40, cols = 160;
  for (GgmlType t : kTypes) {
    const auto b = random_blocks(t, rows, cols, rng);
    const auto m = matrix(t, b, rows, cols);
    const auto w = dequantized(m);
    std::vector<float> x(cols), y(rows), bias(rows);
    for (auto& v : x) v = nd(rng);
    for (auto& v : bias) v = nd(rng);
    quant_gemv(m, x.data(), y.data());
    for (std::size_t r = 0; r < rows; ++r) {
      const float* wr = &w[r * cols];
      EXPECT_EQ(bits(y[r]), bits(scalar_twin(wr, x.data(), cols))) << ggml_type_info(t).name << " r " << r;
      double ref = 0, mag = 0;
      for (std::size_t j = 0; j < cols; ++j)
        ref += double(wr[j]) * x[j], mag += std::abs(double(wr[j]) * x[j]);
      EXPECT_LE(std::abs(y[r] - ref), 1e-6 * mag) << ggml_type_info(t).name << " r " << r;
    }
    // Row map (output r from stored row map[r]) and bias (added after the sum, as gemm_nt does).
    std::vector<std::uint32_t> map(rows);
    for (std::size_t r = 0; r < rows; ++r) map[r] = static_cast<std::uint32_t>((r * 7 + 3) % rows);
    std::vector<float> ym(rows);
    quant_gemv(m, x.data(), ym.data(), map.data(), bias.data());
    for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(bits(ym[r]), bits(y[map[r]] + bias[r]));
  }
}

// A batch of activation rows (decode steps of several sequences): each row bitwise its single-row GEMV, for
// every type, batch sizes around the kernel's groups of four, with row map and bias, in one region with
// another job.
TEST(QuantGemv, BatchRowsEqualSingleRowGemv) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t rows = 70, cols = 192;
  for (GgmlType t : kTypes) {
    const auto b = random_blocks(t, rows, cols, rng);
    const auto m = matrix(t, b, rows, cols);
    std::vector<std::uint32_t> map(rows);
    for (std::size_t r = 0; r < rows; ++r) map[r] = static_cast<std::uint32_t>((r * 11 + 5) % rows);
    std::vector<float> bias(rows);
    for (auto& v : bias) v = nd(rng);
    for (std::size_t B : {1, 2, 3, 4, 5, 8, 9, 24}) {
      std::vector<float> x(B * cols), y(B * rows), y2(B * rows);
      for (auto& v : x) v = nd(rng);
      const QuantGemv jobs[] = {{m, x.data(), y.data(), nullptr, nullptr, B},
                                {m, x.data(), y2.data(), map.data(), bias.data(), B}};
      quant_gemv(jobs);
      for (std::size_t i = 0; i < B; ++i) {
        std::vector<float> one(rows), one2(rows);
        quant_gemv(m, &x[i * cols], one.data());
        quant_gemv(m, &x[i * cols], one2.data(), map.data(), bias.data());
        ASSERT_EQ(0, std::memcmp(&y[i * rows], one.data(), rows * sizeof(float)))
            << ggml_type_info(t).name << " B " << B << " row " << i;
        ASSERT_EQ(0, std::memcmp(&y2[i * rows], one2.data(), rows * sizeof(float)))
            << ggml_type_info(t).name << " B " << B << " row " << i << " (map, bias)";
      }
    }
  }
}

TEST(QuantGemv, SameBitsForAnyThreadCount) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t rows = 700, cols = 576;  // 56-row chunks: 13 of them
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q8_0}) {
    const auto b = random_blocks(t, rows, cols, rng);
    const auto m = matrix(t, b, rows, cols);
    std::vector<float> x(cols);
    for (auto& v : x) v = nd(rng);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      set_thread_count(threads);
      std::vector<float> y(rows);
      quant_gemv(m, x.data(), y.data());
      if (first.empty()) first = y;
      EXPECT_EQ(0, std::memcmp(y.data(), first.data(), rows * sizeof(float))) << "threads " << threads;
    }
    set_thread_count(0);
  }
}

}  // namespace
}  // namespace kc
