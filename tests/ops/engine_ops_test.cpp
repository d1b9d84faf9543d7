// Scalar twins of the f32 engine ops (src/ops/engine_ops.h): each optimized op against a plain f64 loop,
// tolerance from f32 rounding of the op's own sums; determinism across thread counts; RoPE frequencies
// against golden values from transformers' rope init functions.
#include "ops/engine_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "engine_test_util.h"

namespace kc::engine {
namespace {

constexpr double kEps = 1.1920929e-07;  // f32 machine epsilon

// ---------------------------------------------------------------------------------------------- GEMM
void gemm_twin(std::size_t m, std::size_t k, std::size_t n, bool with_bias) {
  const auto x = random_vec(m * k, 1), w = random_vec(n * k, 2), b = random_vec(n, 3);
  std::vector<float> y(m * n);
  gemm_nt(x.data(), m, k, w.data(), n, y.data(), with_bias ? b.data() : nullptr);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double ref = with_bias ? b[j] : 0.0, mag = std::abs(ref);
      for (std::size_t p = 0; p < k; ++p) {
        ref += static_cast<double>(x[i * k + p]) * w[j * k + p];
        mag += std::abs(static_cast<double>(x[i * k + p]) * w[j * k + p]);
      }
      // f32 summation of k products: |error| <= k·eps·Σ|terms| (loose worst case, typical far below)
      ASSERT_NEAR(y[i * n + j], ref, 2 * (k + 1) * kEps * mag + 1e-30)
          << "m " << m << " i " << i << " j " << j;
    }
}

TEST(EngineGemm, MatchesScalarTwin) {
  gemm_twin(37, 96, 130, false);  // tails in every dimension
  gemm_twin(1, 96, 300, false);   // decode: GEMV path
  gemm_twin(5, 64, 70, true);     // bias
  gemm_twin(1, 64, 70, true);
  gemm_twin(600, 33, 65, false);  // more than one row tile
}

TEST(EngineGemm, TilingShapesMatchScalarTwin) {
  gemm_twin(512, 40, 192, false);   // two row blocks, columns split to make four tiles (2 × 96)
  gemm_twin(100, 40, 200, true);    // one row block, 3 column tiles of 80 (the last one 40 wide)
  gemm_twin(300, 24, 1100, false);  // 3 column tiles of 368
}

TEST(EngineGemm, BitwiseSameForAnyThreadCount) {
  ThreadGuard g;
  for (auto [m, n] : {std::pair<std::size_t, std::size_t>{1, 9000}, {300, 9000}, {600, 576}, {100, 192}}) {
    const std::size_t k = 200;  // n = 9000: wide tiles (n >= 8192); 576, 192: columns split for 2 threads
    const auto x = random_vec(m * k, 4), w = random_vec(n * k, 5);
    std::vector<float> y1(m * n), y;
    set_thread_count(1);
    gemm_nt(x.data(), m, k, w.data(), n, y1.data());
    for (int t : {2, 3, 5}) {
      set_thread_count(t);
      y.assign(m * n, 0.0f);
      gemm_nt(x.data(), m, k, w.data(), n, y.data());
      ASSERT_EQ(0, std::memcmp(y.data(), y1.data(), y.size() * sizeof(float)))
          << "threads " << t << " m " << m;
    }
  }
}

// ---------------------------------------------------------------------------------------------- pointwise
TEST(EngineRmsnorm, MatchesScalarTwin) {
  const std::size_t rows = 7, d = 576;
  const auto x = random_vec(rows * d, 6, 3.0f), w = random_vec(d, 7);
  std::vector<float> y(rows * d);
  rmsnorm(x.data(), w.data(), rows, d, 1e-5f, y.data());
  for (std::size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + 1e-5);
    for (std::size_t i = 0; i < d; ++i) {
      const double ref = w[i] * (x[r * d + i] * inv);
      ASSERT_NEAR(y[r * d + i], ref, 4 * kEps * std::abs(ref) + 1e-30);
    }
  }
  // in place (Qwen3 q/k-norm runs on its own output buffer)
  std::vector<float> z = x;
  rmsnorm(z.data(), w.data(), rows, d, 1e-5f, z.data());
  EXPECT_EQ(z, y);
}

// exp_fma against f64 exp over the whole finite range and at the edges it documents.
TEST(EngineExpPoly, MatchesF64Exp) {
  double worst = 0;
  std::vector<float> xs;
  for (float x = -87.33f; x < 88.37f; x += 0.000731f) xs.push_back(x);
  for (float x : random_vec(100000, 21, 1.0f)) xs.push_back(x);
  for (float x : random_vec(100000, 22, 1e-4f)) xs.push_back(x);
  std::vector<float> ys(xs.size());
  for (std::size_t i = 0; i < xs.size(); ++i) ys[i] = fastmath::exp_fma(xs[i]);  // a loop the compiler vectorises
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double ref = std::exp(static_cast<double>(xs[i]));
    worst = std::max(worst, std::abs(ys[i] - ref) / ref);
    ASSERT_EQ(ys[i], fastmath::exp_fma(xs[i])) << xs[i];  // the scalar call gives the vector loop's bits
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(fastmath::exp_fma(0.0f), 1.0f);
  EXPECT_EQ(fastmath::exp_fma(-0.0f), 1.0f);
  EXPECT_EQ(fastmath::exp_fma(-88.0f), 0.0f);
  EXPECT_EQ(fastmath::exp_fma(-INFINITY), 0.0f);
  EXPECT_EQ(fastmath::exp_fma(89.0f), INFINITY);
  EXPECT_EQ(fastmath::exp_fma(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(fastmath::exp_fma(NAN)));
  EXPECT_GT(fastmath::exp_fma(-87.33f), 0.0f);
}

TEST(EngineSiluMul, MatchesScalarTwin) {
  const std::size_t n = 100000;
  const auto g = random_vec(n, 8, 4.0f), u = random_vec(n, 9);
  std::vector<float> out(n);
  silu_mul(g.data(), u.data(), n, out.data());
  for (std::size_t i = 0; i < n; ++i) {
    const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    ASSERT_NEAR(out[i], ref, 6 * kEps * std::abs(ref) + 1e-37) << i;
  }
}

TEST(EngineSoftmax, MatchesScalarTwin) {
  const std::size_t rows = 3, n = 1000;
  auto x = random_vec(rows * n, 10, 5.0f);
  const auto x0 = x;
  softmax_rows(x.data(), rows, n);
  for (std::size_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x0[r * n + i]));
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(x0[r * n + i] - mx);
    for (std::size_t i = 0; i < n; ++i) {
      const double ref = std::exp(x0[r * n + i] - mx) / sum;
      ASSERT_NEAR(x[r * n + i], ref, (n + 4) * kEps * ref + 1e-37);
    }
  }
}

TEST(EngineAdd, Adds) {
  std::vector<float> y{1, 2, 3}, x{0.5f, -2, 4};
  add_inplace(y.data(), x.data(), 3);
  EXPECT_EQ(y, (std::vector<float>{1.5f, 0, 7}));
}

// ---------------------------------------------------------------------------------------------- RoPE
// transformers 5.24 ROPE_INIT_FUNCTIONS on head_dim 64 (scripts: see docs/engine.md).
const float kLlama3InvFreq[32] = {
    0x1.0000000000000p+0f,  0x1.53c38c0000000p-1f,  0x1.c2ef780000000p-2f,  0x1.2b3dc60000000p-2f,
    0x1.8d27600000000p-3f,  0x1.078d400000000p-3f,  0x1.5dc95a0000000p-4f,  0x1.d03cce0000000p-5f,
    0x1.3411900000000p-5f,  0x1.98de920000000p-6f,  0x1.0f53860000000p-6f,  0x1.681ada0000000p-7f,
    0x1.ddee9e0000000p-8f,  0x1.3d28040000000p-8f,  0x1.a4ee400000000p-9f,  0x1.67a23a0000000p-10f,
    0x1.132ba40000000p-11f, 0x1.765ba40000000p-13f, 0x1.46831a0000000p-14f, 0x1.b159020000000p-15f,
    0x1.1f91f00000000p-15f, 0x1.7da9e80000000p-16f, 0x1.fa8b860000000p-17f, 0x1.5024d60000000p-17f,
    0x1.be21880000000p-18f, 0x1.280d960000000p-18f, 0x1.88ec200000000p-19f, 0x1.04be680000000p-19f,
    0x1.5a0f4e0000000p-20f, 0x1.cb4a9a0000000p-21f, 0x1.30c94e0000000p-21f, 0x1.9483600000000p-22f};
const float kLinearInvFreq[32] = {
    0x1.0000000000000p-2f,  0x1.7ff2220000000p-3f,  0x1.1feb340000000p-3f,  0x1.afd1360000000p-4f,
    0x1.43d1360000000p-4f,  0x1.e5a8460000000p-5f,  0x1.6c310e0000000p-5f,  0x1.111aee0000000p-5f,
    0x1.99999a0000000p-6f,  0x1.33281a0000000p-6f,  0x1.ccab840000000p-7f,  0x1.59742a0000000p-7f,
    0x1.030dc60000000p-7f,  0x1.84869e0000000p-8f,  0x1.235a720000000p-8f,  0x1.b4f7e40000000p-9f,
    0x1.47ae140000000p-9f,  0x1.eb73600000000p-10f, 0x1.7089380000000p-10f, 0x1.145cee0000000p-10f,
    0x1.9e7c700000000p-11f, 0x1.36d21a0000000p-11f, 0x1.d22a500000000p-12f, 0x1.5d931c0000000p-12f,
    0x1.0624de0000000p-12f, 0x1.8929180000000p-13f, 0x1.26d42c0000000p-13f, 0x1.ba2e4a0000000p-14f,
    0x1.4b96c00000000p-14f, 0x1.f1502a0000000p-15f, 0x1.74eea60000000p-15f, 0x1.17a8e40000000p-15f};

TEST(EngineRope, InvFreqMatchesTransformers) {
  RopeParams llama3{500000.0, RopeScaling::llama3, 8.0, 1.0, 4.0, 8192.0};
  RopeParams linear{10000.0, RopeScaling::linear, 4.0};
  const auto a = rope_inv_freq(llama3, 64), b = rope_inv_freq(linear, 64);
  for (int i = 0; i < 32; ++i) {
    EXPECT_NEAR(a[i], kLlama3InvFreq[i], 2.5e-7 * kLlama3InvFreq[i]) << i;  // ≤ 2 ulp (powf vs pow)
    EXPECT_NEAR(b[i], kLinearInvFreq[i], 2.5e-7 * kLinearInvFreq[i]) << i;
  }
  const auto d = rope_inv_freq(RopeParams{100000.0}, 64);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(d[i], std::pow(100000.0, -2.0 * i / 64), 2.5e-7 * d[i]);
}

TEST(EngineRope, RotateHalfMatchesComplexRotation) {
  const std::size_t rows = 5, heads = 3, hd = 16, half = hd / 2, pos0 = 1000;
  const auto inv = rope_inv_freq(RopeParams{10000.0}, hd);
  std::vector<float> c(rows * half), s(rows * half);
  rope_tables(inv, pos0, rows, c.data(), s.data());
  auto x = random_vec(rows * heads * hd, 11);
  const auto x0 = x;
  rope_rotate_half(x.data(), rows, heads, hd, hd, c.data(), s.data());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(static_cast<float>(pos0 + r) * inv[i]);
        const std::size_t o = (r * heads + h) * hd;
        const double a = x0[o + i], b = x0[o + i + half];
        EXPECT_NEAR(x[o + i], a * std::cos(angle) - b * std::sin(angle), 1e-6 * (std::abs(a) + std::abs(b)));
        EXPECT_NEAR(x[o + i + half], b * std::cos(angle) + a * std::sin(angle),
                    1e-6 * (std::abs(a) + std::abs(b)));
      }
}

// Adjacent pairs on a head whose dims were permuted (i, two) → (two, i), the GGUF Q/K row order, equal
// rotate-half on the original order, bit for bit (the same products in the same order).
TEST(EngineRope, AdjacentPairsIsRotateHalfOnPermutedDims) {
  const std::size_t rows = 4, heads = 2, hd = 8, half = hd / 2;
  const auto inv = rope_inv_freq(RopeParams{10000.0}, hd);
  std::vector<float> c(rows * half), s(rows * half);
  rope_tables(inv, 7, rows, c.data(), s.data());
  auto x = random_vec(rows * heads * hd, 12);
  std::vector<float> xp(x.size());
  for (std::size_t rh = 0; rh < rows * heads; ++rh)
    for (std::size_t two = 0; two < 2; ++two)
      for (std::size_t i = 0; i < half; ++i) xp[rh * hd + 2 * i + two] = x[rh * hd + two * half + i];
  rope_rotate_half(x.data(), rows, heads, hd, hd, c.data(), s.data());
  rope_adjacent_pairs(xp.data(), rows, heads, hd, hd, c.data(), s.data());
  for (std::size_t rh = 0; rh < rows * heads; ++rh)
    for (std::size_t two = 0; two < 2; ++two)
      for (std::size_t i = 0; i < half; ++i)
        EXPECT_EQ(xp[rh * hd + 2 * i + two], x[rh * hd + two * half + i]);
}

// ---------------------------------------------------------------------------------------------- attention
struct AttnCase {
  std::size_t T, pos0, nh, nkv, hd;
};

std::vector<double> attention_twin(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, const AttnCase& a) {
  std::vector<double> out(a.T * a.nh * a.hd);
  for (std::size_t t = 0; t < a.T; ++t)
    for (std::size_t h = 0; h < a.nh; ++h) {
      const std::size_t g = h / (a.nh / a.nkv), n = a.pos0 + t + 1;
      std::vector<double> s(n);
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

TEST(EngineAttention, MatchesScalarTwin) {
  ThreadGuard guard;
  for (const AttnCase a : {AttnCase{37, 0, 6, 2, 16}, AttnCase{1, 70, 4, 4, 32}, AttnCase{40, 25, 4, 1, 8}}) {
    const std::size_t n_keys = a.pos0 + a.T;
    const auto q = random_vec(a.T * a.nh * a.hd, 13, 1.5f);
    const auto k = random_vec(n_keys * a.nkv * a.hd, 14, 1.5f), v = random_vec(n_keys * a.nkv * a.hd, 15);
    const auto ref = attention_twin(q, k, v, a);
    std::vector<float> out(ref.size()), out1(ref.size());
    attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, out.data());
    for (std::size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 2e-5) << "T " << a.T << " i " << i;
    set_thread_count(1);
    attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, out1.data());
    set_thread_count(3);
    attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, out.data());
    ASSERT_EQ(out, out1);
    set_thread_count(0);
  }
}

// The hook sees unnormalised p (row max → 1, zero above the diagonal) after the row sum is taken: scaling
// p by 2 in the hook doubles the output exactly, so the sum used the unscaled p.
TEST(EngineAttention, HookSeesPBeforePVAndSumUsesOriginalP) {
  const AttnCase a{33, 3, 2, 1, 8};
  const std::size_t n_keys = a.pos0 + a.T;
  const auto q = random_vec(a.T * a.nh * a.hd, 16), k = random_vec(n_keys * a.hd, 17),
             v = random_vec(n_keys * a.hd, 18);
  std::vector<float> plain(a.T * a.nh * a.hd), doubled(plain.size());
  attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, plain.data());
  std::size_t rows_seen = 0;
  std::mutex mu;
  TensorHook hook = [&](const TensorEvent& e) {
    ASSERT_EQ(e.name, "attn.p");
    ASSERT_EQ(e.layer, 4);
    std::lock_guard<std::mutex> g(mu);
    for (std::size_t r = 0; r < e.rows; ++r) {
      const std::size_t visible = e.pos0 + r + 1;
      float mx = 0;
      for (std::size_t j = 0; j < e.cols; ++j) {
        float& p = e.data[r * e.cols + j];
        if (j >= visible) {
          EXPECT_EQ(p, 0.0f);
        }
        mx = std::max(mx, p);
        p *= 2;
      }
      EXPECT_EQ(mx, 1.0f);
      ++rows_seen;
    }
  };
  attention_causal(q.data(), a.T, a.pos0, k.data(), v.data(), {a.nh, a.nkv, a.hd}, doubled.data(), &hook, 4);
  EXPECT_EQ(rows_seen, a.T * a.nh);
  for (std::size_t i = 0; i < plain.size(); ++i) ASSERT_EQ(doubled[i], 2 * plain[i]) << i;
}

}  // namespace
}  // namespace kc::engine
