// engine::moe_ffn (src/ops/engine_moe.h) against its scalar twin: the Qwen3-Next sparse MoE block written
// as plain f64 loops (router softmax, top-k with ties to the lower index, renormalised weights, experts, the
// sigmoid-gated shared expert); and the same bits for any thread count.
#include "ops/engine_moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine_test_util.h"

namespace kc::engine {
namespace {

double silu(double g) { return g / (1.0 + std::exp(-g)); }

// y[n] = W[n, k] · x[k] in f64.
std::vector<double> matvec(const float* W, std::size_t n, std::size_t k, const std::vector<double>& x) {
  std::vector<double> y(n, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < k; ++j) y[i] += W[i * k + j] * x[j];
  return y;
}

TEST(EngineMoe, MatchesScalarTwin) {
  ThreadGuard guard;
  const std::size_t T = 37, D = 48, E = 6, K = 2, Im = 24, Fs = 40;
  const auto xn = random_vec(T * D, 1), router = random_vec(E * D, 2, 0.5f);
  const auto gu = random_vec(E * 2 * Im * D, 3, 0.2f), down = random_vec(E * D * Im, 4, 0.2f);
  const auto sg = random_vec(Fs * D, 5, 0.2f), su = random_vec(Fs * D, 6, 0.2f),
             sd = random_vec(D * Fs, 7, 0.2f);
  const auto sgw = random_vec(D, 8, 0.2f);
  for (bool norm_topk : {true, false}) {
    const MoeWeights w{D,         E,           K,         Im,        Fs,        norm_topk, router.data(),
                       gu.data(), down.data(), sg.data(), su.data(), sd.data(), sgw.data()};
    std::vector<float> out(T * D), out3(T * D);
    set_thread_count(1);
    int router_events = 0;
    const TensorHook hook = [&](const TensorEvent& e) {
      if (e.name == "moe.router" && e.layer == 5 && e.rows == T && e.cols == E) ++router_events;
    };
    moe_ffn(xn.data(), T, w, out.data(), 0, 23, &hook, 5, 0);
    EXPECT_EQ(router_events, 1);
    set_thread_count(3);
    moe_ffn(xn.data(), T, w, out3.data(), 0, 23, nullptr, 5, 0);
    EXPECT_EQ(0, std::memcmp(out.data(), out3.data(), out.size() * sizeof(float)));
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> x(xn.begin() + t * D, xn.begin() + (t + 1) * D);
      std::vector<double> p = matvec(router.data(), E, D, x);
      const double mx = *std::max_element(p.begin(), p.end());
      double z = 0;
      for (auto& v : p) z += (v = std::exp(v - mx));
      for (auto& v : p) v /= z;
      std::vector<std::size_t> idx(E);
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
      double sum = 0;
      for (std::size_t j = 0; j < K; ++j) sum += p[idx[j]];
      std::vector<double> ref(D, 0.0);
      for (std::size_t j = 0; j < K; ++j) {
        const std::size_t e = idx[j];
        const std::vector<double> h = matvec(gu.data() + e * 2 * Im * D, 2 * Im, D, x);
        std::vector<double> a(Im);
        for (std::size_t i = 0; i < Im; ++i) a[i] = silu(h[i]) * h[Im + i];
        const std::vector<double> y = matvec(down.data() + e * D * Im, D, Im, a);
        const double wt = norm_topk ? p[e] / sum : p[e];
        for (std::size_t i = 0; i < D; ++i) ref[i] += wt * y[i];
      }
      const std::vector<double> g = matvec(sg.data(), Fs, D, x), u = matvec(su.data(), Fs, D, x);
      std::vector<double> a(Fs);
      for (std::size_t i = 0; i < Fs; ++i) a[i] = silu(g[i]) * u[i];
      const std::vector<double> y = matvec(sd.data(), D, Fs, a);
      const double gate = 1.0 / (1.0 + std::exp(-matvec(sgw.data(), 1, D, x)[0]));
      for (std::size_t i = 0; i < D; ++i) {
        const double r = ref[i] + gate * y[i];
        ASSERT_NEAR(out[t * D + i], r, 1e-5 * (1 + std::abs(r))) << "t " << t << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kc::engine
