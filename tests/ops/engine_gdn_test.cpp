// Scalar twins of the Gated DeltaNet ops (src/ops/engine_gdn.h): the chunked prefill and the recurrence
// against the defining recurrence in f64 (S′ = αS; u = β(v − S′ᵀk); S = S′ + kuᵀ; o = Sᵀq/√dk), over several
// chunks and continuing from a stored state; conv, gates and gated norm against plain f64 loops;
// determinism across thread counts; the FLA casts move the result by about bf16 precision.
#include "ops/engine_gdn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "engine_test_util.h"

namespace kc::engine {
namespace {

struct Problem {
  GdnShape sh{2, 4, 16, 8};
  std::size_t T = 150;
  std::vector<float> q, k, v, g, beta;
  explicit Problem(std::size_t t, unsigned seed = 1, GdnShape shape = {2, 4, 16, 8}) : sh(shape), T(t) {
    const std::size_t KD = sh.n_k_heads * sh.dk, Hv = sh.n_v_heads;
    q = random_vec(T * KD, seed), k = random_vec(T * KD, seed + 1), v = random_vec(T * Hv * sh.dv, seed + 2);
    gdn_l2norm_rows(q.data(), T * sh.n_k_heads, sh.dk, sh.dk);
    gdn_l2norm_rows(k.data(), T * sh.n_k_heads, sh.dk, sh.dk);
    auto a = random_vec(T * Hv, seed + 3), b = random_vec(T * Hv, seed + 4);
    std::vector<float> A_log{0.1f, -1.0f, 0.5f, 1.5f}, dt{0.3f, -0.2f, 1.0f, 0.0f};
    g.resize(T * Hv), beta.resize(T * Hv);
    gdn_gates({a.data(), Hv}, {b.data(), Hv}, A_log.data(), dt.data(), T, Hv, g.data(), beta.data());
  }
  RowsView Q() const { return {q.data(), sh.n_k_heads * sh.dk}; }
  RowsView K() const { return {k.data(), sh.n_k_heads * sh.dk}; }
  RowsView V() const { return {v.data(), sh.n_v_heads * sh.dv}; }
};

// The defining recurrence in f64 from state S (updated), rows [t0, t1).
void twin(const Problem& p, std::size_t t0, std::size_t t1, std::vector<double>& S,
          std::vector<double>& out) {
  const auto& sh = p.sh;
  const std::size_t Hv = sh.n_v_heads, dk = sh.dk, dv = sh.dv, r = Hv / sh.n_k_heads, KD = sh.n_k_heads * dk;
  for (std::size_t t = t0; t < t1; ++t)
    for (std::size_t h = 0; h < Hv; ++h) {
      double* s = &S[h * dk * dv];
      const float* q = &p.q[t * KD + (h / r) * dk];
      const float* k = &p.k[t * KD + (h / r) * dk];
      const float* v = &p.v[t * Hv * dv + h * dv];
      const double a = std::exp(static_cast<double>(p.g[t * Hv + h])), b = p.beta[t * Hv + h];
      for (std::size_t i = 0; i < dk * dv; ++i) s[i] *= a;
      for (std::size_t j = 0; j < dv; ++j) {
        double m = 0;
        for (std::size_t i = 0; i < dk; ++i) m += s[i * dv + j] * k[i];
        const double u = b * (v[j] - m);
        for (std::size_t i = 0; i < dk; ++i) s[i * dv + j] += k[i] * u;
      }
      for (std::size_t j = 0; j < dv; ++j) {
        double o = 0;
        for (std::size_t i = 0; i < dk; ++i) o += s[i * dv + j] * q[i];
        out[t * Hv * dv + h * dv + j] = o / std::sqrt(static_cast<double>(dk));
      }
    }
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST(Gdn, ChunkedAndRecurrentMatchTheRecurrenceInF64) {
  const Problem p(150);  // chunks of 64, 64, 22
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, ON = p.T * sh.n_v_heads * sh.dv;
  std::vector<double> S(SN, 0.0), ref(ON);
  twin(p, 0, p.T, S, ref);
  std::vector<float> s1(SN, 0.0f), o1(ON), s2(SN, 0.0f), o2(ON);
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s1.data(), o1.data());
  gdn_recurrent(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s2.data(), o2.data());
  EXPECT_LT(max_abs_diff(o1, ref), 2e-5);
  EXPECT_LT(max_abs_diff(s1, S), 2e-5);
  EXPECT_LT(max_abs_diff(o2, ref), 2e-5);
  EXPECT_LT(max_abs_diff(s2, S), 2e-5);
  EXPECT_GT(max_abs_diff(s1, S), 0.0);  // f32, not a copy of the twin
}

TEST(Gdn, ChunkedContinuesFromAStoredState) {
  const Problem p(150, 5);
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, W = sh.n_v_heads * sh.dv;
  std::vector<double> S(SN, 0.0), ref(p.T * W);
  twin(p, 0, p.T, S, ref);
  std::vector<float> s(SN, 0.0f), o(p.T * W);
  const std::size_t split = 70;  // second call starts mid-way through the first call's second chunk
  auto sub = [&](RowsView r, std::size_t t0) { return RowsView{r.data + t0 * r.ld, r.ld}; };
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), split, sh, s.data(), o.data());
  const std::size_t Hv = sh.n_v_heads;
  gdn_chunked(sub(p.Q(), split), sub(p.K(), split), sub(p.V(), split), p.g.data() + split * Hv,
              p.beta.data() + split * Hv, p.T - split, sh, s.data(), o.data() + split * W);
  EXPECT_LT(max_abs_diff(o, ref), 2e-5);
  EXPECT_LT(max_abs_diff(s, S), 2e-5);
}

TEST(Gdn, AfterChunkSeesEveryChunkAndItsChangesFlowOn) {
  const Problem p(150, 9);
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, ON = p.T * sh.n_v_heads * sh.dv;
  std::vector<float> s(SN, 0.0f), o(ON), s0(SN, 0.0f), o0(ON);
  std::vector<std::size_t> seen;
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s0.data(), o0.data());
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s.data(), o.data(), {},
              [&](std::size_t done) { seen.push_back(done); });
  EXPECT_EQ(seen, (std::vector<std::size_t>{64, 128, 150}));
  EXPECT_EQ(o, o0);  // the barrier path computes the same bits
  std::vector<float> s2(SN, 0.0f), o2(ON);
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s2.data(), o2.data(), {},
              [&](std::size_t done) {
                if (done == 64) std::fill(s2.begin(), s2.end(), 0.0f);  // forget the first chunk
              });
  for (std::size_t i = 0; i < 64 * sh.n_v_heads * sh.dv; ++i) ASSERT_EQ(o2[i], o0[i]);
  EXPECT_NE(o2, o0);
}

TEST(Gdn, DeterministicAcrossThreadCounts) {
  ThreadGuard guard;
  const Problem p(200, 3);
  const auto& sh = p.sh;
  std::vector<std::vector<float>> outs;
  for (int t : {1, 2, 3}) {
    set_thread_count(t);
    std::vector<float> s(sh.n_v_heads * sh.dk * sh.dv, 0.0f), o(p.T * sh.n_v_heads * sh.dv);
    gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s.data(), o.data());
    o.insert(o.end(), s.begin(), s.end());
    outs.push_back(o);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

// Few heads with dv ≥ 64: the state update is split into column blocks of S (2 here); the split must be
// exact (twin), independent of the thread count, and the barrier path (after_chunk) must give the same bits.
TEST(Gdn, StateColumnBlocksAreExactAndDeterministic) {
  ThreadGuard guard;
  const Problem p(150, 13, GdnShape{1, 2, 32, 64});
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, ON = p.T * sh.n_v_heads * sh.dv;
  std::vector<double> S(SN, 0.0), ref(ON);
  twin(p, 0, p.T, S, ref);
  std::vector<std::vector<float>> outs;
  for (int t : {1, 2, 3}) {
    set_thread_count(t);
    for (bool barrier : {false, true}) {
      std::vector<float> s(SN, 0.0f), o(ON);
      std::function<void(std::size_t)> after;
      if (barrier) after = [](std::size_t) {};
      gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s.data(), o.data(), {}, after);
      EXPECT_LT(max_abs_diff(o, ref), 2e-5);
      EXPECT_LT(max_abs_diff(s, S), 2e-5);
      o.insert(o.end(), s.begin(), s.end());
      outs.push_back(o);
    }
  }
  for (std::size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[0], outs[i]) << i;
}

// Heads that forget fast: e^{G_r} of a chunk falls far below f32's normal range (the prefill flushes
// subnormals to zero); outputs and state still match the recurrence.
TEST(Gdn, FastDecayingHeadsMatchTheRecurrence) {
  Problem p(150, 17);
  for (auto& x : p.g) x = x * 20.0f - 2.0f;  // mean about -8 per token: G reaches -500 within a chunk
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, ON = p.T * sh.n_v_heads * sh.dv;
  std::vector<double> S(SN, 0.0), ref(ON);
  twin(p, 0, p.T, S, ref);
  std::vector<float> s(SN, 0.0f), o(ON);
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s.data(), o.data());
  double gmin = 0;  // lowest cumulative log-decay within a 64-row chunk
  for (std::size_t h = 0; h < sh.n_v_heads; ++h)
    for (std::size_t t = 0; t < p.T; t += 64) {
      double sum = 0;
      for (std::size_t r = t; r < std::min(t + 64, p.T); ++r)
        gmin = std::min(gmin, sum += p.g[r * sh.n_v_heads + h]);
    }
  EXPECT_LT(gmin, -88.0);  // e^G is subnormal or 0 in f32 there
  EXPECT_LT(max_abs_diff(o, ref), 2e-5);
  EXPECT_LT(max_abs_diff(s, S), 2e-5);
}

TEST(Gdn, FlaCastsAgreeToAboutBf16) {
  const Problem p(200, 11);
  const auto& sh = p.sh;
  const std::size_t SN = sh.n_v_heads * sh.dk * sh.dv, ON = p.T * sh.n_v_heads * sh.dv;
  std::vector<double> S(SN, 0.0), ref(ON);
  twin(p, 0, p.T, S, ref);
  std::vector<float> s(SN, 0.0f), o(ON);
  gdn_chunked(p.Q(), p.K(), p.V(), p.g.data(), p.beta.data(), p.T, sh, s.data(), o.data(), GdnOptions{true});
  double smax = 0;
  for (double x : S) smax = std::max(smax, std::abs(x));
  const double err = max_abs_diff(s, S) / smax;
  EXPECT_GT(err, 1e-4);  // bf16 (2^-8 relative) casts do show
  EXPECT_LT(err, 5e-2);  // … and nothing worse than a few bf16 units
}

TEST(Gdn, ConvGatesAndGatedNormMatchF64Loops) {
  const std::size_t T = 7, C = 5, K = 4;
  auto x = random_vec(T * C, 21), w = random_vec(C * K, 22), hist = random_vec((K - 1) * C, 23);
  std::vector<float> state = hist, y(T * C);
  gdn_causal_conv1d_silu({x.data(), C}, T, C, w.data(), K, state.data(), y.data());
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::size_t j = 0; j < K; ++j) {
        const long tau = static_cast<long>(t + j) - static_cast<long>(K - 1);
        const double xv = tau < 0 ? hist[(K - 1 + tau) * C + c] : x[tau * C + c];
        s += w[c * K + j] * xv;
      }
      EXPECT_NEAR(y[t * C + c], s / (1 + std::exp(-s)), 1e-5);
    }
  for (std::size_t i = 0; i < K - 1; ++i)
    for (std::size_t c = 0; c < C; ++c) EXPECT_EQ(state[i * C + c], x[(T - K + 1 + i) * C + c]);

  float a[2] = {25.0f, -3.0f}, b[2] = {0.5f, -2.0f}, A_log[2] = {0.0f, 1.0f}, dt[2] = {0.0f, 0.5f}, g[2],
        be[2];
  gdn_gates({a, 2}, {b, 2}, A_log, dt, 1, 2, g, be);
  EXPECT_FLOAT_EQ(g[0], -25.0f);  // softplus(x) = x above 20
  EXPECT_NEAR(g[1], -std::exp(1.0) * std::log1p(std::exp(-2.5)), 1e-6);
  EXPECT_NEAR(be[1], 1 / (1 + std::exp(2.0)), 1e-7);

  auto o = random_vec(2 * 3 * 4, 31), z = random_vec(2 * 3 * 4, 32), wn = random_vec(4, 33);
  auto o0 = o;
  gdn_gated_rmsnorm(o.data(), {z.data(), 12}, 2, 3, 4, wn.data(), 1e-6f);
  for (std::size_t r = 0; r < 6; ++r) {
    double ss = 0;
    for (std::size_t i = 0; i < 4; ++i) ss += double(o0[r * 4 + i]) * o0[r * 4 + i];
    const double inv = 1 / std::sqrt(ss / 4 + 1e-6);
    for (std::size_t i = 0; i < 4; ++i) {
      const double zz = z[r * 4 + i];
      EXPECT_NEAR(o[r * 4 + i], o0[r * 4 + i] * inv * wn[i] * zz / (1 + std::exp(-zz)), 1e-5);
    }
  }
}

// The pointwise loops use a vectorisable e^x (0 below -87.3, inf above 88): SiLU through the conv (K = 1,
// w = 1) and the gated norm's gate, over the whole float range that matters, against f64 to a few f32 ulp.
TEST(Gdn, SiluOfConvAndGatedNormMatchF64OverTheRange) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.025f);  // [-100, 100]
  x.push_back(1e-30f), x.push_back(-1e-30f), x.push_back(-1e30f), x.push_back(1e30f);
  x.push_back(std::nanf(""));
  const std::size_t n = x.size();
  const float one = 1.0f;
  std::vector<float> y(n), none;
  gdn_causal_conv1d_silu({x.data(), n}, 1, n, std::vector<float>(n, one).data(), 1, none.data(), y.data());
  auto silu64 = [](double v) { return v / (1 + std::exp(-v)); };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const double ref = silu64(x[i]);
    ASSERT_NEAR(y[i], ref, 4e-7 * std::abs(ref) + 1e-36) << "x = " << x[i];
  }
  EXPECT_TRUE(std::isnan(y[n - 1]));
  // gated norm with o = 1 everywhere and w = 1: o·rsqrt(1 + eps)·silu(z)
  std::vector<float> o(n - 1, 1.0f), w(n - 1, 1.0f);
  gdn_gated_rmsnorm(o.data(), {x.data(), n - 1}, 1, 1, n - 1, w.data(), 0.0f);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const double ref = silu64(x[i]);
    ASSERT_NEAR(o[i], ref, 4e-7 * std::abs(ref) + 1e-36) << "z = " << x[i];
  }
}

}  // namespace
}  // namespace kc::engine
