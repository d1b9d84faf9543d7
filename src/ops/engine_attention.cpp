// Causal GQA attention over the KV cache, tiled by (head, block of query rows) so that memory stays
// bounded by [kAttnBlockRows, n_keys] per task at any context length.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/engine_ops.h"

namespace kc::engine {

void attention_causal(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                      const AttentionShape& shape, float* out, const TensorHook* hook, int layer,
                      const KernelOptions& opt) {
  (void)opt;  // TODO(lab): AttentionKernel::flash
  init_blas();
  const std::size_t nh = shape.n_heads, nkv = shape.n_kv_heads, hd = shape.head_dim;
  KC_ASSERT(nkv > 0 && nh % nkv == 0, "attention: n_heads {} not a multiple of n_kv_heads {}", nh, nkv);
  const std::size_t group = nh / nkv;
  const std::size_t q_stride = nh * hd, kv_stride = nkv * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::size_t blocks = chunk_count(T, kAttnBlockRows);

  parallel_for(nh * blocks, 1, [&](std::size_t task, std::size_t, std::size_t) {
    const std::size_t h = task / blocks, g = h / group;
    const std::size_t t0 = (task % blocks) * kAttnBlockRows, t1 = std::min(T, t0 + kAttnBlockRows);
    const std::size_t rows = t1 - t0;
    const std::size_t n_keys = pos0 + t1;  // keys visible to the block's last row
    thread_local std::vector<float> p_buf;
    p_buf.resize(rows * n_keys);
    float* p = p_buf.data();
    std::vector<double> row_sum(rows);

    // s[r, j] = q[t0+r, h] · k[j, g]            [rows, n_keys]
    sgemm_nt_serial(q + t0 * q_stride + h * hd, q_stride, k + g * hd, kv_stride, p, n_keys, rows, n_keys, hd);
    // p[r, j] = exp(s·scale − max) for j ≤ pos0+t0+r, else 0
    for (std::size_t r = 0; r < rows; ++r) {
      float* pr = p + r * n_keys;
      const std::size_t visible = pos0 + t0 + r + 1;
      float mx = -INFINITY;
      for (std::size_t j = 0; j < visible; ++j) {
        pr[j] *= scale;
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
    float* o = out + t0 * q_stride + h * hd;
    sgemm_nn_serial(p, n_keys, v + g * hd, kv_stride, o, q_stride, rows, hd, n_keys);
    for (std::size_t r = 0; r < rows; ++r) {
      const float inv = static_cast<float>(1.0 / row_sum[r]);
      for (std::size_t i = 0; i < hd; ++i) o[r * q_stride + i] *= inv;
    }
  });
}

}  // namespace kc::engine
