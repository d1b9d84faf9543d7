#include "ops/engine_gdn.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"
#include "ops/engine_ops.h"

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#define KC_GDN_MXCSR 1
#endif

namespace kc::engine {
namespace {

constexpr std::size_t kRowsChunkElems = 1 << 15;  // pointwise ops: about this many elements per task

std::size_t rows_per_task(std::size_t d) {
  return std::max<std::size_t>(1, kRowsChunkElems / std::max<std::size_t>(d, 1));
}

// fastmath::exp_fma: vectorises where std::exp is a scalar call, same bits scalar or vector.
inline float silu(float x) { return x / (1.0f + fastmath::exp_fma(-x)); }

void to_bf16(float* x, std::size_t n) { round_mantissa_inplace(x, n, 7); }

// c[m, n] = a[m, k] · b[k, n] + beta·c   (single-threaded)
void gemm_nn_acc(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc,
                 std::size_t m, std::size_t n, std::size_t k, float beta) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta,
              c, static_cast<blasint>(ldc));
}

// Flush-to-zero and denormals-are-zero for the current thread while in scope. The chunked prefill scales
// by e^{G_r} with G the cumulative log-decay of a chunk, which for fast-decaying heads is far below f32's
// normal range (e^-88): the products are then subnormal, and subnormal FMAs in the GEMMs cost about 100×
// (4× on the whole prefill of hybrid-tiny). Such terms are < 1.2e-38 in absolute value and so below any
// tolerance; transformers keeps them. Set per task, so that every pool thread does the same (determinism).
class FlushDenormals {
 public:
#ifdef KC_GDN_MXCSR
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }  // FTZ (bit 15) | DAZ (bit 6)
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

// Per-thread work buffers of one (head, chunk).
struct ChunkBuf {
  std::vector<float> q, k, kb, G, beta, L, U, W, intra, vn, o, kdT, sb, tmp;
  void resize(std::size_t C, std::size_t dk, std::size_t dv) {
    q.resize(C * dk), k.resize(C * dk), kb.resize(C * dk), G.resize(C), beta.resize(C);
    L.resize(C * C), intra.resize(C * C), U.resize(C * dv), W.resize(C * dk), vn.resize(C * dv);
    o.resize(C * dv), kdT.resize(dk * C), sb.resize(dk * dv), tmp.resize(C * std::max({C, dk, dv}));
  }
};

// Solves (I + L)·X = B in place for unit lower-triangular I + L (L strictly lower, [n, n]); B [n, d].
void forward_subst(const float* L, std::size_t n, float* B, std::size_t d) {
  for (std::size_t r = 1; r < n; ++r) {
    float* br = B + r * d;
    for (std::size_t s = 0; s < r; ++s) {
      const float l = L[r * n + s];
      const float* bs = B + s * d;
      for (std::size_t i = 0; i < d; ++i) br[i] -= l * bs[i];
    }
  }
}

// All-f32 chunked prefill (transformers' torch_chunk_gated_delta_rule) in two phases, so that two cores
// stay busy even with few heads:
//  1. per (head, chunk), independent of the state: the intra-chunk matrices, the triangular solve for U and
//     W, the decayed Q and K (ChunkPre);
//  2. per (head, column block of S), sequential over chunks: V_new = U − W·S, O = Q·S + intra·V_new,
//     S ← e^{G_n} S + K_dᵀ V_new. Columns of S evolve independently, so the split is exact; its width
//     depends on the shape only, never on the thread count.
// Views into one (head, chunk) slot of the phase-1 buffer. wq [2n, dk]: the W rows, then the e^G·Q·scale
// rows (one GEMM with S gives both); u [n, dv]; intra [n, C] (row stride C); kd [n, dk] = K·e^{G_n − G_r}.
struct ChunkPre {
  float *wq, *u, *intra, *kd, *decay;
};

std::size_t pre_slot_floats(std::size_t dk, std::size_t dv) {
  const std::size_t C = kGdnChunk;
  return 2 * C * dk + C * dv + C * C + C * dk + 1;
}

ChunkPre pre_slot(float* base, std::size_t dk, std::size_t dv) {
  const std::size_t C = kGdnChunk;
  ChunkPre p;
  p.wq = base, p.u = p.wq + 2 * C * dk, p.intra = p.u + C * dv, p.kd = p.intra + C * C,
  p.decay = p.kd + C * dk;
  return p;
}

// Phase 1 for rows [t0, t0 + n) of value head h.
void chunk_pre_f32(RowsView q, RowsView k, RowsView v, const float* g, const float* beta, std::size_t t0,
                   std::size_t n, std::size_t h, const GdnShape& sh, float scale, const ChunkPre& p) {
  const std::size_t dk = sh.dk, dv = sh.dv, Hv = sh.n_v_heads, hk = h / (Hv / sh.n_k_heads);
  thread_local std::vector<float> kbq_buf, k_buf, a_buf, g_buf;
  kbq_buf.resize(2 * n * dk), k_buf.resize(n * dk), a_buf.resize(2 * n * n), g_buf.resize(n);
  float *KBQ = kbq_buf.data(), *K = k_buf.data(), *A = a_buf.data(), *G = g_buf.data();
  float *W = p.wq, *Qe = p.wq + n * dk, *U = p.u, *I = p.intra, *Kd = p.kd;
  float acc = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t t = t0 + r;
    const float* qr = q.data + t * q.ld + hk * dk;
    const float* kr = k.data + t * k.ld + hk * dk;
    const float* vr = v.data + t * v.ld + h * dv;
    const float b = beta[t * Hv + h];
    acc += g[t * Hv + h];
    G[r] = acc;
    float *kb = KBQ + r * dk, *qs = KBQ + (n + r) * dk, *kk = K + r * dk;
    for (std::size_t i = 0; i < dk; ++i) kk[i] = kr[i], kb[i] = kr[i] * b, qs[i] = qr[i] * scale;
    for (std::size_t i = 0; i < dv; ++i) U[r * dv + i] = vr[i] * b;  // v·β, solved below
  }
  // [L; intra] = [βK; Q]·Kᵀ in one call; L[r, s] (s < r) and intra[r, s] (s ≤ r) scaled by e^{G_r − G_s}
  sgemm_nt_serial(KBQ, dk, K, dk, A, n, 2 * n, n, dk);
  float* L = A;
  for (std::size_t r = 0; r < n; ++r) {
    float *lr = L + r * n, *ar = A + (n + r) * n, *ir = I + r * kGdnChunk;
    for (std::size_t s = 0; s <= r; ++s) {
      const float d = fastmath::exp_fma(G[r] - G[s]);
      lr[s] = s < r ? lr[s] * d : 0.0f;
      ir[s] = ar[s] * d;
    }
    std::fill(lr + r + 1, lr + n, 0.0f);
    std::fill(ir + r + 1, ir + n, 0.0f);
  }
  const float gn = G[n - 1];
  for (std::size_t r = 0; r < n; ++r) {
    const float e = std::exp(G[r]), el = std::exp(gn - G[r]);
    const float *kb = KBQ + r * dk, *qs = KBQ + (n + r) * dk, *kk = K + r * dk;
    for (std::size_t i = 0; i < dk; ++i) {
      W[r * dk + i] = kb[i] * e;  // β k e^G, solved below
      Kd[r * dk + i] = kk[i] * el;
      Qe[r * dk + i] = qs[i] * e;
    }
  }
  // U = (I+L)⁻¹ diag(β) V,  W = (I+L)⁻¹ diag(β e^G) K: forward substitution, row r from rows s < r
  for (std::size_t r = 1; r < n; ++r) {
    float *ur = U + r * dv, *wr = W + r * dk;
    for (std::size_t s = 0; s < r; ++s) {
      const float l = L[r * n + s];
      const float *us = U + s * dv, *ws = W + s * dk;
      for (std::size_t i = 0; i < dv; ++i) ur[i] -= l * us[i];
      for (std::size_t i = 0; i < dk; ++i) wr[i] -= l * ws[i];
    }
  }
  *p.decay = std::exp(gn);
}

// Phase 2 for one chunk of n rows, value head h, state columns [j0, j0 + bw).
void chunk_state_f32(const ChunkPre& p, std::size_t n, const GdnShape& sh, std::size_t j0, std::size_t bw,
                     float* S, float* O, std::size_t ld_out) {
  const std::size_t dk = sh.dk, dv = sh.dv;
  thread_local std::vector<float> t_buf, vn_buf;
  t_buf.resize(2 * n * bw), vn_buf.resize(n * bw);
  float *T = t_buf.data(), *VN = vn_buf.data();
  gemm_nn_acc(p.wq, dk, S + j0, dv, T, bw, 2 * n, bw, dk, 0.0f);  // [W; Q]·S
  for (std::size_t r = 0; r < n; ++r) {
    const float *ur = p.u + r * dv + j0, *tr = T + r * bw, *tq = T + (n + r) * bw;
    float *vr = VN + r * bw, *orow = O + r * ld_out + j0;
    for (std::size_t i = 0; i < bw; ++i) vr[i] = ur[i] - tr[i], orow[i] = tq[i];
  }
  gemm_nn_acc(p.intra, kGdnChunk, VN, bw, O + j0, ld_out, n, bw, n, 1.0f);
  const float decay = *p.decay;
  for (std::size_t i = 0; i < dk; ++i)
    for (std::size_t j = 0; j < bw; ++j) S[i * dv + j0 + j] *= decay;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(dk), static_cast<blasint>(bw),
              static_cast<blasint>(n), 1.0f, p.kd, static_cast<blasint>(dk), VN, static_cast<blasint>(bw),
              1.0f, S + j0, static_cast<blasint>(dv));
}

// Column blocks of S per head in phase 2: enough tasks for a few cores when there are few heads, blocks
// of at least 32 columns. A function of the shape only (determinism).
std::size_t state_col_blocks(const GdnShape& sh) {
  std::size_t nb = 1;
  while (sh.n_v_heads * nb < 8 && sh.dv % (2 * nb) == 0 && sh.dv / (2 * nb) >= 32) nb *= 2;
  return nb;
}

// One chunk with FLA's bf16 casts (chunk_scaled_dot_kkt → solve_tril → recompute_w_u → chunk_delta_h →
// chunk_o, bf16 inputs): see GdnOptions::fla_casts.
void chunk_fla(ChunkBuf& b, RowsView q, RowsView k, RowsView v, const float* g, const float* beta,
               std::size_t t0, std::size_t n, std::size_t h, const GdnShape& sh, float scale, float* S,
               float* out, std::size_t ld_out) {
  const std::size_t dk = sh.dk, dv = sh.dv, Hv = sh.n_v_heads, hk = h / (Hv / sh.n_k_heads);
  float *Q = b.q.data(), *K = b.k.data(), *KB = b.kb.data(), *G = b.G.data(), *B = b.beta.data();
  float *A = b.L.data(), *U = b.U.data(), *W = b.W.data(), *I = b.intra.data(), *VN = b.vn.data();
  float *KdT = b.kdT.data(), *T = b.tmp.data(), *Sb = b.sb.data();
  float acc = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t t = t0 + r;
    std::memcpy(Q + r * dk, q.data + t * q.ld + hk * dk, dk * sizeof(float));
    std::memcpy(K + r * dk, k.data + t * k.ld + hk * dk, dk * sizeof(float));
    B[r] = beta[t * Hv + h];
    acc += g[t * Hv + h];
    G[r] = acc;
  }
  to_bf16(Q, n * dk), to_bf16(K, n * dk);  // q̂, k̂ stored in bf16 after the f32 L2 norm
  for (std::size_t i = 0; i < n * dk; ++i) KB[i] = K[i] * B[i / dk];
  to_bf16(KB, n * dk);
  // A[r, s] = (β k_r)·k_s e^{G_r − G_s}, s < r (f32), then Ai = (I + A)⁻¹ stored in bf16
  sgemm_nt_serial(KB, dk, K, dk, T, n, n, n, dk);
  std::fill(A, A + n * n, 0.0f);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t s = 0; s < r; ++s) A[r * n + s] = T[r * n + s] * std::exp(G[r] - G[s]);
  float* Ai = I;  // reuse the intra buffer for the inverse first
  std::fill(Ai, Ai + n * n, 0.0f);
  for (std::size_t r = 0; r < n; ++r) Ai[r * n + r] = 1.0f;
  forward_subst(A, n, Ai, n);
  to_bf16(Ai, n * n);
  // U = Ai·bf16(v β), W = Ai·bf16(k β e^G), both stored in bf16
  for (std::size_t r = 0; r < n; ++r) {
    const float* vr = v.data + (t0 + r) * v.ld + h * dv;
    for (std::size_t i = 0; i < dv; ++i) VN[r * dv + i] = vr[i] * B[r];
    const float e = std::exp(G[r]);
    for (std::size_t i = 0; i < dk; ++i) KB[r * dk + i] = K[r * dk + i] * B[r] * e;
  }
  to_bf16(VN, n * dv), to_bf16(KB, n * dk);
  gemm_nn_acc(Ai, n, VN, dv, U, dv, n, dv, n, 0.0f);
  gemm_nn_acc(Ai, n, KB, dk, W, dk, n, dk, n, 0.0f);
  to_bf16(U, n * dv), to_bf16(W, n * dk);
  // V_new = U − W·bf16(S) (f32 accumulate), stored in bf16 for the output kernel
  std::copy(S, S + dk * dv, Sb);
  to_bf16(Sb, dk * dv);
  gemm_nn_acc(W, dk, Sb, dv, T, dv, n, dv, dk, 0.0f);
  for (std::size_t i = 0; i < n * dv; ++i) VN[i] = U[i] - T[i];
  // state update: S ← e^{G_n} S + k̂ᵀ·bf16(V_new e^{G_n − G_r})
  for (std::size_t r = 0; r < n; ++r) {
    const float el = std::exp(G[n - 1] - G[r]);
    for (std::size_t i = 0; i < dv; ++i) T[r * dv + i] = VN[r * dv + i] * el;
    for (std::size_t i = 0; i < dk; ++i) KdT[i * n + r] = K[r * dk + i];
  }
  to_bf16(T, n * dv);
  to_bf16(VN, n * dv);
  // output: o = (q̂·bf16(S)) e^{G_r}·scale + bf16((q̂·k̂ᵀ) e^{G_r − G_s}, s ≤ r)·V_new·scale
  sgemm_nt_serial(Q, dk, K, dk, I, n, n, n, dk);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t s = 0; s < n; ++s) I[r * n + s] = s <= r ? I[r * n + s] * std::exp(G[r] - G[s]) : 0.0f;
  to_bf16(I, n * n);
  float* O = out + t0 * ld_out + h * dv;
  gemm_nn_acc(Q, dk, Sb, dv, O, ld_out, n, dv, dk, 0.0f);
  std::vector<float>& o2 = b.o;
  gemm_nn_acc(I, n, VN, dv, o2.data(), dv, n, dv, n, 0.0f);
  for (std::size_t r = 0; r < n; ++r) {
    const float e = std::exp(G[r]);
    for (std::size_t i = 0; i < dv; ++i)
      O[r * ld_out + i] = O[r * ld_out + i] * e * scale + o2[r * dv + i] * scale;
  }
  const float decay = std::exp(G[n - 1]);
  for (std::size_t i = 0; i < dk * dv; ++i) S[i] *= decay;
  gemm_nn_acc(KdT, n, T, dv, S, dv, dk, dv, n, 1.0f);
}

void check_shape(const GdnShape& sh) {
  KC_ASSERT(sh.n_k_heads > 0 && sh.n_v_heads % sh.n_k_heads == 0 && sh.dk > 0 && sh.dv > 0,
            "gdn: bad shape Hk {} Hv {} dk {} dv {}", sh.n_k_heads, sh.n_v_heads, sh.dk, sh.dv);
}

}  // namespace

void gdn_causal_conv1d_silu(RowsView x, std::size_t T, std::size_t C, const float* w, std::size_t K,
                            float* conv_state, float* y) {
  KC_ASSERT(K >= 1, "conv1d: kernel size 0");
  const std::size_t P = K - 1;   // history rows
  std::vector<float> wT(K * C);  // [K, C] so that the channel loop is contiguous
  for (std::size_t c = 0; c < C; ++c)
    for (std::size_t j = 0; j < K; ++j) wT[j * C + c] = w[c * K + j];
  // input row τ ∈ [−P, T): history for τ < 0
  auto row = [&](std::ptrdiff_t tau) -> const float* {
    return tau < 0 ? conv_state + static_cast<std::size_t>(static_cast<std::ptrdiff_t>(P) + tau) * C
                   : x.data + static_cast<std::size_t>(tau) * x.ld;
  };
  parallel_for(T, rows_per_task(C * K), [&](std::size_t, std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      float* yr = y + t * C;
      std::fill(yr, yr + C, 0.0f);
      for (std::size_t j = 0; j < K; ++j) {
        const float* xr = row(static_cast<std::ptrdiff_t>(t + j) - static_cast<std::ptrdiff_t>(P));
        const float* wj = wT.data() + j * C;
        for (std::size_t c = 0; c < C; ++c) yr[c] += wj[c] * xr[c];
      }
      for (std::size_t c = 0; c < C; ++c) yr[c] = silu(yr[c]);
    }
  });
  // new history = the last P rows of (history ++ x)
  std::vector<float> hist(P * C);
  for (std::size_t i = 0; i < P; ++i)
    std::memcpy(&hist[i * C], row(static_cast<std::ptrdiff_t>(T + i) - static_cast<std::ptrdiff_t>(P)),
                C * sizeof(float));
  std::copy(hist.begin(), hist.end(), conv_state);
}

void gdn_l2norm_rows(float* x, std::size_t rows, std::size_t d, std::size_t ld) {
  parallel_for(rows, rows_per_task(d), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* xr = x + r * ld;
      double ss = 0;
      for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss) + 1e-6f);
      for (std::size_t i = 0; i < d; ++i) xr[i] *= inv;
    }
  });
}

void gdn_gates(RowsView a, RowsView b, const float* A_log, const float* dt_bias, std::size_t T,
               std::size_t Hv, float* g, float* beta) {
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < Hv; ++h) {
      const float bv = b.data[t * b.ld + h];
      beta[t * Hv + h] = 1.0f / (1.0f + std::exp(-bv));
      const float x = a.data[t * a.ld + h] + dt_bias[h];
      const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
      g[t * Hv + h] = -std::exp(A_log[h]) * sp;
    }
}

void gdn_gated_rmsnorm(float* o, RowsView z, std::size_t T, std::size_t heads, std::size_t dv, const float* w,
                       float eps) {
  parallel_for(T * heads, rows_per_task(dv), [&](std::size_t, std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      float* orow = o + r * dv;
      const float* zr = z.data + (r / heads) * z.ld + (r % heads) * dv;
      double ss = 0;
      for (std::size_t i = 0; i < dv; ++i) ss += static_cast<double>(orow[i]) * orow[i];
      const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dv)) + eps);
      for (std::size_t i = 0; i < dv; ++i) orow[i] = w[i] * (orow[i] * inv) * silu(zr[i]);
    }
  });
}

void gdn_chunked(RowsView q, RowsView k, RowsView v, const float* g, const float* beta, std::size_t T,
                 const GdnShape& sh, float* state, float* out, const GdnOptions& opt,
                 const std::function<void(std::size_t)>& after_chunk) {
  check_shape(sh);
  init_blas();
  const std::size_t Hv = sh.n_v_heads, dk = sh.dk, dv = sh.dv, ld_out = Hv * dv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dk)));
  if (T == 0) return;
  const std::size_t nc = chunk_count(T, kGdnChunk);
  auto rows = [&](std::size_t c) { return std::min(kGdnChunk, T - c * kGdnChunk); };
  if (opt.fla_casts) {
    auto run_chunk = [&](std::size_t c, std::size_t h) {
      thread_local ChunkBuf buf;
      buf.resize(kGdnChunk, dk, dv);
      chunk_fla(buf, q, k, v, g, beta, c * kGdnChunk, rows(c), h, sh, scale, state + h * dk * dv, out,
                ld_out);
    };
    if (!after_chunk) {  // heads are independent: one task per head runs all its chunks
      parallel_for(Hv, 1, [&](std::size_t h, std::size_t, std::size_t) {
        for (std::size_t c = 0; c < nc; ++c) run_chunk(c, h);
      });
      return;
    }
    for (std::size_t c = 0; c < nc; ++c) {  // same arithmetic, with a barrier after each chunk
      parallel_for(Hv, 1, [&](std::size_t h, std::size_t, std::size_t) { run_chunk(c, h); });
      after_chunk(c * kGdnChunk + rows(c));
    }
    return;
  }
  // f32: phase 1 for every (head, chunk), then phase 2 per (head, column block)
  const std::size_t slot = pre_slot_floats(dk, dv);
  // Reused across calls on this thread (no page faults per layer); after_chunk must not re-enter.
  thread_local std::vector<float> pre_buf;
  pre_buf.resize(Hv * nc * slot);
  float* pre = pre_buf.data();
  auto pre_of = [&](std::size_t h, std::size_t c) { return pre_slot(pre + (h * nc + c) * slot, dk, dv); };
  parallel_for(Hv * nc, 1, [&](std::size_t i, std::size_t, std::size_t) {
    const std::size_t h = i / nc, c = i % nc;
    const FlushDenormals ftz;
    chunk_pre_f32(q, k, v, g, beta, c * kGdnChunk, rows(c), h, sh, scale, pre_of(h, c));
  });
  const std::size_t nb = state_col_blocks(sh), bw = dv / nb;
  auto run_state = [&](std::size_t c, std::size_t task) {
    const std::size_t h = task / nb, j0 = (task % nb) * bw;
    const FlushDenormals ftz;
    chunk_state_f32(pre_of(h, c), rows(c), sh, j0, bw, state + h * dk * dv,
                    out + c * kGdnChunk * ld_out + h * dv, ld_out);
  };
  if (!after_chunk) {
    parallel_for(Hv * nb, 1, [&](std::size_t task, std::size_t, std::size_t) {
      for (std::size_t c = 0; c < nc; ++c) run_state(c, task);
    });
    return;
  }
  for (std::size_t c = 0; c < nc; ++c) {  // same arithmetic, with a barrier after each chunk
    parallel_for(Hv * nb, 1, [&](std::size_t task, std::size_t, std::size_t) { run_state(c, task); });
    after_chunk(c * kGdnChunk + rows(c));
  }
}

void gdn_recurrent(RowsView q, RowsView k, RowsView v, const float* g, const float* beta, std::size_t T,
                   const GdnShape& sh, float* state, float* out) {
  check_shape(sh);
  const std::size_t Hv = sh.n_v_heads, dk = sh.dk, dv = sh.dv, r = Hv / sh.n_k_heads;
  const float root = static_cast<float>(std::sqrt(static_cast<double>(dk)));
  parallel_for(Hv, 1, [&](std::size_t h, std::size_t, std::size_t) {
    float* S = state + h * dk * dv;
    std::vector<float> qs(dk), u(dv);
    for (std::size_t t = 0; t < T; ++t) {
      const float* qr = q.data + t * q.ld + (h / r) * dk;
      const float* kr = k.data + t * k.ld + (h / r) * dk;
      const float* vr = v.data + t * v.ld + h * dv;
      for (std::size_t i = 0; i < dk; ++i) qs[i] = qr[i] / root;
      const float decay = std::exp(g[t * Hv + h]), b = beta[t * Hv + h];
      std::fill(u.begin(), u.end(), 0.0f);
      for (std::size_t i = 0; i < dk; ++i) {  // S ← e^g S;  u = Sᵀk
        float* Si = S + i * dv;
        for (std::size_t j = 0; j < dv; ++j) {
          Si[j] *= decay;
          u[j] += Si[j] * kr[i];
        }
      }
      for (std::size_t j = 0; j < dv; ++j) u[j] = (vr[j] - u[j]) * b;
      float* o = out + t * Hv * dv + h * dv;
      std::fill(o, o + dv, 0.0f);
      for (std::size_t i = 0; i < dk; ++i) {  // S += k uᵀ;  o = Sᵀ q
        float* Si = S + i * dv;
        for (std::size_t j = 0; j < dv; ++j) {
          Si[j] += kr[i] * u[j];
          o[j] += Si[j] * qs[i];
        }
      }
    }
  });
}

}  // namespace kc::engine
