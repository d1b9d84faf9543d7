// Causal GQA attention over the KV cache, tiled by (head, block of query rows) so that memory stays
// bounded by [kAttnBlockRows, n_keys] per task at any context length. Two kernels of equal (f32)
// precision: `exact` (one softmax over all visible keys) and `flash` (online softmax over key blocks).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/engine_ops.h"

namespace kc::engine {

namespace {

struct Geometry {
  std::size_t nh, nkv, hd, group, q_stride, kv_stride;
  float scale;
};

Geometry geometry(const AttentionShape& shape) {
  const std::size_t nh = shape.n_heads, nkv = shape.n_kv_heads, hd = shape.head_dim;
  KC_ASSERT(nkv > 0 && nh % nkv == 0, "attention: n_heads {} not a multiple of n_kv_heads {}", nh, nkv);
  return {nh, nkv, hd, nh / nkv, nh * hd, nkv * hd, 1.0f / std::sqrt(static_cast<float>(hd))};
}

// One (head h, query rows t0 … t1-1) tile, exact softmax: the row max over every visible key first, then
// p = exp(s − max), row sum in f64, one P·V GEMM, divide.
void exact_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                int layer) {
  const std::size_t g = h / G.group, rows = t1 - t0, hd = G.hd;
  const std::size_t n_keys = pos0 + t1;  // keys visible to the tile's last row
  thread_local std::vector<float> p_buf;
  p_buf.resize(rows * n_keys);
  float* p = p_buf.data();
  double row_sum[kAttnBlockRows];

  // s[r, j] = q[t0+r, h] · k[j, g]            [rows, n_keys]
  sgemm_nt_serial(q + t0 * G.q_stride + h * hd, G.q_stride, k + g * hd, G.kv_stride, p, n_keys, rows, n_keys,
                  hd);
  // p[r, j] = exp(s·scale − max) for j ≤ pos0+t0+r, else 0
  for (std::size_t r = 0; r < rows; ++r) {
    float* pr = p + r * n_keys;
    const std::size_t visible = pos0 + t0 + r + 1;
    float mx = -INFINITY;
    for (std::size_t j = 0; j < visible; ++j) {
      pr[j] *= G.scale;
      mx = std::max(mx, pr[j]);
    }
    double sum = 0;
    for (std::size_t j = 0; j < visible; ++j) {
      pr[j] = std::exp(pr[j] - mx);
      sum += pr[j];
    }
    std::fill(pr + visible, pr + n_keys, 0.0f);
    row_sum[r] = sum;
  }
  if (hook && *hook)
    (*hook)(TensorEvent{"attn.p", layer, static_cast<int>(h), pos0 + t0, rows, n_keys, {p, rows * n_keys}});
  // out[t0+r, h] = p[r] · v[:, g] / Σ p[r]     [rows, hd]
  float* o = out + t0 * G.q_stride + h * hd;
  sgemm_nn_serial(p, n_keys, v + g * hd, G.kv_stride, o, G.q_stride, rows, hd, n_keys);
  for (std::size_t r = 0; r < rows; ++r) {
    const float inv = static_cast<float>(1.0 / row_sum[r]);
    for (std::size_t i = 0; i < hd; ++i) o[r * G.q_stride + i] *= inv;
  }
}

// The same tile, flash attention 2 style (the seed's attention_row): keys in blocks of kFlashBlockKeys;
// per row a running max m, row sum l and output accumulator acc, all f32. For each block:
//   m' = max(m, max_j s_j),  p_j = exp(s_j − m'),  l = l·exp(m − m') + Σ p_j,  acc = acc·exp(m − m') + p·V_b
// and finally out = acc / l. The hook sees each block's p (after l took the unrounded p, before p·V_b).
void flash_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                int layer) {
  const std::size_t g = h / G.group, rows = t1 - t0, hd = G.hd, B = kFlashBlockKeys;
  const std::size_t n_keys = pos0 + t1;
  thread_local std::vector<float> s_buf, pv_buf, acc_buf;
  s_buf.resize(rows * B), pv_buf.resize(rows * hd), acc_buf.assign(rows * hd, 0.0f);
  float *s = s_buf.data(), *pv = pv_buf.data(), *acc = acc_buf.data();
  float m[kAttnBlockRows], l[kAttnBlockRows], alpha[kAttnBlockRows];
  std::fill(m, m + rows, -INFINITY), std::fill(l, l + rows, 0.0f);
  const float* qt = q + t0 * G.q_stride + h * hd;

  for (std::size_t j0 = 0; j0 < n_keys; j0 += B) {
    const std::size_t bw = std::min(B, n_keys - j0);
    // s[r, j] = q[t0+r, h] · k[j0+j, g]        [rows, bw]
    sgemm_nt_serial(qt, G.q_stride, k + j0 * G.kv_stride + g * hd, G.kv_stride, s, bw, rows, bw, hd);
    for (std::size_t r = 0; r < rows; ++r) {
      float* sr = s + r * bw;
      const std::size_t visible = pos0 + t0 + r + 1;  // keys 0 … visible-1
      const std::size_t cnt = visible > j0 ? std::min(bw, visible - j0) : 0;
      if (cnt == 0) {  // the whole block is in this row's future: nothing changes
        std::fill(sr, sr + bw, 0.0f);
        alpha[r] = 1.0f;
        continue;
      }
      float bmax = -INFINITY;
      for (std::size_t j = 0; j < cnt; ++j) {
        sr[j] *= G.scale;
        bmax = std::max(bmax, sr[j]);
      }
      const float m_new = std::max(m[r], bmax);
      float sum = 0.0f;
      for (std::size_t j = 0; j < cnt; ++j) {
        sr[j] = std::exp(sr[j] - m_new);
        sum += sr[j];
      }
      std::fill(sr + cnt, sr + bw, 0.0f);
      alpha[r] = std::exp(m[r] - m_new);  // 0 on the first block (m = -inf)
      l[r] = l[r] * alpha[r] + sum;       // the row sum takes the unrounded p
      m[r] = m_new;
    }
    if (hook && *hook)
      (*hook)(TensorEvent{"attn.p", layer, static_cast<int>(h), pos0 + t0, rows, bw, {s, rows * bw}});
    // acc = acc·alpha + p · v[j0 … j0+bw-1, g]   [rows, hd]
    sgemm_nn_serial(s, bw, v + j0 * G.kv_stride + g * hd, G.kv_stride, pv, hd, rows, hd, bw);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t i = 0; i < hd; ++i) acc[r * hd + i] = acc[r * hd + i] * alpha[r] + pv[r * hd + i];
  }
  float* o = out + t0 * G.q_stride + h * hd;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < hd; ++i) o[r * G.q_stride + i] = acc[r * hd + i] / l[r];
}

}  // namespace

void attention_causal(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                      const AttentionShape& shape, float* out, const TensorHook* hook, int layer,
                      const KernelOptions& opt) {
  init_blas();
  const Geometry G = geometry(shape);
  const std::size_t blocks = chunk_count(T, kAttnBlockRows);
  const bool flash = opt.attention == AttentionKernel::flash;
  parallel_for(G.nh * blocks, 1, [&](std::size_t task, std::size_t, std::size_t) {
    const std::size_t h = task / blocks;
    const std::size_t t0 = (task % blocks) * kAttnBlockRows, t1 = std::min(T, t0 + kAttnBlockRows);
    if (flash)
      flash_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer);
    else
      exact_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer);
  });
}

}  // namespace kc::engine
