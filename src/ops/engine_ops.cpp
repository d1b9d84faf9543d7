#include "ops/engine_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc::engine {
namespace {

// GEMM tiles, functions of the shape only, so the same tile computes the same element for any thread
// count. Each tile is one sgemm call that packs its rows of x and its columns of w again, and packing the
// activations costs a fair part of a narrow tile's multiply (measured on SmolLM2's shapes, one core:
// 128-column tiles reach 85–90% of one whole-matrix call, 288–512 columns 90–95%). So: rows in blocks of
// 256, columns in equal widths (multiples of 16) of at most 512, and at least kMinGemmTiles tiles in all
// where the columns allow, so that 2 or 4 threads get equal shares even for one row block (576 → 4 × 144,
// 192 → 3 × 64, 1536 → 4 × 384).
// Decode (m == 1) is a GEMV that reads each weight once: 128-column tiles, 512 from 8192 columns.
constexpr std::size_t kGemmTileRows = 256;
constexpr std::size_t kGemmMaxTileCols = 512;
constexpr std::size_t kGemmMinTileCols = 64;
constexpr std::size_t kMinGemmTiles = 4;

struct GemmTiling {
  std::size_t rows, cols, row_tiles, col_tiles;
};

GemmTiling gemm_tiling(std::size_t m, std::size_t n) {
  if (m == 1) {
    const std::size_t cb = n >= 8192 ? 512 : 128;
    return {1, cb, 1, chunk_count(n, cb)};
  }
  // The column tiles depend on n only, never on m: OpenBLAS's result for an element can depend on the width
  // of the panel it is computed in (seen with its AVX2 kernels), and a prompt fed in pieces (m = 256 per
  // call) must give bitwise the one-call rows (tests/py/test_hybrid_experiments.py).
  const std::size_t row_tiles = chunk_count(m, kGemmTileRows);
  std::size_t col_tiles = chunk_count(n, kGemmMaxTileCols);
  if (col_tiles < kMinGemmTiles)
    col_tiles = std::max(col_tiles, std::min(kMinGemmTiles, n / kGemmMinTileCols));
  const std::size_t cb = (chunk_count(n, std::max<std::size_t>(col_tiles, 1)) + 15) / 16 * 16;
  return {kGemmTileRows, cb, row_tiles, chunk_count(n, cb)};
}

// Pointwise ops: chunks of whole rows, about this many elements each.
constexpr std::size_t kPointwiseChunk = 1 << 15;

std::size_t rows_per_chunk(std::size_t d) {
  return std::max<std::size_t>(1, kPointwiseChunk / std::max<std::size_t>(d, 1));
}

}  // namespace

void init_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void sgemm_nt_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, float alpha) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb),
              0.0f, c, static_cast<blasint>(ldc));
}

void sgemm_nn_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f,
              c, static_cast<blasint>(ldc));
}

void sgemm_nt_ordered(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                      std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, std::uint32_t order,
                      float alpha) {
  if (order == 0) return sgemm_nt_serial(a, lda, b, ldb, c, ldc, m, n, k, alpha);
  if (m == 0 || n == 0) return;
  thread_local std::vector<OrderBlock> blocks;
  order_blocks(order, kSaltGemmK, k, 16, 8, blocks);
  bool first = true;
  for (const auto& bl : blocks) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(bl.len), alpha, a + bl.begin, static_cast<blasint>(lda), b + bl.begin,
                static_cast<blasint>(ldb), first ? 0.0f : 1.0f, c, static_cast<blasint>(ldc));
    first = false;
  }
}

void gemm_nt(const float* x, std::size_t m, std::size_t k, const float* w, std::size_t n, float* y,
             const float* bias, std::uint32_t order) {
  init_blas();
  if (m == 0 || n == 0) return;
  const GemmTiling g = gemm_tiling(m, n);
  parallel_for(g.row_tiles * g.col_tiles, 1, [&](std::size_t tile, std::size_t, std::size_t) {
    const std::size_t r0 = (tile / g.col_tiles) * g.rows, r1 = std::min(m, r0 + g.rows);
    const std::size_t c0 = (tile % g.col_tiles) * g.cols, c1 = std::min(n, c0 + g.cols);
    if (order != 0) {
      sgemm_nt_ordered(x + r0 * k, k, w + c0 * k, k, y + r0 * n + c0, n, r1 - r0, c1 - c0, k, order);
    } else if (m == 1) {  // decode: y[c0:c1] = w[c0:c1, :] · x (a GEMV reads the weight once, no packing)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(c1 - c0), static_cast<blasint>(k), 1.0f,
                  w + c0 * k, static_cast<blasint>(k), x, 1, 0.0f, y + c0, 1);
    } else {
      sgemm_nt_serial(x + r0 * k, k, w + c0 * k, k, y + r0 * n + c0, n, r1 - r0, c1 - c0, k);
    }
    if (bias)
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t c = c0; c < c1; ++c) y[r * n + c] += bias[c];
  });
}

namespace {

// gemm_rows's tiles (engine_ops.h).
struct RowTiles {
  std::size_t rows, cols, row_tiles, col_tiles;
  std::size_t count() const { return row_tiles * col_tiles; }
};

RowTiles row_tiles_of(std::size_t m, std::size_t n) {
  constexpr std::size_t kRows = 256, kMaxCols = 512, kMinCols = 64, kWant = 4;
  // Columns from n only, as gemm_tiling's (a prompt in pieces gives bitwise the one-call rows).
  const std::size_t rt = chunk_count(m, kRows);
  std::size_t ct = chunk_count(n, kMaxCols);
  while (ct < kWant && n / (2 * ct) >= kMinCols) ct *= 2;
  const std::size_t cb = (chunk_count(n, ct) + 15) / 16 * 16;
  return {kRows, cb, rt, chunk_count(n, cb)};
}

struct Tile {
  std::size_t r0, r1, c0, c1;
};

Tile tile_at(const RowTiles& t, std::size_t i, std::size_t m, std::size_t n) {
  const std::size_t r0 = (i / t.col_tiles) * t.rows, c0 = (i % t.col_tiles) * t.cols;
  return {r0, std::min(m, r0 + t.rows), c0, std::min(n, c0 + t.cols)};
}

// One tile of y[m, n] = x·wᵀ (+ bias, then residual += y).
void row_tile(const Tile& t, const float* x, std::size_t k, const RowGemmOp& op, std::uint32_t order) {
  const std::size_t n = op.n;
  sgemm_nt_ordered(x + t.r0 * k, k, op.w + t.c0 * k, k, op.y + t.r0 * n + t.c0, n, t.r1 - t.r0, t.c1 - t.c0,
                   k, order);
  if (op.bias)
    for (std::size_t r = t.r0; r < t.r1; ++r)
      for (std::size_t c = t.c0; c < t.c1; ++c) op.y[r * n + c] += op.bias[c];
  if (op.residual)
    for (std::size_t r = t.r0; r < t.r1; ++r)
      for (std::size_t c = t.c0; c < t.c1; ++c) op.residual[r * n + c] += op.y[r * n + c];
}

}  // namespace

void gemm_rows(const float* x, std::size_t m, std::size_t k, std::span<const RowGemmOp> ops,
               std::uint32_t order) {
  if (m <= 1) {
    for (const auto& op : ops) {
      gemm_nt(x, m, k, op.w, op.n, op.y, op.bias, order);
      if (op.residual) add_inplace(op.residual, op.y, m * op.n);
    }
    return;
  }
  init_blas();
  std::size_t total = 0;
  auto tiles = [&](const RowGemmOp& op) {
    RowTiles t = row_tiles_of(m, op.n);
    if (op.one_col_tile) t.cols = op.n, t.col_tiles = 1;
    return t;
  };
  for (const auto& op : ops) total += tiles(op).count();
  parallel_for(total, 1, [&](std::size_t i, std::size_t, std::size_t) {
    for (const auto& op : ops) {
      const RowTiles t = tiles(op);
      if (i < t.count()) return row_tile(tile_at(t, i, m, op.n), x, k, op, order);
      i -= t.count();
    }
  });
}

void gemm_rows_silu(const float* x, std::size_t m, std::size_t k, const float* w_gate, const float* w_up,
                    std::size_t n, float* gate, float* up, std::uint32_t order, int sigmoid_bits) {
  if (m <= 1) {
    const RowGemmOp ops[] = {{w_gate, n, gate}, {w_up, n, up}};
    gemm_rows(x, m, k, ops, order);
    return silu_mul(gate, up, m * n, gate, sigmoid_bits);
  }
  init_blas();
  const RowTiles t = row_tiles_of(m, n);
  parallel_for(t.count(), 1, [&](std::size_t i, std::size_t, std::size_t) {
    const Tile tl = tile_at(t, i, m, n);
    row_tile(tl, x, k, RowGemmOp{w_gate, n, gate}, order);
    row_tile(tl, x, k, RowGemmOp{w_up, n, up}, order);
    for (std::size_t r = tl.r0; r < tl.r1; ++r) {
      float* g = gate + r * n + tl.c0;
      silu_mul(g, up + r * n + tl.c0, tl.c1 - tl.c0, g, sigmoid_bits);
    }
  });
}

void rmsnorm(const float* x, const float* w, std::size_t rows, std::size_t d, float eps, float* y,
             std::uint32_t order, int rsqrt_bits) {
  std::vector<OrderBlock> blocks;
  if (order != 0) order_blocks(order, kSaltNorm, d, 16, 8, blocks);
  parallel_for(rows, rows_per_chunk(d), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const float* xr = x + r * d;
      float* yr = y + r * d;
      if (order != 0 || rsqrt_bits < 23) {  // the lab's other orders and bugs: kept off the default loop
        float var;
        if (order != 0) {
          float ss = 0.0f;
          for (const auto& bl : blocks) {
            float part = 0.0f;
            for (std::size_t i = bl.begin; i < bl.begin + bl.len; ++i) part = std::fma(xr[i], xr[i], part);
            ss += part;
          }
          var = ss / static_cast<float>(d);
        } else {
          double ss = 0;
          for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
          var = static_cast<float>(ss / static_cast<double>(d));
        }
        float inv = 1.0f / std::sqrt(var + eps);
        if (rsqrt_bits < 23) inv = round_mantissa(inv, rsqrt_bits);
        for (std::size_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
        continue;
      }
      // Sum of squares in f64 (the mean is then correctly rounded to f32 in practice), in 8 lanes merged
      // pairwise: a single running sum is a serial chain of f64 adds that does not vectorise.
      double lane[8] = {};
      std::size_t i = 0;
      for (; i + 8 <= d; i += 8)
        for (std::size_t l = 0; l < 8; ++l) lane[l] += static_cast<double>(xr[i + l]) * xr[i + l];
      for (; i < d; ++i) lane[0] += static_cast<double>(xr[i]) * xr[i];
      const double ss =
          ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
      const float var = static_cast<float>(ss / static_cast<double>(d));
      const float inv = 1.0f / std::sqrt(var + eps);
      for (std::size_t i = 0; i < d; ++i) yr[i] = w[i] * (xr[i] * inv);
    }
  });
}

void silu_mul(const float* gate, const float* up, std::size_t n, float* out, int sigmoid_bits) {
  if (sigmoid_bits < 23) {  // the lab's bug:silu
    parallel_for(n, kPointwiseChunk, [&](std::size_t, std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        const float g = gate[i];
        out[i] = g * round_mantissa(1.0f / (1.0f + fastmath::exp_fma(-g)), sigmoid_bits) * up[i];
      }
    });
    return;
  }
  parallel_for(n, kPointwiseChunk, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + fastmath::exp_fma(-g)) * up[i];
    }
  });
}

void add_inplace(float* y, const float* x, std::size_t n) {
  parallel_for(n, kPointwiseChunk, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) y[i] += x[i];
  });
}

void sigmoid_gate(float* x, const float* gate, std::size_t n) {
  parallel_for(n, kPointwiseChunk, [&](std::size_t, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) x[i] *= 1.0f / (1.0f + std::exp(-gate[i]));
  });
}

void softmax_rows(float* x, std::size_t rows, std::size_t n) {
  parallel_for(rows, rows_per_chunk(n), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* xr = x + r * n;
      float mx = -INFINITY;
      for (std::size_t i = 0; i < n; ++i) mx = std::max(mx, xr[i]);
      float sum = 0;
      for (std::size_t i = 0; i < n; ++i) {
        xr[i] = std::exp(xr[i] - mx);
        sum += xr[i];
      }
      const float inv = 1.0f / sum;
      for (std::size_t i = 0; i < n; ++i) xr[i] *= inv;
    }
  });
}

std::vector<float> rope_inv_freq(const RopeParams& p, std::size_t rot_dim) {
  KC_ASSERT(rot_dim % 2 == 0 && rot_dim > 0, "rope: rot_dim {} must be even", rot_dim);
  std::vector<float> inv(rot_dim / 2);
  for (std::size_t i = 0; i < inv.size(); ++i) {
    // transformers: 1 / theta ** (arange(0, dim, 2).float() / dim), all in f32
    const float expo = static_cast<float>(2 * i) / static_cast<float>(rot_dim);
    inv[i] = 1.0f / static_cast<float>(std::pow(static_cast<double>(static_cast<float>(p.theta)), expo));
  }
  if (p.scaling == RopeScaling::linear) {
    for (auto& f : inv) f = f / static_cast<float>(p.factor);
  } else if (p.scaling == RopeScaling::llama3) {
    // transformers _compute_llama3_parameters: long wavelengths divided by factor, short ones kept,
    // a smooth blend in between.
    const double low_wavelen = p.original_max_position / p.low_freq_factor;
    const double high_wavelen = p.original_max_position / p.high_freq_factor;
    for (auto& f : inv) {
      const double wavelen = 2 * std::numbers::pi / f;
      const double scaled = wavelen > low_wavelen ? f / p.factor : f;
      if (wavelen < high_wavelen || wavelen > low_wavelen) {
        f = static_cast<float>(scaled);
      } else {
        const double smooth = (p.original_max_position / wavelen - p.low_freq_factor) /
                              (p.high_freq_factor - p.low_freq_factor);
        f = static_cast<float>((1 - smooth) * scaled / p.factor + smooth * scaled);
      }
    }
  }
  return inv;
}

void rope_tables(std::span<const float> inv_freq, std::size_t pos0, std::size_t n_pos, float* cos_t,
                 float* sin_t, int angle_bits) {
  const std::size_t half = inv_freq.size();
  for (std::size_t t = 0; t < n_pos; ++t) {
    const float pos = static_cast<float>(pos0 + t);
    for (std::size_t i = 0; i < half; ++i) {
      float angle = pos * inv_freq[i];  // f32 product, as transformers' inv_freq @ position_ids
      if (angle_bits < 23) angle = round_mantissa(angle, angle_bits);
      cos_t[t * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_t[t * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void rope_rotate_half(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                      std::size_t rot_dim, const float* cos_t, const float* sin_t) {
  const std::size_t half = rot_dim / 2;
  parallel_for(rows, rows_per_chunk(n_heads * head_dim), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const float* c = cos_t + r * half;
      const float* s = sin_t + r * half;
      for (std::size_t h = 0; h < n_heads; ++h) {
        float* xh = x + (r * n_heads + h) * head_dim;
        for (std::size_t i = 0; i < half; ++i) {
          const float a = xh[i], b = xh[i + half];
          xh[i] = a * c[i] - b * s[i];  // x·cos + rotate_half(x)·sin, rotate_half = (−x2, x1)
          xh[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

void rope_adjacent_pairs(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                         std::size_t rot_dim, const float* cos_t, const float* sin_t) {
  const std::size_t half = rot_dim / 2;
  parallel_for(rows, rows_per_chunk(n_heads * head_dim), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const float* c = cos_t + r * half;
      const float* s = sin_t + r * half;
      for (std::size_t h = 0; h < n_heads; ++h) {
        float* xh = x + (r * n_heads + h) * head_dim;
        for (std::size_t i = 0; i < half; ++i) {
          const float a = xh[2 * i], b = xh[2 * i + 1];
          xh[2 * i] = a * c[i] - b * s[i];
          xh[2 * i + 1] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

}  // namespace kc::engine
