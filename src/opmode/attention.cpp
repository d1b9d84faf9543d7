// Single-head attention o = softmax(q·Kᵀ·scale) · V, and the P-rounding variants of the lab (docs/lab.md):
//
//   def attention_row(q, K, V, round_p):          # m, l, o in f32; q, K, V bf16
//     for Kb, Vb in blocks(K, V):
//       s = q @ Kb.T / sqrt(d); m_new = max(m, s.max()); p = exp(s − m_new)
//       l = l·exp(m − m_new) + p.sum()             # the row sum uses the unrounded p
//       o = o·exp(m − m_new) + round_p(p) @ Vb     # only P·V sees the rounded P
//       m = m_new
//     return bf16(o / l)                            # the runner rounds to the row dtype
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "numeric/formats.h"
#include "opmode/op_util.h"

namespace kc::ops {
namespace {

struct Dims {
  std::size_t lq, lk, d, dv;
};
Dims dims(std::span<const Array> in) {
  return {static_cast<std::size_t>(in[0].shape[0]), static_cast<std::size_t>(in[1].shape[0]),
          static_cast<std::size_t>(in[0].shape[1]), static_cast<std::size_t>(in[2].shape[1])};
}

// Keys visible to query row i: all, or with `causal` the first lk − lq + i + 1 (queries are the last lq
// positions of the sequence).
std::size_t visible_keys(const Dims& n, std::size_t i, bool causal) {
  return causal ? n.lk - n.lq + i + 1 : n.lk;
}

Array attention_reference(std::span<const Array> in, const Params& p) {
  Dims n = dims(in);
  double scale = p.get("scale", 1.0 / std::sqrt(static_cast<double>(n.d)));
  bool causal = p.get("causal", 0) != 0;
  Array o{{static_cast<std::int64_t>(n.lq), static_cast<std::int64_t>(n.dv)},
          std::vector<double>(n.lq * n.dv)};
  const double *q = in[0].values.data(), *k = in[1].values.data(), *v = in[2].values.data();
  parallel_for(n.lq, 1, [&](std::size_t, std::size_t i0, std::size_t i1) {
    std::vector<double> s(n.lk);
    for (std::size_t i = i0; i < i1; ++i) {
      std::size_t nk = visible_keys(n, i, causal);
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t j = 0; j < nk; ++j) {
        double acc = 0;
        for (std::size_t t = 0; t < n.d; ++t) acc += q[i * n.d + t] * k[j * n.d + t];
        s[j] = acc * scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      double* oi = o.values.data() + i * n.dv;
      for (std::size_t j = 0; j < nk; ++j) {
        double e = std::exp(s[j] - m);
        l += e;
        for (std::size_t t = 0; t < n.dv; ++t) oi[t] += e * v[j * n.dv + t];
      }
      for (std::size_t t = 0; t < n.dv; ++t) oi[t] /= l;
    }
  });
  return o;
}

using RoundP = float (*)(float);

float e4m3(double x) {
  return static_cast<float>(decode8(DType::float8_e4m3fn, encode8(DType::float8_e4m3fn, x)));
}

Array attention_online(std::span<const Array> in, const Params& p, RoundP round_p) {
  Dims n = dims(in);
  auto block = static_cast<std::size_t>(p.get("block", 64));
  float scale = static_cast<float>(p.get("scale", 1.0 / std::sqrt(static_cast<double>(n.d))));
  bool causal = p.get("causal", 0) != 0;
  Array o{{static_cast<std::int64_t>(n.lq), static_cast<std::int64_t>(n.dv)},
          std::vector<double>(n.lq * n.dv)};
  std::vector<float> q(in[0].values.begin(), in[0].values.end()), k(in[1].values.begin(), in[1].values.end()),
      v(in[2].values.begin(), in[2].values.end());
  parallel_for(n.lq, 1, [&](std::size_t, std::size_t i0, std::size_t i1) {
    std::vector<float> s(block), pr(block), acc(n.dv);
    for (std::size_t i = i0; i < i1; ++i) {
      std::size_t nk = visible_keys(n, i, causal);
      float m = -std::numeric_limits<float>::infinity(), l = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (std::size_t b0 = 0; b0 < nk; b0 += block) {
        std::size_t nb = std::min(block, nk - b0);
        float m_new = m;
        for (std::size_t j = 0; j < nb; ++j) {
          float dot = 0;
          for (std::size_t t = 0; t < n.d; ++t) dot += q[i * n.d + t] * k[(b0 + j) * n.d + t];
          s[j] = dot * scale;
          m_new = std::max(m_new, s[j]);
        }
        float alpha = std::exp(m - m_new);  // 0 on the first block (m = −inf)
        float psum = 0;
        for (std::size_t j = 0; j < nb; ++j) {
          float pj = std::exp(s[j] - m_new);
          psum += pj;
          pr[j] = round_p(pj);
        }
        l = l * alpha + psum;
        for (std::size_t t = 0; t < n.dv; ++t) acc[t] *= alpha;
        for (std::size_t j = 0; j < nb; ++j)
          for (std::size_t t = 0; t < n.dv; ++t) acc[t] += pr[j] * v[(b0 + j) * n.dv + t];
        m = m_new;
      }
      for (std::size_t t = 0; t < n.dv; ++t) o.values[i * n.dv + t] = static_cast<double>(acc[t] / l);
    }
  });
  return o;
}

}  // namespace

void register_attention(Registry& r) {
  OpDef d;
  d.name = "attention";
  d.summary = "single-head attention, blockwise online softmax in f32 (flash attention's attention_row); q, K, V bf16";
  d.input_names = {"q [Lq, d]", "k [Lk, d]", "v [Lk, dv]"};
  d.param_names = {"block", "scale", "causal"};
  d.output_shape = [](std::span<const Shape> s, const Params& p) {
    expect_inputs("attention", s, 3, "q Lqxd; k Lkxd; v Lkxdv");
    expect_rank("attention", "q", s[0], 2, "Lqxd");
    expect_rank("attention", "k", s[1], 2, "Lkxd");
    expect_rank("attention", "v", s[2], 2, "Lkxdv");
    if (s[1][1] != s[0][1]) shape_error("attention", "k", fmt::format("Lkx{} (d of q)", s[0][1]), s[1]);
    if (s[2][0] != s[1][0]) shape_error("attention", "v", fmt::format("{}xdv (Lk of k)", s[1][0]), s[2]);
    double block = p.get("block", 64);
    if (!(block >= 1 && block <= 1 << 20 && block == std::floor(block)))
      fail("op attention: params: block: expected an integer in [1, 1048576], got {}", block);
    if (p.get("causal", 0) != 0 && s[0][0] > s[1][0])
      fail("op attention: shapes: expected Lq <= Lk with causal, got Lq={} Lk={}", s[0][0], s[1][0]);
    return Shape{s[0][0], s[2][1]};
  };
  d.input_dtype = DType::bfloat16;
  d.default_output = DType::bfloat16;
  d.reference = attention_reference;
  r.add_op(std::move(d));
  auto add = [&](const char* name, RoundP fn, const char* what) {
    r.add_candidate(
        "attention", name, [fn](auto in, auto& p, DType) { return attention_online(in, p, fn); }, what);
  };
  add(
      "p_f32", [](float x) { return x; }, "P kept in f32");
  add(
      "p_bf16", [](float x) { return bf16_to_f32(f32_to_bf16(x)); }, "P rounded to bf16 before P·V");
  add(
      "p_f16", [](float x) { return f16_to_f32(f32_to_f16(x)); }, "P rounded to f16 before P·V");
  add(
      "p_fp8", [](float x) { return e4m3(x); }, "P cast to fp8 e4m3 directly (small p underflow)");
  add(
      "p_fp8x448", [](float x) { return e4m3(x * 448.0f) / 448.0f; }, "fp8 e4m3 of P·448, then /448");
  add(
      "p_fp8x256", [](float x) { return e4m3(x * 256.0f) / 256.0f; }, "fp8 e4m3 of P·256, then /256");
}

}  // namespace kc::ops
