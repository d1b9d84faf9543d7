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

// Row helpers in kLanes independent lanes so that they vectorise (a plain running max or sum is a serial
// dependency chain the compiler must keep in order); the lanes are merged in a fixed order, so the result
// depends on n only.
constexpr std::size_t kLanes = 16;

// x[j] *= scale for j < n; returns max_j x[j].
float scale_and_max(float* x, std::size_t n, float scale) {
  float mx[kLanes];
  std::fill(mx, mx + kLanes, -INFINITY);
  std::size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) {
      x[j + l] *= scale;
      mx[l] = std::max(mx[l], x[j + l]);
    }
  for (; j < n; ++j) {
    x[j] *= scale;
    mx[0] = std::max(mx[0], x[j]);
  }
  float m = mx[0];
  for (std::size_t l = 1; l < kLanes; ++l) m = std::max(m, mx[l]);
  return m;
}

// max_j x[j] (n ≥ 1).
float row_max(const float* x, std::size_t n) {
  float mx[kLanes];
  std::fill(mx, mx + kLanes, -INFINITY);
  std::size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) mx[l] = std::max(mx[l], x[j + l]);
  for (; j < n; ++j) mx[0] = std::max(mx[0], x[j]);
  float m = mx[0];
  for (std::size_t l = 1; l < kLanes; ++l) m = std::max(m, mx[l]);
  return m;
}

// x[j] = exp(x[j] − shift) for j < n.
void exp_shift(float* x, std::size_t n, float shift) {
  for (std::size_t j = 0; j < n; ++j) x[j] = fastmath::exp_fma(x[j] - shift);
}

// Σ_j x[j], j < n, summed in Acc (double or float) in kLanes lanes merged pairwise. A loop of its own after
// exp_shift: the compiler vectorises each, not the fused one (measured 1.8× slower).
template <typename Acc>
Acc lane_sum(const float* x, std::size_t n) {
  Acc acc[kLanes] = {};
  std::size_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::size_t l = 0; l < kLanes; ++l) acc[l] += static_cast<Acc>(x[j + l]);
  for (; j < n; ++j) acc[0] += static_cast<Acc>(x[j]);
  for (std::size_t w = kLanes / 2; w > 0; w /= 2)  // pairwise merge of the lanes
    for (std::size_t l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// The lab's depth bug as the kernels apply it (KernelBugs::deep_score, deep_from): scores of keys at positions
// ≥ from times factor; factor 1 is no bug.
struct DeepBug {
  float factor = 1.0f;
  std::size_t from = kDeepKeys;
  bool on() const { return factor != 1.0f; }
};
DeepBug deep_bug_of(const KernelOptions& opt) { return {1.0f + opt.bugs.deep_score, opt.bugs.deep_from}; }

// Scores s[j] of keys j0 + j ≥ d.from, j < n, times d.factor.
void deep_bug(float* s, std::size_t j0, std::size_t n, const DeepBug& d) {
  for (std::size_t j = j0 >= d.from ? 0 : d.from - j0; j < n; ++j) s[j] *= d.factor;
}

// The exact kernels' score step of one row of keys 0 … n_keys-1 (the first `visible` visible): the depth bug,
// × scale (scale = 0: the GEMM's alpha already scaled it), p = exp(s − exact row max), 0 past `visible`.
void exact_p_row(float* s, std::size_t visible, std::size_t n_keys, float scale, const DeepBug& deep) {
  if (deep.on()) deep_bug(s, 0, visible, deep);
  const float mx = scale != 0.0f ? scale_and_max(s, visible, scale) : row_max(s, visible);
  exp_shift(s, visible, mx);
  std::fill(s + visible, s + n_keys, 0.0f);
}

// The score step of the exact kernels for tile (head h, query rows t0 … t1-1) over keys 0 … pos0+t1-1:
// s = q·kᵀ (one GEMM), then exact_p_row per row. p: [rows, pos0 + t1].
void exact_scores(const float* q, std::size_t pos0, const float* k, const Geometry& G, std::size_t h,
                  std::size_t t0, std::size_t t1, float* p, const DeepBug& deep) {
  const std::size_t g = h / G.group, rows = t1 - t0, n_keys = pos0 + t1;
  sgemm_nt_serial(q + t0 * G.q_stride + h * G.hd, G.q_stride, k + g * G.hd, G.kv_stride, p, n_keys, rows,
                  n_keys, G.hd);
  for (std::size_t r = 0; r < rows; ++r) exact_p_row(p + r * n_keys, pos0 + t0 + r + 1, n_keys, G.scale, deep);
}

// One (head h, query rows t0 … t1-1) tile, exact softmax: the row max over every visible key first, then
// p = exp(s − max), row sum in f64 (16 lanes, merged pairwise), one P·V GEMM, divide.
void exact_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                int layer, const DeepBug& deep) {
  const std::size_t g = h / G.group, rows = t1 - t0, hd = G.hd;
  const std::size_t n_keys = pos0 + t1;  // keys visible to the tile's last row
  thread_local std::vector<float> p_buf;
  p_buf.resize(rows * n_keys);
  float* p = p_buf.data();
  double row_sum[kAttnBlockRows];

  // p[r, j] = exp(q[t0+r, h]·k[j, g]·scale − max) for j ≤ pos0+t0+r, else 0     [rows, n_keys]
  exact_scores(q, pos0, k, G, h, t0, t1, p, deep);
  for (std::size_t r = 0; r < rows; ++r) row_sum[r] = lane_sum<double>(p + r * n_keys, pos0 + t0 + r + 1);
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

// The exact tiles of all `group` query heads that share KV head g, for query rows t0 … t1-1, computed as one
// stacked problem: the GEMMs get group × rows rows (K and V are packed once for the group instead of once
// per head). Row i of the stack is head g·group + i / rows, query t0 + i % rows; each row's softmax is the
// same as exact_tile's.
void exact_group_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                      std::size_t g, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                      int layer, const DeepBug& deep) {
  const std::size_t rows = t1 - t0, R = G.group * rows, hd = G.hd, n_keys = pos0 + t1;
  thread_local std::vector<float> q_buf, p_buf, o_buf;
  thread_local std::vector<double> row_sum;
  q_buf.resize(R * hd), p_buf.resize(R * n_keys), o_buf.resize(R * hd), row_sum.resize(R);
  float *qs = q_buf.data(), *p = p_buf.data(), *o = o_buf.data();
  for (std::size_t i = 0; i < R; ++i) {  // qs[i] = q[t0 + i % rows, g·group + i / rows]   [R, hd]
    const float* src = q + (t0 + i % rows) * G.q_stride + (g * G.group + i / rows) * hd;
    std::copy(src, src + hd, qs + i * hd);
  }
  // s[i, j] = (qs[i] · k[j, g])·scale          [R, n_keys] (the GEMM's alpha scales)
  sgemm_nt_serial(qs, hd, k + g * hd, G.kv_stride, p, n_keys, R, n_keys, hd, G.scale);
  for (std::size_t i = 0; i < R; ++i) {  // p[i, j] = exp(s − max) for visible j, else 0
    const std::size_t visible = pos0 + t0 + i % rows + 1;
    exact_p_row(p + i * n_keys, visible, n_keys, 0.0f, deep);
    row_sum[i] = lane_sum<double>(p + i * n_keys, visible);
  }
  if (hook && *hook)
    for (std::size_t hl = 0; hl < G.group; ++hl)
      (*hook)(TensorEvent{"attn.p",
                          layer,
                          static_cast<int>(g * G.group + hl),
                          pos0 + t0,
                          rows,
                          n_keys,
                          {p + hl * rows * n_keys, rows * n_keys}});
  // o[i] = p[i] · v[:, g] / Σ p[i]              [R, hd]
  sgemm_nn_serial(p, n_keys, v + g * hd, G.kv_stride, o, hd, R, hd, n_keys);
  for (std::size_t i = 0; i < R; ++i) {
    float* dst = out + (t0 + i % rows) * G.q_stride + (g * G.group + i / rows) * hd;
    const float inv = static_cast<float>(1.0 / row_sum[i]);
    for (std::size_t d = 0; d < hd; ++d) dst[d] = o[i * hd + d] * inv;
  }
}

// The same tile, flash attention 2 style (the founding study's attention_row): keys in blocks of kFlashBlockKeys;
// per row a running max m, row sum l and output accumulator acc, all f32. For each block:
//   m' = max(m, max_j s_j),  p_j = exp(s_j − m'),  l = l·exp(m − m') + Σ p_j,  acc = acc·exp(m − m') + p·V_b
// and finally out = acc / l. The hook sees each block's p (after l took the unrounded p, before p·V_b).
// order ≠ 0: the key blocks (size and order) of order_blocks instead of kFlashBlockKeys in key order.
void flash_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                int layer, const DeepBug& deep, std::uint32_t order) {
  const std::size_t g = h / G.group, rows = t1 - t0, hd = G.hd;
  const std::size_t n_keys = pos0 + t1;
  thread_local std::vector<OrderBlock> blocks;
  if (order != 0) {
    order_blocks(order, kSaltAttnOrder, n_keys, 16 * (1 + order_hash(order, kSaltAttnBlock) % 8), 1, blocks);
  } else {
    blocks.clear();
    for (std::size_t j0 = 0; j0 < n_keys; j0 += kFlashBlockKeys)
      blocks.push_back({j0, std::min(kFlashBlockKeys, n_keys - j0)});
  }
  std::size_t B = 0;
  for (const auto& bl : blocks) B = std::max(B, bl.len);
  thread_local std::vector<float> s_buf, pv_buf, acc_buf;
  s_buf.resize(rows * B), pv_buf.resize(rows * hd), acc_buf.assign(rows * hd, 0.0f);
  float *s = s_buf.data(), *pv = pv_buf.data(), *acc = acc_buf.data();
  float m[kAttnBlockRows], l[kAttnBlockRows], alpha[kAttnBlockRows];
  std::fill(m, m + rows, -INFINITY), std::fill(l, l + rows, 0.0f);
  const float* qt = q + t0 * G.q_stride + h * hd;

  for (const auto& bl : blocks) {
    const std::size_t j0 = bl.begin, bw = bl.len;
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
      if (deep.on()) deep_bug(sr, j0, cnt, deep);
      const float m_new = std::max(m[r], scale_and_max(sr, cnt, G.scale));
      exp_shift(sr, cnt, m_new);
      const float sum = lane_sum<float>(sr, cnt);
      std::fill(sr + cnt, sr + bw, 0.0f);
      alpha[r] = fastmath::exp_fma(m[r] - m_new);  // 0 on the first block (m = -inf)
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

// The exact tile under order ≠ 0: the exact row max over every visible key (as exact_tile), then the row sum
// (f32) and P·V accumulated over key blocks of order_blocks in their drawn order. One hook event per tile.
void exact_ordered_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
                        std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook,
                        int layer, const DeepBug& deep, std::uint32_t order) {
  const std::size_t g = h / G.group, rows = t1 - t0, hd = G.hd;
  const std::size_t n_keys = pos0 + t1;
  thread_local std::vector<float> p_buf, pv_buf, acc_buf;
  thread_local std::vector<OrderBlock> blocks;
  order_blocks(order, kSaltAttnOrder, n_keys, 16 * (1 + order_hash(order, kSaltAttnBlock) % 8), 1, blocks);
  p_buf.resize(rows * n_keys), pv_buf.resize(rows * hd), acc_buf.assign(rows * hd, 0.0f);
  float *p = p_buf.data(), *pv = pv_buf.data(), *acc = acc_buf.data();
  float l[kAttnBlockRows] = {};
  exact_scores(q, pos0, k, G, h, t0, t1, p, deep);  // as exact_tile
  for (std::size_t r = 0; r < rows; ++r) {
    const float* pr = p + r * n_keys;
    const std::size_t visible = pos0 + t0 + r + 1;
    for (const auto& bl : blocks) {  // the row sum in the blocks' order, each block in f32 lanes
      if (bl.begin >= visible) continue;
      float part = 0.0f;
      for (std::size_t j = bl.begin; j < std::min(visible, bl.begin + bl.len); ++j) part += pr[j];
      l[r] += part;
    }
  }
  if (hook && *hook)
    (*hook)(TensorEvent{"attn.p", layer, static_cast<int>(h), pos0 + t0, rows, n_keys, {p, rows * n_keys}});
  for (const auto& bl : blocks) {  // acc += p[:, block] · v[block, g], blocks in the drawn order
    if (bl.begin >= pos0 + t1) continue;
    sgemm_nn_serial(p + bl.begin, n_keys, v + bl.begin * G.kv_stride + g * hd, G.kv_stride, pv, hd, rows, hd,
                    bl.len);
    for (std::size_t i = 0; i < rows * hd; ++i) acc[i] += pv[i];
  }
  float* o = out + t0 * G.q_stride + h * hd;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < hd; ++i) o[r * G.q_stride + i] = acc[r * hd + i] / l[r];
}

// Tile (head h, query rows t0 … t1-1) by the kernel the options choose (every path but exact's grouped prefill).
void head_tile(const float* q, std::size_t pos0, const float* k, const float* v, const Geometry& G,
               std::size_t h, std::size_t t0, std::size_t t1, float* out, const TensorHook* hook, int layer,
               const KernelOptions& opt) {
  const DeepBug deep = deep_bug_of(opt);
  if (opt.attention == AttentionKernel::flash)
    flash_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer, deep, opt.order);
  else if (opt.order != 0)
    exact_ordered_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer, deep, opt.order);
  else
    exact_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer, deep);
}

}  // namespace

void attention_causal(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                      const AttentionShape& shape, float* out, const TensorHook* hook, int layer,
                      const KernelOptions& opt) {
  init_blas();
  const Geometry G = geometry(shape);
  const std::size_t blocks = chunk_count(T, kAttnBlockRows);
  const bool flash = opt.attention == AttentionKernel::flash;
  const DeepBug deep = deep_bug_of(opt);
  if (!flash && opt.order == 0 && T > 1 && G.group > 1) {  // prefill: one task per (KV head, row block)
    parallel_for(G.nkv * blocks, 1, [&](std::size_t task, std::size_t, std::size_t) {
      const std::size_t g = task / blocks;
      const std::size_t t0 = (task % blocks) * kAttnBlockRows, t1 = std::min(T, t0 + kAttnBlockRows);
      exact_group_tile(q, pos0, k, v, G, g, t0, t1, out, hook, layer, deep);
    });
    return;
  }
  parallel_for(G.nh * blocks, 1, [&](std::size_t task, std::size_t, std::size_t) {
    const std::size_t h = task / blocks;
    const std::size_t t0 = (task % blocks) * kAttnBlockRows, t1 = std::min(T, t0 + kAttnBlockRows);
    head_tile(q, pos0, k, v, G, h, t0, t1, out, hook, layer, opt);
  });
}

void attention_decode(const float* q, std::span<const AttentionSeq> seqs, const AttentionShape& shape,
                      float* out, const TensorHook* hook, int layer, const KernelOptions& opt) {
  init_blas();
  const Geometry G = geometry(shape);
  // Task (b, h) is what attention_causal(q[b], T = 1, …) runs as its task h: one row, one block.
  parallel_for(seqs.size() * G.nh, 1, [&](std::size_t task, std::size_t, std::size_t) {
    const std::size_t b = task / G.nh, h = task % G.nh;
    head_tile(q + b * G.q_stride, seqs[b].pos, seqs[b].k, seqs[b].v, G, h, 0, 1, out + b * G.q_stride, hook,
              layer, opt);
  });
}

}  // namespace kc::engine
