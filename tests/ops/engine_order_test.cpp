// The lab's other summation orders (KernelOptions::order, `order=SEED`, src/ops/order.h): each ordered kernel
// against an independent f64 computation (mathematically the same op), bitwise different from the default
// and from another seed (a benign implementation really differs), bitwise the same for any thread count, and
// seed 0 bitwise the default. Also the GEMM schedules' twin (scalar = tiled, decode row = prefill row).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "engine_test_util.h"
#include "ops/engine_ops.h"
#include "ops/packed_gemm.h"

namespace kc::engine {
namespace {

double rel_l2(const std::vector<float>& a, const std::vector<double>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::pow(a[i] - b[i], 2), n += b[i] * b[i];
  return std::sqrt(d / n);
}
std::vector<double> to_f64(const std::vector<float>& a) { return {a.begin(), a.end()}; }

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

TEST(OrderBlocks, CoverEveryIndexOnceAndDependOnSeed) {
  std::vector<OrderBlock> a, b;
  for (std::size_t n : {1u, 15u, 16u, 100u, 576u, 1536u}) {
    for (std::uint32_t seed : {1u, 2u, 7u, 1000u}) {
      order_blocks(seed, kSaltGemmK, n, 16, 8, a);
      std::vector<int> seen(n, 0);
      for (const auto& bl : a)
        for (std::size_t i = bl.begin; i < bl.begin + bl.len; ++i) ++seen[i];
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "n " << n << " seed " << seed;
      order_blocks(seed, kSaltGemmK, n, 16, 8, b);  // a function of its arguments only
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i].begin, b[i].begin);
    }
  }
  std::set<std::vector<std::size_t>> orders;  // seeds give many different orders of 1536 terms
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    order_blocks(seed, kSaltGemmK, 1536, 32, 8, a);
    std::vector<std::size_t> o;
    for (const auto& bl : a) o.push_back(bl.begin);
    orders.insert(o);
  }
  EXPECT_GE(orders.size(), 18u);
}

// ------------------------------------------------------------------------------------------ attention
struct AttnCase {
  std::size_t T, pos0, nh, nkv, hd;
};

std::vector<float> attend(const AttnCase& a, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, AttentionKernel kern, std::uint32_t order) {
  std::vector<float> out(a.T * a.nh * a.hd);
  KernelOptions o;
  o.attention = kern, o.order = order;
  attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, out.data(), nullptr, 0, o);
  return out;
}

std::vector<double> attend_f64(const AttnCase& a, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& v) {
  std::vector<double> out(a.T * a.nh * a.hd);
  for (std::size_t t = 0; t < a.T; ++t)
    for (std::size_t h = 0; h < a.nh; ++h) {
      const std::size_t g = h / (a.nh / a.nkv), n = a.pos0 + t + 1;
      std::vector<double> s(n, 0.0);
      double mx = -INFINITY, sum = 0;
      for (std::size_t j = 0; j < n; ++j) {
        for (std::size_t i = 0; i < a.hd; ++i)
          s[j] += static_cast<double>(q[(t * a.nh + h) * a.hd + i]) * k[(j * a.nkv + g) * a.hd + i];
        s[j] /= std::sqrt(static_cast<double>(a.hd));
        mx = std::max(mx, s[j]);
      }
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (std::size_t i = 0; i < a.hd; ++i) {
        double acc = 0;
        for (std::size_t j = 0; j < n; ++j) acc += s[j] * v[(j * a.nkv + g) * a.hd + i];
        out[(t * a.nh + h) * a.hd + i] = acc / sum;
      }
    }
  return out;
}

TEST(OrderedAttention, SameAttentionOtherBitsAnyThreadCount) {
  ThreadGuard guard;
  // prefill chunk at depth (GQA), a decode row deep in the cache, a short first chunk
  for (const AttnCase& a : {AttnCase{40, 300, 6, 2, 16}, AttnCase{1, 700, 4, 2, 32}, AttnCase{23, 0, 2, 1, 8}}) {
    const std::size_t nk = a.pos0 + a.T;
    const auto q = random_vec(a.T * a.nh * a.hd, 5, 1.5f), k = random_vec(nk * a.nkv * a.hd, 6, 1.5f),
               v = random_vec(nk * a.nkv * a.hd, 7);
    const auto ref = attend_f64(a, q, k, v);
    for (AttentionKernel kern : {AttentionKernel::exact, AttentionKernel::flash}) {
      const std::string what = std::string(kern == AttentionKernel::exact ? "exact" : "flash") + " T " +
                               std::to_string(a.T) + " pos0 " + std::to_string(a.pos0);
      set_thread_count(1);
      const auto d = attend(a, q, k, v, kern, 0), s1 = attend(a, q, k, v, kern, 1),
                 s2 = attend(a, q, k, v, kern, 2);
      EXPECT_LT(rel_l2(d, ref), 2e-6) << what;
      EXPECT_LT(rel_l2(s1, ref), 2e-6) << what;  // the same attention to f32 rounding
      EXPECT_LT(rel_l2(s2, ref), 2e-6) << what;
      if (a.pos0 > 0) {  // many key blocks: the orders really differ
        EXPECT_FALSE(bitwise_equal(s1, d)) << what;
        EXPECT_FALSE(bitwise_equal(s1, s2)) << what;
      }
      for (int n : {2, 3}) {
        set_thread_count(n);
        EXPECT_TRUE(bitwise_equal(attend(a, q, k, v, kern, 1), s1)) << what << ", " << n << " threads";
        EXPECT_TRUE(bitwise_equal(attend(a, q, k, v, kern, 0), d)) << what << ", " << n << " threads";
      }
    }
  }
}

// ------------------------------------------------------------------------------------------ GEMM
TEST(OrderedGemm, ScheduleTwinDecodeRowThreadsAndF64) {
  ThreadGuard guard;
  for (auto [m, k, n] : {std::tuple<std::size_t, std::size_t, std::size_t>{37, 576, 100}, {20, 1536, 64},
                         {300, 200, 65}}) {
    const auto x = random_vec(m * k, 1), w = random_vec(n * k, 2), b = random_vec(n, 3);
    const PackedMatrix p(w.data(), n, k);
    std::vector<double> ref(m * n);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double acc = b[j];
        for (std::size_t kk = 0; kk < k; ++kk) acc += static_cast<double>(x[i * k + kk]) * w[j * k + kk];
        ref[i * n + j] = acc;
      }
    std::vector<float> dflt(m * n);
    packed_gemm(x.data(), m, p, dflt.data(), b.data());
    for (GemmSchedule sch : {GemmSchedule{1, 0}, GemmSchedule{2, 0}, GemmSchedule{0, 64}, GemmSchedule{3, 64}}) {
      const std::string what = "m " + std::to_string(m) + " k " + std::to_string(k) + " order " +
                               std::to_string(sch.order) + " bf16_every " + std::to_string(sch.bf16_every);
      set_thread_count(1);
      std::vector<float> y(m * n), twin(m * n), row(n);
      packed_gemm(x.data(), m, p, y.data(), b.data(), sch);
      packed_gemm_scalar(x.data(), m, p, twin.data(), b.data(), sch);
      EXPECT_TRUE(bitwise_equal(y, twin)) << what << ": tiled vs scalar twin";
      packed_gemm(x.data() + (m - 1) * k, 1, p, row.data(), b.data(), sch);  // decode = prefill row
      EXPECT_TRUE(bitwise_equal(row, std::vector<float>(y.end() - n, y.end()))) << what << ": decode row";
      for (int t : {2, 3}) {
        set_thread_count(t);
        std::vector<float> y2(m * n);
        packed_gemm(x.data(), m, p, y2.data(), b.data(), sch);
        EXPECT_TRUE(bitwise_equal(y2, y)) << what << ", " << t << " threads";
      }
      EXPECT_FALSE(bitwise_equal(y, dflt)) << what;
      if (sch.bf16_every == 0) {
        EXPECT_LT(rel_l2(y, ref), 1e-6) << what;  // f32 rounding of a k-term sum
      } else {
        // the bug: partial sums rounded to bf16 (2^-9 relative each): far above f32 rounding
        EXPECT_GT(rel_l2(y, ref), 1e-4) << what;
        EXPECT_LT(rel_l2(y, ref), 2e-2) << what;
      }
    }
  }
}

TEST(OrderedGemm, BlasTilesOrderedCloseAndSeedZeroDefault) {
  const std::size_t m = 50, k = 700, n = 90;
  const auto x = random_vec(m * k, 8), w = random_vec(n * k, 9);
  std::vector<float> d(m * n), z(m * n), s1(m * n), s2(m * n);
  gemm_nt(x.data(), m, k, w.data(), n, d.data());
  gemm_nt(x.data(), m, k, w.data(), n, z.data(), nullptr, 0);
  gemm_nt(x.data(), m, k, w.data(), n, s1.data(), nullptr, 1);
  gemm_nt(x.data(), m, k, w.data(), n, s2.data(), nullptr, 2);
  EXPECT_TRUE(bitwise_equal(d, z));
  EXPECT_FALSE(bitwise_equal(d, s1));
  EXPECT_FALSE(bitwise_equal(s1, s2));
  EXPECT_LT(rel_l2(s1, to_f64(d)), 1e-6);
  EXPECT_LT(rel_l2(s2, to_f64(d)), 1e-6);
}

// ------------------------------------------------------------------------------------------ RMSNorm
TEST(OrderedRmsnorm, F32ReductionInDrawnOrderCloseToF64) {
  ThreadGuard guard;
  const std::size_t rows = 300, d = 576;
  const auto x = random_vec(rows * d, 4, 3.0f), w = random_vec(d, 5);
  std::vector<double> ref(rows * d);
  for (std::size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + 1e-5);
    for (std::size_t i = 0; i < d; ++i) ref[r * d + i] = w[i] * (x[r * d + i] * inv);
  }
  set_thread_count(1);
  std::vector<float> y0(rows * d), y1(rows * d), y2(rows * d), yb(rows * d);
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, y0.data());
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, y1.data(), 1);
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, y2.data(), 2);
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, yb.data(), 0, 8);  // the bug: rsqrt to 8 bits
  EXPECT_LT(rel_l2(y1, ref), 1e-6);
  EXPECT_LT(rel_l2(y2, ref), 1e-6);
  EXPECT_FALSE(bitwise_equal(y1, y0));
  EXPECT_FALSE(bitwise_equal(y1, y2));
  EXPECT_GT(rel_l2(yb, ref), 1e-4);  // 2^-9 relative per row at most
  EXPECT_LT(rel_l2(yb, ref), 3e-3);
  set_thread_count(3);
  std::vector<float> y1b(rows * d);
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, y1b.data(), 1);
  EXPECT_TRUE(bitwise_equal(y1b, y1));
}

}  // namespace
}  // namespace kc::engine
