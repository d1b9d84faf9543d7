// The packed GEMM (src/ops/packed_gemm.h): the AVX-512 kernel bitwise against its scalar twin (std::fma over
// k in order), the twin against an f64 product (so the formula y = x·wᵀ + b is checked independently), bits
// independent of thread count and of the row count (decode row = prefill row), and packing round trips.
#include "ops/packed_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/parallel.h"
#include "engine_test_util.h"

namespace kc::engine {
namespace {

constexpr double kEps = 1.1920929e-07;  // f32 machine epsilon

struct Case {
  std::size_t m, k, n;
  bool bias;
};

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]))
        << what << " element " << i << ": " << a[i] << " vs " << b[i];
}

TEST(PackedGemm, PackRoundTripsAndRows) {
  for (auto [n, k] : {std::pair<std::size_t, std::size_t>{1, 7}, {31, 5}, {32, 64}, {33, 3}, {100, 17}}) {
    const auto w = random_vec(n * k, 11);
    const PackedMatrix p(w.data(), n, k);
    EXPECT_EQ(p.rows(), n);
    EXPECT_EQ(p.cols(), k);
    EXPECT_EQ(p.unpack(), w);
    std::vector<float> r(k);
    p.row(n - 1, r.data());
    EXPECT_TRUE(std::equal(r.begin(), r.end(), w.begin() + (n - 1) * k));
    // panel order: panel p, k-major, 32 columns
    EXPECT_EQ(p.panel((n - 1) / kPanelCols)[(k - 1) * kPanelCols + (n - 1) % kPanelCols], w[n * k - 1]);
  }
}

// Rounds every value to bf16 (RNE), as the lab's bf16 base rounds weights.
std::vector<float> bf16_values(std::vector<float> v) {
  for (auto& x : v) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(x);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    x = std::bit_cast<float>(u);
  }
  return v;
}

// Weights that are all bf16 values are held as bf16 panels (half the bytes), read back exactly, and give the
// bits of the same values held as f32: one extra row with a non-bf16 value keeps a copy in f32 storage,
// whose first n columns must be the bf16 matrix's output bit for bit (columns are independent chains).
// Every path: decode GEMV (m = 1), row tails, other schedules, the scalar twin.
TEST(PackedGemm, Bf16PanelsGiveTheBitsOfTheSameValuesInF32) {
  for (auto [m, n, k] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 576, 576}, {1, 70, 64},
                         {13, 33, 17}, {24, 130, 96}, {57, 192, 576}, {3, 40, 1536}}) {
    const std::string what = "m " + std::to_string(m) + " n " + std::to_string(n) + " k " + std::to_string(k);
    const auto x = random_vec(m * k, 4), b = random_vec(n + 1, 6);
    auto w = bf16_values(random_vec(n * k, 5));
    const PackedMatrix p16(w.data(), n, k);
    ASSERT_TRUE(p16.bf16()) << what;
    EXPECT_EQ(p16.bytes(), p16.panels() * k * kPanelCols * 2);
    EXPECT_EQ(p16.unpack(), w) << what;
    auto w32 = w;
    for (std::size_t q = 0; q < k; ++q) w32.push_back(q == 0 ? 1.0f + 1e-6f : 0.5f);  // not a bf16
    const PackedMatrix p32(w32.data(), n + 1, k);
    ASSERT_FALSE(p32.bf16()) << what;
    for (GemmSchedule s : {GemmSchedule{}, GemmSchedule{5, 0}, GemmSchedule{0, 32}}) {
      std::vector<float> y16(m * n), y32(m * (n + 1)), twin(m * n);
      packed_gemm(x.data(), m, p16, y16.data(), b.data(), s);
      packed_gemm(x.data(), m, p32, y32.data(), b.data(), s);
      packed_gemm_scalar(x.data(), m, p16, twin.data(), b.data(), s);
      std::vector<float> y32n;
      for (std::size_t i = 0; i < m; ++i) y32n.insert(y32n.end(), &y32[i * (n + 1)], &y32[i * (n + 1)] + n);
      expect_bitwise(y16, y32n, what + " order " + std::to_string(s.order));
      expect_bitwise(y16, twin, what + " twin");
    }
  }
  std::vector<float> w = {1.0f, 0.5f, -2.0f, 3.0f};  // bf16 values, one with low bits set: f32 storage
  EXPECT_TRUE(PackedMatrix(w.data(), 2, 2).bf16());
  w[3] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(w[3]) | 1u);
  EXPECT_FALSE(PackedMatrix(w.data(), 2, 2).bf16());
}

TEST(PackedGemm, KernelMatchesScalarTwinBitwiseAndTwinMatchesF64) {
  // Row tails 1 … 13 of the 14-row kernel, column tails of the 32-wide panels, SmolLM2's k, decode m = 1.
  const Case cases[] = {{1, 576, 576, false},   {1, 64, 70, true},    {2, 33, 31, false},
                        {13, 17, 33, true},     {14, 96, 64, false},  {15, 96, 65, true},
                        {37, 96, 130, false},   {57, 576, 192, true}, {300, 40, 100, false},
                        {512, 24, 1100, false}, {29, 1536, 40, true}};
  for (const auto& c : cases) {
    const std::string what =
        "m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n);
    const auto x = random_vec(c.m * c.k, 1), w = random_vec(c.n * c.k, 2), b = random_vec(c.n, 3);
    const PackedMatrix p(w.data(), c.n, c.k);
    const float* bias = c.bias ? b.data() : nullptr;
    std::vector<float> y(c.m * c.n, NAN), twin(c.m * c.n, NAN);
    packed_gemm(x.data(), c.m, p, y.data(), bias);
    packed_gemm_scalar(x.data(), c.m, p, twin.data(), bias);
    expect_bitwise(y, twin, what);
    for (std::size_t i = 0; i < c.m; ++i)
      for (std::size_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (std::size_t q = 0; q < c.k; ++q) {
          ref += static_cast<double>(x[i * c.k + q]) * w[j * c.k + q];
          mag += std::abs(static_cast<double>(x[i * c.k + q]) * w[j * c.k + q]);
        }
        if (bias) ref += b[j], mag += std::abs(b[j]);
        // k fma roundings and one add: |error| <= (k + 1)·eps·Σ|terms|
        ASSERT_NEAR(twin[i * c.n + j], ref, (c.k + 1) * kEps * mag + 1e-30)
            << what << " i " << i << " j " << j;
      }
  }
}

TEST(PackedGemm, ScalarTwinIsOneFmaChainInKOrder) {
  // x·w = -1 + (1 + e)(1 - e) = -e² exactly, e = 2^-13. The chain in k order, fma(x1, w1, x0·w0), keeps
  // the exact product: -2^-26. Rounding (1 + e)(1 - e) first (mul + add) or summing in the other order
  // (fma(x0, w0, x1·w1)) gives 0.
  const float e = std::ldexp(1.0f, -13);
  const std::vector<float> x = {-1.0f, 1.0f + e}, w = {1.0f, 1.0f - e};
  const PackedMatrix p(w.data(), 1, 2);
  float y = 1, yv = 1;
  packed_gemm_scalar(x.data(), 1, p, &y);
  packed_gemm(x.data(), 1, p, &yv);
  EXPECT_EQ(y, -std::ldexp(1.0f, -26));
  EXPECT_EQ(yv, -std::ldexp(1.0f, -26));
  std::vector<float> x3(3 * 2);  // the same row in a 3-row product (micro-kernel path)
  for (std::size_t r = 0; r < 3; ++r) x3[2 * r] = x[0], x3[2 * r + 1] = x[1];
  std::vector<float> y3(3);
  packed_gemm(x3.data(), 3, p, y3.data());
  EXPECT_EQ(y3, std::vector<float>(3, -std::ldexp(1.0f, -26)));
}

TEST(PackedGemm, BitwiseSameForAnyThreadCountAndRowCount) {
  ThreadGuard g;
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{1, 9000}, {300, 9000}, {600, 576}, {100, 192}}) {
    const std::size_t k = 200;
    const auto x = random_vec(m * k, 4), w = random_vec(n * k, 5), b = random_vec(n, 6);
    const PackedMatrix p(w.data(), n, k);
    std::vector<float> y1(m * n), y;
    set_thread_count(1);
    packed_gemm(x.data(), m, p, y1.data(), b.data());
    for (int t : {2, 3, 5}) {
      set_thread_count(t);
      y.assign(m * n, 0.0f);
      packed_gemm(x.data(), m, p, y.data(), b.data());
      expect_bitwise(y, y1, "threads " + std::to_string(t) + " m " + std::to_string(m));
    }
    // each row alone (decode's GEMV) gives that row's bits of the m-row product
    for (std::size_t i : {std::size_t{0}, m / 2, m - 1}) {
      std::vector<float> row(n);
      packed_gemm(x.data() + i * k, 1, p, row.data(), b.data());
      expect_bitwise(row, std::vector<float>(y1.begin() + i * n, y1.begin() + (i + 1) * n),
                     "row " + std::to_string(i) + " of m " + std::to_string(m));
    }
  }
}

TEST(PackedGemm, SeveralOpsOfOneXEqualSingleOps) {
  // Q/K/V-like: three weights of one k (one with a bias), x packed once, tiles of all ops in one region.
  for (std::size_t m : {1, 40, 300}) {
    const std::size_t k = 700;  // two k blocks
    const std::size_t ns[] = {96, 33, 1100};
    const auto x = random_vec(m * k, 7), b = random_vec(33, 8);
    std::vector<PackedMatrix> ws;
    for (std::size_t o = 0; o < 3; ++o) {
      const auto w = random_vec(ns[o] * k, 9 + static_cast<unsigned>(o));
      ws.emplace_back(w.data(), ns[o], k);
    }
    std::vector<std::vector<float>> multi(3), single(3);
    std::vector<PackedGemmOp> ops;
    for (std::size_t o = 0; o < 3; ++o) {
      multi[o].assign(m * ns[o], NAN), single[o].assign(m * ns[o], NAN);
      ops.push_back({&ws[o], multi[o].data(), o == 1 ? b.data() : nullptr});
    }
    packed_gemm(x.data(), m, ops);
    for (std::size_t o = 0; o < 3; ++o) {
      packed_gemm_scalar(x.data(), m, ws[o], single[o].data(), o == 1 ? b.data() : nullptr);
      expect_bitwise(multi[o], single[o], "op " + std::to_string(o) + " m " + std::to_string(m));
    }
  }
}

}  // namespace
}  // namespace kc::engine
