#include "ops/engine_moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

namespace kc::engine {

void moe_ffn(const float* xn, std::size_t T, const MoeWeights& w, float* out, std::uint32_t order,
             int sigmoid_bits, const TensorHook* hook, int layer, std::size_t pos0) {
  const std::size_t D = w.d, E = w.n_experts, K = w.top_k, Im = w.expert_ff, Fs = w.shared_ff;
  std::vector<float> probs(T * E);
  gemm_nt(xn, T, D, w.router, E, probs.data(), nullptr, order);
  if (hook && *hook) (*hook)(TensorEvent{"moe.router", layer, -1, pos0, T, E, {probs.data(), T * E}});
  softmax_rows(probs.data(), T, E);
  std::vector<std::vector<std::pair<std::size_t, float>>> routed(E);  // expert → (token, weight)
  std::vector<std::size_t> idx(E);
  for (std::size_t t = 0; t < T; ++t) {
    const float* p = &probs[t * E];
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    float sum = 0;
    for (std::size_t j = 0; j < K; ++j) sum += p[idx[j]];
    for (std::size_t j = 0; j < K; ++j)
      routed[idx[j]].push_back({t, w.norm_topk ? p[idx[j]] / sum : p[idx[j]]});
  }
  std::fill(out, out + T * D, 0.0f);
  std::vector<float> xe, ye, gu, act;
  for (std::size_t e = 0; e < E; ++e) {
    const auto& r = routed[e];
    if (r.empty()) continue;
    xe.resize(r.size() * D), ye.resize(r.size() * D);
    for (std::size_t j = 0; j < r.size(); ++j)
      std::memcpy(&xe[j * D], &xn[r[j].first * D], D * sizeof(float));
    gu.resize(r.size() * 2 * Im);
    gemm_nt(xe.data(), r.size(), D, w.expert_gate_up + e * 2 * Im * D, 2 * Im, gu.data(), nullptr, order);
    act.resize(r.size() * Im);
    for (std::size_t j = 0; j < r.size(); ++j)
      for (std::size_t i = 0; i < Im; ++i) {
        const float g = gu[j * 2 * Im + i];
        act[j * Im + i] = g / (1.0f + std::exp(-g)) * gu[j * 2 * Im + Im + i];
      }
    gemm_nt(act.data(), r.size(), Im, w.expert_down + e * D * Im, D, ye.data(), nullptr, order);
    for (std::size_t j = 0; j < r.size(); ++j)
      for (std::size_t i = 0; i < D; ++i) out[r[j].first * D + i] += ye[j * D + i] * r[j].second;
  }
  // Shared expert: the dense FFN's GEMMs (gemm_rows), then its sigmoid gate.
  std::vector<float> sgate(T * Fs), sup(T * Fs), sh(T * D), sg(T);
  const RowGemmOp gate_up[] = {{w.shared_gate, Fs, sgate.data()}, {w.shared_up, Fs, sup.data()}};
  gemm_rows(xn, T, D, gate_up, order);
  silu_mul(sgate.data(), sup.data(), T * Fs, sgate.data(), sigmoid_bits);
  const RowGemmOp down{w.shared_down, D, sh.data()};
  gemm_rows(sgate.data(), T, Fs, {&down, 1}, order);
  gemm_nt(xn, T, D, w.shared_gate_w, 1, sg.data(), nullptr, order);
  for (std::size_t t = 0; t < T; ++t) {
    const float gt = 1.0f / (1.0f + std::exp(-sg[t]));
    for (std::size_t i = 0; i < D; ++i) out[t * D + i] += gt * sh[t * D + i];
  }
}

}  // namespace kc::engine
