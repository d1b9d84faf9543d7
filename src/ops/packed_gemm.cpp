#include "ops/packed_gemm.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"
#include "ops/order.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kc::engine {

namespace {
std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

void PackedMatrix::pack(const float* w, std::size_t n, std::size_t k) {
  n_ = n, k_ = k;
  bf16_ = std::all_of(w, w + n * k, [](float v) { return (bits_of(v) & 0xFFFFu) == 0; });
  data_.clear(), data_.shrink_to_fit(), b16_.clear(), b16_.shrink_to_fit();
  if (bf16_)
    b16_.assign(panels() * k * kPanelCols, 0);
  else
    data_.assign(panels() * k * kPanelCols, 0.0f);
  for (std::size_t p = 0; p < panels(); ++p) {
    const std::size_t c1 = std::min(kPanelCols, n - p * kPanelCols), base = p * k * kPanelCols;
    for (std::size_t c = 0; c < c1; ++c) {
      const float* src = w + (p * kPanelCols + c) * k;
      for (std::size_t kk = 0; kk < k; ++kk) {
        if (bf16_)
          b16_[base + kk * kPanelCols + c] = static_cast<std::uint16_t>(bits_of(src[kk]) >> 16);
        else
          data_[base + kk * kPanelCols + c] = src[kk];
      }
    }
  }
}

const float* PackedMatrix::panel(std::size_t p) const {
  KC_ASSERT(!bf16_, "PackedMatrix::panel: the panels are stored as bf16 (panel_bf16)");
  return data_.data() + p * k_ * kPanelCols;
}

const std::uint16_t* PackedMatrix::panel_bf16(std::size_t p) const {
  KC_ASSERT(bf16_, "PackedMatrix::panel_bf16: the panels are stored as f32 (panel)");
  return b16_.data() + p * k_ * kPanelCols;
}

float PackedMatrix::at(std::size_t p, std::size_t kk, std::size_t c) const {
  const std::size_t i = (p * k_ + kk) * kPanelCols + c;
  return bf16_ ? from_bf16(b16_[i]) : data_[i];
}

void PackedMatrix::row(std::size_t r, float* out) const {
  KC_ASSERT(r < n_, "PackedMatrix::row: row {} of {}", r, n_);
  for (std::size_t kk = 0; kk < k_; ++kk) out[kk] = at(r / kPanelCols, kk, r % kPanelCols);
}

void PackedMatrix::unpack(float* out) const {
  for (std::size_t r = 0; r < n_; ++r) row(r, out + r * k_);
}

std::vector<float> PackedMatrix::unpack() const {
  std::vector<float> out(n_ * k_);
  unpack(out.data());
  return out;
}

std::vector<KBlock> gemm_k_blocks(std::size_t k, const GemmSchedule& s) {
  if (s.is_default()) return {{0, k}};
  std::vector<OrderBlock> ob;
  if (s.bf16_every == 0) {
    order_blocks(s.order, kSaltGemmK, k, 16, 8, ob);
  } else {
    for (std::size_t b = 0; b < k; b += s.bf16_every) ob.push_back({b, std::min(s.bf16_every, k - b)});
    if (s.order != 0) {  // the same blocks of N, in the seed's drawn order
      std::vector<OrderBlock> perm;
      order_blocks(s.order, kSaltGemmK, ob.size(), 1, 1, perm);
      std::vector<OrderBlock> o2;
      for (const auto& p : perm) o2.push_back(ob[p.begin]);
      ob = std::move(o2);
    }
  }
  std::vector<KBlock> out;
  for (const auto& b : ob) out.push_back({b.begin, b.len});
  return out;
}

void packed_gemm_scalar(const float* x, std::size_t m, const PackedMatrix& w, float* y, const float* bias,
                        const GemmSchedule& sched) {
  const std::size_t n = w.rows(), k = w.cols();
  const std::vector<KBlock> blocks = gemm_k_blocks(k, sched);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
        for (std::size_t kk = blocks[bi].begin; kk < blocks[bi].begin + blocks[bi].len; ++kk)
          acc = std::fma(x[i * k + kk], w.at(j / kPanelCols, kk, j % kPanelCols), acc);
        if (sched.bf16_every && bi + 1 < blocks.size()) quantize_inplace(DType::bfloat16, &acc, 1);
      }
      y[i * n + j] = bias ? acc + bias[j] : acc;
    }
}

#if defined(__AVX512F__)
namespace {

// Register blocking: kMR rows × 32 columns of accumulators (28 zmm), per k two panel loads and kMR
// broadcasts of the packed activations.
constexpr std::size_t kMR = 14;
// Tiles: kTileMicroPanels micro-panels of kMR rows × the panels whose k block (32 columns each) fits in
// kTileWeightBytes: they stay in L2 while each micro-panel of activations (L1) runs over them. k runs in
// blocks of at most kKBlock (14 × 640 floats = 35 KB of activations, inside the 48 KB L1). Picked from sweeps
// on SmolLM2's shapes (1 thread, CPU time); neighbouring sizes were within the shared machine's ±10% noise.
constexpr std::size_t kTileMicroPanels = 4;
constexpr std::size_t kTileWeightBytes = 1 << 19;
constexpr std::size_t kKBlock = 640;  // d_model 576: one block; d_ff 1536: three of 512
// Decode (m = 1): panels per GEMV task.
constexpr std::size_t kGemvPanels = 4;

inline __mmask16 mask_of(std::size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// One k row of a panel (32 weights) as two f32 vectors: f32 panels load as they are, bf16 panels widen
// exactly (the bf16 bits become the f32's high half), so both give the kernels the same values.
[[gnu::always_inline]] inline void load_panel_row(const float* b, __m512& b0, __m512& b1) {
  b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
}
[[gnu::always_inline]] inline void load_panel_row(const std::uint16_t* b, __m512& b0, __m512& b1) {
  const __m512i v = _mm512_load_si512(b);  // 32 × 16 bits
  b0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16));
  b1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16));
}

// c[r, 0:nc] = Σ_k a[k][r] · b[k][0:32] (+ bias) for r < MR; a: packed activations [K][MR], b: a weight
// panel (f32 or bf16). With load_c the chains continue from c (the sums of the previous k block: stored in
// f32 exactly as the registers held them, so blocking k leaves the bits unchanged).
template <int MR, typename W>
void micro_kernel(const float* __restrict a, const W* __restrict b, std::size_t K, float* c,
                  std::size_t ldc, std::size_t nc, const float* bias, bool load_c) {
  __m512 c0[MR], c1[MR];
  const __mmask16 m0 = mask_of(nc), m1 = mask_of(nc > 16 ? nc - 16 : 0);
  if (load_c) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
      c0[r] = _mm512_maskz_loadu_ps(m0, c + r * ldc), c1[r] = _mm512_maskz_loadu_ps(m1, c + r * ldc + 16);
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) c0[r] = _mm512_setzero_ps(), c1[r] = _mm512_setzero_ps();
  }
  for (std::size_t kk = 0; kk < K; ++kk) {
    __m512 b0, b1;
    load_panel_row(b + kk * kPanelCols, b0, b1);
    const float* ak = a + kk * MR;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(ak[r]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
  if (bias) {
    const __m512 bb0 = _mm512_maskz_loadu_ps(m0, bias), bb1 = _mm512_maskz_loadu_ps(m1, bias + 16);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) c0[r] = _mm512_add_ps(c0[r], bb0), c1[r] = _mm512_add_ps(c1[r], bb1);
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, c0[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, c1[r]);
  }
}

template <typename W>
using MicroKernel = void (*)(const float*, const W*, std::size_t, float*, std::size_t, std::size_t,
                             const float*, bool);
template <typename W, std::size_t... I>
constexpr auto kernel_table(std::index_sequence<I...>) {
  return std::array<MicroKernel<W>, sizeof...(I)>{&micro_kernel<static_cast<int>(I) + 1, W>...};
}
// kKernels<W>[w - 1]: w rows
template <typename W>
constexpr auto kKernels = kernel_table<W>(std::make_index_sequence<kMR>{});

// The panel storage W of w (float or std::uint16_t for bf16).
template <typename W>
const W* panel_of(const PackedMatrix& w, std::size_t p) {
  if constexpr (std::is_same_v<W, float>)
    return w.panel(p);
  else
    return w.panel_bf16(p);
}

// y[0, p·32 …] for NP consecutive panels from p0 (m = 1): 2·NP independent accumulators, one chain each.
template <int NP, typename W>
void gemv_kernel(const float* __restrict x, const PackedMatrix& w, std::size_t p0, float* y,
                 const float* bias) {
  const std::size_t K = w.cols(), n = w.rows();
  __m512 acc[2 * NP];
  const W* b[NP];
#pragma GCC unroll 8
  for (int q = 0; q < NP; ++q) acc[2 * q] = acc[2 * q + 1] = _mm512_setzero_ps(), b[q] = panel_of<W>(w, p0 + q);
  for (std::size_t kk = 0; kk < K; ++kk) {
    const __m512 xv = _mm512_set1_ps(x[kk]);
#pragma GCC unroll 8
    for (int q = 0; q < NP; ++q) {
      __m512 b0, b1;
      load_panel_row(b[q] + kk * kPanelCols, b0, b1);
      acc[2 * q] = _mm512_fmadd_ps(xv, b0, acc[2 * q]);
      acc[2 * q + 1] = _mm512_fmadd_ps(xv, b1, acc[2 * q + 1]);
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < NP; ++q) {
    const std::size_t c0 = (p0 + q) * kPanelCols, nc = std::min(kPanelCols, n - c0);
    const __mmask16 m0 = mask_of(nc), m1 = mask_of(nc > 16 ? nc - 16 : 0);
    __m512 v0 = acc[2 * q], v1 = acc[2 * q + 1];
    if (bias) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, bias + c0));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, bias + c0 + 16));
    }
    _mm512_mask_storeu_ps(y + c0, m0, v0);
    _mm512_mask_storeu_ps(y + c0 + 16, m1, v1);
  }
}

// Tasks of one parallel region over several ops: (op, first item, last item) with items panels (GEMV) or
// tiles (GEMM).
struct Task {
  std::size_t op, begin, end;
};

void packed_gemv(const float* x, std::span<const PackedGemmOp> ops) {
  std::vector<Task> tasks;
  for (std::size_t o = 0; o < ops.size(); ++o) {
    const std::size_t np = ops[o].w->panels();
    const std::size_t chunk = ops[o].w->rows() >= 8192 ? 4 * kGemvPanels : kGemvPanels;
    for (std::size_t p = 0; p < np; p += chunk) tasks.push_back({o, p, std::min(np, p + chunk)});
  }
  parallel_for(tasks.size(), 1, [&](std::size_t t, std::size_t, std::size_t) {
    const auto& op = ops[tasks[t].op];
    auto panels = [&]<typename W>(W) {
      std::size_t p = tasks[t].begin;
      for (; p + 4 <= tasks[t].end; p += 4) gemv_kernel<4, W>(x, *op.w, p, op.y, op.bias);
      for (; p < tasks[t].end; ++p) gemv_kernel<1, W>(x, *op.w, p, op.y, op.bias);
    };
    op.w->bf16() ? panels(std::uint16_t{}) : panels(float{});
  });
}

// Packed activations, reused across calls of the calling thread (the forward pass calls from one thread).
thread_local std::vector<float, Aligned64<float>> t_packed_a;

// How one op's weights are cut: k blocks (a micro-panel of activations stays in L1) and column groups of
// panels whose k block fits kTileWeightBytes (streamed from L2 for each micro-panel of the tile).
struct OpTiling {
  std::size_t kb_len, group, groups;
};
OpTiling op_tiling(std::size_t k, std::size_t np) {
  const std::size_t k_blocks = std::max<std::size_t>(1, (k + kKBlock - 1) / kKBlock);
  const std::size_t kb_len = (k + k_blocks - 1) / k_blocks;
  const std::size_t panel_bytes = std::max<std::size_t>(kb_len, 1) * kPanelCols * sizeof(float);
  const std::size_t max_group = std::clamp<std::size_t>(kTileWeightBytes / panel_bytes, 1, np);
  const std::size_t groups = (np + max_group - 1) / max_group;
  return {kb_len, (np + groups - 1) / groups, groups};
}

}  // namespace

void packed_gemm(const float* x, std::size_t m, std::span<const PackedGemmOp> ops, const GemmSchedule& sched) {
  if (m == 0 || ops.empty()) return;
  const std::size_t k = ops[0].w->cols();
  for (const auto& op : ops)
    KC_ASSERT(op.w->cols() == k, "packed_gemm: ops of one x need one k: {} and {}", op.w->cols(), k);
  if (m == 1 && sched.is_default()) return packed_gemv(x, ops);
  // k blocks of another schedule (empty: the default tiling's own blocks, which leave the bits unchanged)
  const std::vector<KBlock> sched_blocks = sched.is_default() ? std::vector<KBlock>{} : gemm_k_blocks(k, sched);
  // Activations packed once for all ops, in micro-panels of kMR rows: panel i at i·kMR·k as [k][width]
  // (width < kMR for the last).
  const std::size_t mp = (m + kMR - 1) / kMR;
  auto& a = t_packed_a;
  if (a.size() < m * k) a.resize(m * k);
  float* ap = a.data();
  parallel_for(mp, 8, [&](std::size_t, std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      const std::size_t r0 = i * kMR, wi = std::min(kMR, m - r0);
      float* dst = ap + r0 * k;
      // k in blocks of 16: reads 16 floats of each row, writes the [16][wi] block contiguously
      for (std::size_t k0 = 0; k0 < k; k0 += 16) {
        const std::size_t kl = std::min<std::size_t>(16, k - k0);
        for (std::size_t r = 0; r < wi; ++r) {
          const float* src = x + (r0 + r) * k + k0;
          for (std::size_t kk = 0; kk < kl; ++kk) dst[(k0 + kk) * wi + r] = src[kk];
        }
      }
    }
  });
  // Tiles (row block, column group) of every op in one parallel region; column group major within an op,
  // so consecutive tiles share a group's weights.
  const std::size_t row_blocks = (mp + kTileMicroPanels - 1) / kTileMicroPanels;
  std::vector<OpTiling> tiling;
  std::vector<std::size_t> first_tile{0};
  for (const auto& op : ops) {
    tiling.push_back(op_tiling(k, op.w->panels()));
    first_tile.push_back(first_tile.back() + tiling.back().groups * row_blocks);
  }
  parallel_for(first_tile.back(), 1, [&](std::size_t t, std::size_t, std::size_t) {
    const std::size_t o = static_cast<std::size_t>(std::upper_bound(first_tile.begin(), first_tile.end(), t) -
                                                   first_tile.begin() - 1);
    const PackedMatrix& w = *ops[o].w;
    const OpTiling& tl = tiling[o];
    const std::size_t n = w.rows(), np = w.panels(), tt = t - first_tile[o];
    float* y = ops[o].y;
    const float* bias = ops[o].bias;
    const std::size_t g = tt / row_blocks, rb = tt % row_blocks;
    const std::size_t p0 = g * tl.group, p1 = std::min(np, p0 + tl.group);
    const std::size_t i0 = rb * kTileMicroPanels, i1 = std::min(mp, i0 + kTileMicroPanels);
    auto tile = [&]<typename W>(W) {
      if (!sched_blocks.empty()) {  // another schedule: its blocks in its order, chains continued in y
        for (std::size_t bi = 0; bi < sched_blocks.size(); ++bi) {
          const std::size_t k0 = sched_blocks[bi].begin, kl = sched_blocks[bi].len;
          const bool first = bi == 0, last = bi + 1 == sched_blocks.size();
          for (std::size_t i = i0; i < i1; ++i) {
            const std::size_t r0 = i * kMR, wi = std::min(kMR, m - r0);
            const MicroKernel<W> kern = kKernels<W>[wi - 1];
            for (std::size_t p = p0; p < p1; ++p) {
              const std::size_t c0 = p * kPanelCols, nc = std::min(kPanelCols, n - c0);
              kern(ap + r0 * k + k0 * wi, panel_of<W>(w, p) + k0 * kPanelCols, kl, y + r0 * n + c0, n, nc,
                   last && bias ? bias + c0 : nullptr, !first);
              if (sched.bf16_every && !last)
                for (std::size_t r = 0; r < wi; ++r) quantize_inplace(DType::bfloat16, y + (r0 + r) * n + c0, nc);
            }
          }
        }
        return;
      }
      for (std::size_t k0 = 0;; k0 += tl.kb_len) {
        const std::size_t kl = std::min(tl.kb_len, k - k0);
        const bool first = k0 == 0, last = k0 + kl >= k;
        for (std::size_t i = i0; i < i1; ++i) {
          const std::size_t r0 = i * kMR, wi = std::min(kMR, m - r0);
          const MicroKernel<W> kern = kKernels<W>[wi - 1];
          for (std::size_t p = p0; p < p1; ++p) {
            const std::size_t c0 = p * kPanelCols;
            kern(ap + r0 * k + k0 * wi, panel_of<W>(w, p) + k0 * kPanelCols, kl, y + r0 * n + c0, n,
                 std::min(kPanelCols, n - c0), last && bias ? bias + c0 : nullptr, !first);
          }
        }
        if (last) break;
      }
    };
    w.bf16() ? tile(std::uint16_t{}) : tile(float{});
  });
}
#else
namespace {
// Without AVX-512: the same chains, written so the compiler vectorises across a panel's 32 columns (AVX2:
// 2 rows × 4 ymm of accumulators). Each lane is still one fma chain over k in order, so the bits equal
// packed_gemm_scalar's; the last panel's padding columns are computed and not stored.
inline float widen(float v) { return v; }
inline float widen(std::uint16_t h) { return from_bf16(h); }

template <typename W>
void generic_rows(const float* x, std::size_t r0, std::size_t r1, const PackedMatrix& w, float* y,
                  const float* bias, const GemmSchedule& sched, const std::vector<KBlock>& blocks) {
  const std::size_t n = w.rows();
  for (std::size_t p = 0; p < w.panels(); ++p) {
    const W* b;
    if constexpr (std::is_same_v<W, float>)
      b = w.panel(p);
    else
      b = w.panel_bf16(p);
    const std::size_t c0 = p * kPanelCols, cols = std::min(kPanelCols, n - c0);
    for (std::size_t i = r0; i < r1; i += 2) {
      const std::size_t rows = std::min<std::size_t>(2, r1 - i);
      alignas(64) float acc[2][kPanelCols] = {};
      const float* x0 = x + i * w.cols();
      const float* x1 = x + (i + rows - 1) * w.cols();  // = x0 for a single last row (computed twice, stored once)
      for (std::size_t bi = 0; bi < blocks.size(); ++bi) {
        for (std::size_t kk = blocks[bi].begin; kk < blocks[bi].begin + blocks[bi].len; ++kk) {
          const float a0 = x0[kk], a1 = x1[kk];
          const W* bk = b + kk * kPanelCols;
          for (std::size_t c = 0; c < kPanelCols; ++c) {
            const float wv = widen(bk[c]);
            acc[0][c] = std::fma(a0, wv, acc[0][c]);
            acc[1][c] = std::fma(a1, wv, acc[1][c]);
          }
        }
        if (sched.bf16_every && bi + 1 < blocks.size()) quantize_inplace(DType::bfloat16, &acc[0][0], 2 * kPanelCols);
      }
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
          y[(i + r) * n + c0 + c] = bias ? acc[r][c] + bias[c0 + c] : acc[r][c];
    }
  }
}
}  // namespace

void packed_gemm(const float* x, std::size_t m, std::span<const PackedGemmOp> ops, const GemmSchedule& sched) {
  if (m == 0 || ops.empty()) return;
  const std::vector<KBlock> blocks = gemm_k_blocks(ops[0].w->cols(), sched);
  for (const auto& op : ops)
    parallel_for(m, 16, [&](std::size_t, std::size_t r0, std::size_t r1) {
      if (op.w->bf16())
        generic_rows<std::uint16_t>(x, r0, r1, *op.w, op.y, op.bias, sched, blocks);
      else
        generic_rows<float>(x, r0, r1, *op.w, op.y, op.bias, sched, blocks);
    });
}
#endif

void packed_gemm(const float* x, std::size_t m, const PackedMatrix& w, float* y, const float* bias,
                 const GemmSchedule& sched) {
  const PackedGemmOp op{&w, y, bias};
  packed_gemm(x, m, {&op, 1}, sched);
}

}  // namespace kc::engine
