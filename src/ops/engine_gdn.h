// Gated DeltaNet ops of the reference engine (Qwen3.5 / Qwen3-Next linear-attention layers): the short
// causal conv with its state, the gates, the chunked prefill and the token-by-token recurrence, the gated
// RMSNorm. Math: ../shared/docs/qwen3_5-hybrid.md §4–5; reference: transformers' torch_chunk_gated_delta_rule
// and torch_recurrent_gated_delta_rule (f32).
//
// Layouts (row-major, one row per token; strides in floats so that the model can pass column blocks of a
// fused projection without copying):
//   q, k   [T, Hk·dk]   L2-normalised (l2norm_rows), q NOT yet scaled by dk^-1/2 (the ops scale it)
//   v      [T, Hv·dv]   value head h reads q/k head h / (Hv/Hk)
//   g, beta [T, Hv]     log-decay g ≤ 0 and β ∈ (0, 1) (gdn_gates)
//   state  [Hv, dk, dv] f32 recurrent state S, updated in place (S₀ = 0 for a new sequence)
//   out    [T, Hv·dv]
//
// Determinism: work is split over value heads, and in the f32 chunked prefill over (head, chunk) and (head,
// column block of S) with blocks fixed by the shape (kc::parallel_for, one item per task); each task is a
// fixed sequence of single-threaded kernels, so results are bitwise identical for any thread count. The f32
// chunked prefill flushes subnormals to zero (FTZ/DAZ while its tasks run): see engine_gdn.cpp.
#pragma once
#include <cstddef>
#include <functional>

#include "ops/engine_ops.h"

namespace kc::engine {

struct GdnShape {
  std::size_t n_k_heads = 0, n_v_heads = 0, dk = 0, dv = 0;
};

// Strided view of a [T, cols] block: element (t, c) at data[t·ld + c].
struct RowsView {
  const float* data = nullptr;
  std::size_t ld = 0;
};

inline constexpr std::size_t kGdnChunk = 64;  // transformers' chunk_size and FLA's BT

// Causal depthwise conv over time + SiLU (transformers causal_conv1d_fn / _update):
//   y[t, c] = silu(Σ_{j<K} w[c, j] · x[t − K + 1 + j, c]),  x rows before t = 0 come from `conv_state`.
// x [T, C] with row stride ldx; w [C, K] (HF conv1d.weight [C, 1, K]); conv_state [K−1, C]: the last K−1
// input rows seen (oldest first; zeros for a new sequence), replaced by the last K−1 rows of
// (conv_state ++ x). y [T, C] contiguous, must not alias x.
void gdn_causal_conv1d_silu(RowsView x, std::size_t T, std::size_t C, const float* w, std::size_t K,
                            float* conv_state, float* y);

// x ← x · (Σx² + 1e-6)^(-1/2) per row of d (transformers/FLA l2norm, eps inside the sqrt).
// x [rows] each of d elements at stride ld (row r at x + r·ld).
void gdn_l2norm_rows(float* x, std::size_t rows, std::size_t d, std::size_t ld);

// β = sigmoid(b); g = −exp(A_log) · softplus(a + dt_bias) with torch's softplus (x for x > 20).
// a, b: [T, Hv] at row stride ld; g, beta: [T, Hv] contiguous.
void gdn_gates(RowsView a, RowsView b, const float* A_log, const float* dt_bias, std::size_t T,
               std::size_t Hv, float* g, float* beta);

// Gated RMSNorm per row of dv (Qwen3NextRMSNormGated, plain weight):
//   o ← o · (mean(o²) + eps)^(-1/2) ⊙ w ⊙ silu(z).   o [rows, dv] contiguous; z row r at z.data + (r /
//   per)·ld
//   + (r % per)·dv, i.e. z is [T, per·dv] at stride ld with per = heads per token.
void gdn_gated_rmsnorm(float* o, RowsView z, std::size_t T, std::size_t heads, std::size_t dv, const float* w,
                       float eps);

struct GdnOptions {
  // FLA-style bf16 casts inside the chunked prefill (fla/ops/common/chunk_delta_h.py, chunk_o.py): q̂, k̂
  // stored in bf16 after the f32 L2 norm; (I+A)⁻¹, W and U stored in bf16; the state cast to bf16 in
  // V_new = U − W·S and in Q·S; V_new stored in bf16; the decayed V_new cast to bf16 before S += K̂ᵀ·V;
  // the intra-chunk matrix cast to bf16 before ·V_new; decays and every accumulation in f32; the state
  // itself stays f32. Off: transformers' all-f32 torch_chunk_gated_delta_rule.
  bool fla_casts = false;
};

// Chunked prefill (chunk 64, transformers torch_chunk_gated_delta_rule; chunks restart at row 0 of this
// call): out [T, Hv·dv], state updated to S_T. `after_chunk`, if set, is called on the calling thread
// after each chunk's state update with the number of rows absorbed so far (the model reports the state
// there; whatever the callback leaves in `state` is what the next chunk reads).
void gdn_chunked(RowsView q, RowsView k, RowsView v, const float* g, const float* beta, std::size_t T,
                 const GdnShape& sh, float* state, float* out, const GdnOptions& opt = {},
                 const std::function<void(std::size_t rows_done)>& after_chunk = nullptr);

// Token-by-token recurrence (transformers torch_recurrent_gated_delta_rule, all f32), used for decode:
//   S ← e^g·S;  u = β(v − Sᵀk̂);  S ← S + k̂uᵀ;  o = Sᵀ q̂/√dk.
void gdn_recurrent(RowsView q, RowsView k, RowsView v, const float* g, const float* beta, std::size_t T,
                   const GdnShape& sh, float* state, float* out);

}  // namespace kc::engine
