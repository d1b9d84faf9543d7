// gemm_rows / gemm_rows_silu (src/ops/engine_ops.h), the row-major GEMM of the hybrid: against a plain f64
// loop (the scalar twin), and the bit-level claims the models rely on: grouping ops in one region, the
// fused residual add and the fused SiLU give the separate ops' bits, for any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "engine_test_util.h"
#include "ops/engine_ops.h"

namespace kc::engine {
namespace {

constexpr double kEps = 1.1920929e-07;

void expect_twin(const std::vector<float>& x, std::size_t m, std::size_t k, const std::vector<float>& w,
                 std::size_t n, const std::vector<float>& y) {
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        ref += static_cast<double>(x[i * k + p]) * w[j * k + p];
        mag += std::abs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
      }
      ASSERT_NEAR(y[i * n + j], ref, 2 * (k + 1) * kEps * mag + 1e-30)
          << "m " << m << " i " << i << " j " << j;
    }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EngineGemmRows, MatchesScalarTwin) {
  for (auto [m, k, n] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 96, 300},
                         {37, 96, 130},
                         {600, 33, 65},
                         {512, 40, 192}}) {
    const auto x = random_vec(m * k, 1), w = random_vec(n * k, 2);
    std::vector<float> y(m * n);
    const RowGemmOp op{w.data(), n, y.data()};
    gemm_rows(x.data(), m, k, {&op, 1});
    expect_twin(x, m, k, w, n, y);
  }
}

TEST(EngineGemmRows, GroupedResidualAndSiluAreTheSeparateOpsBits) {
  ThreadGuard guard;
  for (std::size_t m : {1, 40, 300, 700}) {
    const std::size_t k = 64, n1 = 576, n2 = 6, F = 256;
    const auto x = random_vec(m * k, 3), w1 = random_vec(n1 * k, 4), w2 = random_vec(n2 * k, 5);
    const auto wg = random_vec(F * k, 6), wu = random_vec(F * k, 7), res0 = random_vec(m * n1, 8);
    set_thread_count(1);
    // Reference: each op alone, then the pointwise ops separately.
    std::vector<float> a1(m * n1), a2(m * n2), g(m * F), u(m * F);
    RowGemmOp op1{w1.data(), n1, a1.data()}, op2{w2.data(), n2, a2.data(), nullptr, nullptr, true};
    gemm_rows(x.data(), m, k, {&op1, 1});
    gemm_rows(x.data(), m, k, {&op2, 1});
    std::vector<float> res = res0;
    add_inplace(res.data(), a1.data(), m * n1);
    const RowGemmOp gu[] = {{wg.data(), F, g.data()}, {wu.data(), F, u.data()}};
    gemm_rows(x.data(), m, k, gu);
    silu_mul(g.data(), u.data(), m * F, g.data());
    for (int t : {1, 2, 3}) {
      set_thread_count(t);
      std::vector<float> b1(m * n1), b2(m * n2), r = res0, bg(m * F), bu(m * F);
      const RowGemmOp both[] = {{w1.data(), n1, b1.data(), nullptr, r.data()},
                                {w2.data(), n2, b2.data(), nullptr, nullptr, true}};
      gemm_rows(x.data(), m, k, both);
      EXPECT_TRUE(same_bits(b1, a1)) << "m " << m << " threads " << t;
      EXPECT_TRUE(same_bits(b2, a2)) << "m " << m << " threads " << t;
      EXPECT_TRUE(same_bits(r, res)) << "m " << m << " threads " << t;
      gemm_rows_silu(x.data(), m, k, wg.data(), wu.data(), F, bg.data(), bu.data());
      EXPECT_TRUE(same_bits(bg, g)) << "m " << m << " threads " << t;
    }
  }
}

// one_col_tile: the narrow op in one column tile per row block, still the same products.
TEST(EngineGemmRows, OneColumnTileMatchesScalarTwin) {
  const std::size_t m = 300, k = 48, n = 200;
  const auto x = random_vec(m * k, 9), w = random_vec(n * k, 10);
  std::vector<float> y(m * n);
  const RowGemmOp op{w.data(), n, y.data(), nullptr, nullptr, true};
  gemm_rows(x.data(), m, k, {&op, 1});
  expect_twin(x, m, k, w, n, y);
}

TEST(EngineSigmoidGate, MatchesScalarTwin) {
  const std::size_t n = 70000;  // more than one pointwise chunk
  const auto x = random_vec(n, 11, 2.0f), g = random_vec(n, 12, 4.0f);
  std::vector<float> y = x;
  sigmoid_gate(y.data(), g.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const double ref = x[i] / (1.0 + std::exp(-static_cast<double>(g[i])));
    ASSERT_NEAR(y[i], ref, 4 * kEps * std::abs(ref) + 1e-30) << i;
  }
}

}  // namespace
}  // namespace kc::engine
