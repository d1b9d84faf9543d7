// f32 ops of kerncheck's reference engine (used by src/model/llama.*). Raw-pointer kernels over row-major
// f32 arrays; they know nothing of the model graph (gemma.cpp ops.h style).
//
// Determinism: every op gives bitwise the same result for any thread count. Work is cut into chunks whose
// boundaries depend only on the shapes (kc::parallel_for), and each output element is computed by exactly
// one single-threaded kernel call. OpenBLAS runs single-threaded (init_blas); its own threading would cut
// the GEMM by thread count.
#pragma once
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "numeric/fastmath.h"
#include "ops/order.h"

namespace kc::engine {

// ---------------------------------------------------------------------------------------------- hooks
// One named intermediate tensor as the forward pass produces it: data is [rows, cols] row-major. The hook
// may change data in place (the lab rounds it); the forward pass continues with the changed values.
// Per-head tensors ("attn.p") are reported from worker threads, possibly concurrently: a hook must be
// thread-safe. Every other tensor is reported from the calling thread.
struct TensorEvent {
  std::string_view name;  // "attn.q", "attn.p", "mlp.out", "hidden", … (docs/engine.md)
  int layer = -1;         // -1 outside the layer stack ("embed", "final.norm", "logits")
  int head = -1;          // query head for per-head tensors, else -1
  std::size_t pos0 = 0;   // sequence position of row 0
  std::size_t rows = 0, cols = 0;
  std::span<float> data;
};
using TensorHook = std::function<void(const TensorEvent&)>;

// ---------------------------------------------------------------------------------------------- GEMM
// Makes OpenBLAS single-threaded (we parallelise over fixed blocks ourselves). Idempotent; every GEMM
// entry point calls it.
void init_blas();

// y[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n]): w is a row-major [out, in] weight as stored by HF. Cut into
// tiles of rows × columns that depend on (m, n) only; each tile is one single-threaded cblas_sgemm
// (cblas_sgemv when m == 1). K is never split, so every element's sum is one BLAS call's.
// order ≠ 0: every tile (decode too) is sgemm_nt_ordered.
void gemm_nt(const float* x, std::size_t m, std::size_t k, const float* w, std::size_t n, float* y,
             const float* bias = nullptr, std::uint32_t order = 0);

// Single-threaded strided GEMMs for use inside parallel tasks (ld* in floats):
//   c[m, n] = alpha · a[m, k] · b[n, k]ᵀ    and    c[m, n] = a[m, k] · b[k, n]
void sgemm_nt_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, float alpha = 1.0f);
void sgemm_nn_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k);
// sgemm_nt_serial with K cut into order_blocks(order, salt kSaltGemmK, k, 16, 8), the blocks summed in their
// drawn order (first block β = 0, the rest β = 1): an equally precise GEMM of another summation order.
// order 0: exactly sgemm_nt_serial. Used by the hybrid's GEMM tiles and gemm_nt under `order=SEED`.
void sgemm_nt_ordered(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                      std::size_t ldc, std::size_t m, std::size_t n, std::size_t k, std::uint32_t order,
                      float alpha = 1.0f);

// Several products y = x[m, k] · w[n, k]ᵀ of one x over row-major f32 weights (the hybrid's prefill), every
// op's tiles in one parallel region. Tiles of (m, n) only: rows in blocks of 256 (smaller row tiles run
// 20–40% slower at K = 192, and tiles under ~1e6 multiply-adds take OpenBLAS's small-matrix kernel, which
// rounds differently); columns, from n alone (a tile's width can change OpenBLAS's rounding, so a prompt in
// pieces of 256 rows must see the one call's widths), halved until there are 4 column tiles or a tile would
// fall under 64 columns (hybrid-tiny: its 512-column projections 4 column tiles, the LM head 16). Each tile
// is one sgemm_nt_ordered call, so every element is the same call's for any thread count and grouping of
// ops. residual ≠ nullptr: residual[m, n] += y after each tile (same bits as a separate add_inplace).
// m ≤ 1 (decode): each op is gemm_nt (its GEMV tiles), then bias and residual as above.
struct RowGemmOp {
  const float* w;  // [n, k] row-major
  std::size_t n;
  float* y;  // [m, n]
  const float* bias = nullptr;
  float* residual = nullptr;
  bool one_col_tile = false;  // all n columns in one tile per row block (a narrow op riding with a wide one)
};
void gemm_rows(const float* x, std::size_t m, std::size_t k, std::span<const RowGemmOp> ops,
               std::uint32_t order = 0);
// gate = silu(x·w_gateᵀ) · (x·w_upᵀ) [m, n] (up: scratch [m, n]): gemm_rows's tiles of both weights, the
// silu_mul of each tile right after its two products (one region; same bits as gemm_rows then silu_mul).
void gemm_rows_silu(const float* x, std::size_t m, std::size_t k, const float* w_gate, const float* w_up,
                    std::size_t n, float* gate, float* up, std::uint32_t order = 0, int sigmoid_bits = 23);

// ---------------------------------------------------------------------------------------------- pointwise
// exp: numeric/fastmath.h exp_fma (fused multiply-adds: the same bits in a vectorised loop and its tail).

// RMSNorm per row (HF LlamaRMSNorm in f32): y = w · x / sqrt(mean(x²) + eps). x, y: [rows, d]; may alias.
// The default sums x² in f64. order ≠ 0: in f32 (as GPU kernels), over order_blocks(order, kSaltNorm, d, 16,
// 8) in their drawn order, each block one sequential chain. rsqrt_bits < 23 (a lab bug, `bug:norm_rsqrt`):
// 1/sqrt(var + eps) kept to that many mantissa bits, as an rsqrt approximation without its Newton step.
void rmsnorm(const float* x, const float* w, std::size_t rows, std::size_t d, float eps, float* y,
             std::uint32_t order = 0, int rsqrt_bits = 23);

// out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + exp(-g)) (fastmath::exp_fma). out may alias gate or up.
// sigmoid_bits < 23 (a lab bug, `bug:silu`): the sigmoid 1/(1 + exp(-g)) kept to that many mantissa bits,
// as a table or polynomial sigmoid of that accuracy.
void silu_mul(const float* gate, const float* up, std::size_t n, float* out, int sigmoid_bits = 23);

// y[i] += x[i]
void add_inplace(float* y, const float* x, std::size_t n);

// x[i] *= sigmoid(gate[i]) = 1 / (1 + exp(-gate[i])) with libm's std::exp (the hybrid's attention output
// gate, as transformers computes it).
void sigmoid_gate(float* x, const float* gate, std::size_t n);

// Softmax of each row in place (max-subtracted; sum in f32 in index order).
void softmax_rows(float* x, std::size_t rows, std::size_t n);

// ---------------------------------------------------------------------------------------------- RoPE
enum class RopeScaling { none, linear, llama3 };

struct RopeParams {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;                    // linear and llama3
  double low_freq_factor = 1.0;           // llama3
  double high_freq_factor = 4.0;          // llama3
  double original_max_position = 8192.0;  // llama3
};

// inv_freq[i] = theta^(-2i/rot_dim), i < rot_dim/2, with the scaling applied (transformers'
// _compute_default/linear/llama3_rope_parameters, in f32 like transformers).
std::vector<float> rope_inv_freq(const RopeParams& p, std::size_t rot_dim);

// cos/sin tables [n_pos, rot_dim/2] for positions pos0 … pos0+n_pos-1: angle = f32(pos · inv_freq[i]).
// angle_bits < 23 (a lab bug, `bug:rope`): the angle kept to that many mantissa bits, as a kernel that
// computes pos · inv_freq in low precision (the absolute error grows with the position).
void rope_tables(std::span<const float> inv_freq, std::size_t pos0, std::size_t n_pos, float* cos_t,
                 float* sin_t, int angle_bits = 23);

// x: [rows, n_heads · head_dim]; rotate the first rot_dim dims of every head, row r at tables row r.
// rotate-half (HF): pairs (i, i + rot_dim/2).   adjacent pairs (GGUF / llama.cpp NORM): pairs (2i, 2i+1).
void rope_rotate_half(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                      std::size_t rot_dim, const float* cos_t, const float* sin_t);
void rope_adjacent_pairs(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                         std::size_t rot_dim, const float* cos_t, const float* sin_t);

// ---------------------------------------------------------------------------------------------- attention
struct AttentionShape {
  std::size_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// Kernel choices of equal (f32) precision that differ only in summation order: two equally correct
// implementations, whose difference is the normal difference (noise floor, docs/judge.md).
enum class AttentionKernel {
  exact,  // exact row max over all visible keys, one P·V GEMM per (head, 32-row) tile (the reference)
  flash,  // online softmax over blocks of kFlashBlockKeys keys (running max, rescaled partial sums and
          // output accumulator, f32 row sum), as flash attention 2 and the founding study's attention_row
};
inline constexpr std::size_t kDeepKeys = 256;  // the depth bug's default start: a tile boundary
// Injected regressions of the lab (`bug:NAME=STRENGTH`, docs/lab.md) that live inside the engine's kernels;
// the rest live in the variant's hook (src/model/variant.cpp). Defaults: no bug.
struct KernelBugs {
  int rope_angle_bits = 23;       // rope_tables angle_bits
  int norm_rsqrt_bits = 23;       // rmsnorm rsqrt_bits (every RMSNorm of the model)
  float norm_eps_factor = 1.0f;   // the model's rms eps multiplied by this (a wrong eps from a config)
  std::size_t gemm_bf16_every = 0;  // packed GEMM (Llama): partial sums stored as bf16 every N k
  int silu_sigmoid_bits = 23;     // silu_mul sigmoid_bits
  float deep_score = 0.0f;        // attention: scores of keys at positions ≥ deep_from multiplied by 1 + this
  std::size_t deep_from = kDeepKeys;  // … the first key position it acts on (`bug:deep_score@D=S`: D)
  bool any() const {
    return rope_angle_bits < 23 || norm_rsqrt_bits < 23 || norm_eps_factor != 1.0f || gemm_bf16_every ||
           silu_sigmoid_bits < 23 || deep_score != 0.0f;
  }
};

struct KernelOptions {
  AttentionKernel attention = AttentionKernel::exact;
  // Summation-order seed (`order=SEED`): 0 the default kernels; else GEMM K blocks, attention key blocks
  // (size and order) and RMSNorm reductions in the seed's drawn order (order_blocks), same precision.
  std::uint32_t order = 0;
  KernelBugs bugs;
  // Gated DeltaNet chunked prefill with FLA's bf16 casts (state cast to bf16 before W·S, V_new stored in
  // bf16, f32 accumulation; engine_gdn.h GdnOptions::fla_casts). Off: transformers' all-f32 algorithm.
  bool gdn_fla_casts = false;
};

// Causal GQA attention of T new queries at positions pos0 … pos0+T-1 over the KV cache:
//   out[t, h] = Σ_{j ≤ pos0+t} p_j v[j, g] / Σ_j p_j,  p_j = exp(s_j − max s),  s_j = q[t, h]·k[j, g] / √hd,
//   g = h / (n_heads / n_kv_heads).
// q: [T, nH·hd]; k, v: [≥ pos0+T, nKV·hd] (cache rows); out: [T, nH·hd].
// Work is tiled by (head, block of kAttnBlockRows queries); every tile is computed by one thread, so the
// result is bitwise the same for any thread count (both kernels). exact with T > 1 computes the tiles of
// the query heads that share a KV head as one task (their rows stacked: K and V are packed once per group).
// "attn.p" hook (from worker threads, concurrently): unnormalised p after the row sums took it and before
// p·v, so rounding p in the hook models a kernel that rounds P before the P·V product while summing the
// unrounded p (the founding study's attention_row). Zero above the diagonal. pos0 of the event = query position of row 0.
//   exact: one event per tile, [rows ≤ 32, pos0+rows] over all visible keys, p = exp(s − exact row max).
//   flash: one event per tile and key block, [rows ≤ 32, ≤ kFlashBlockKeys] (keys j0 … j0+cols-1, j0 a
//          multiple of kFlashBlockKeys, in order), p = exp(s − running max after this block) ∈ [0, 1].
// opt.order ≠ 0: key blocks of a drawn size (16 … 128) in a drawn order (order_blocks, per tile's key count):
//   flash: the online softmax over them (one event per block, blocks in that order);
//   exact: the exact row max first, then the row sum (f32) and P·V summed block by block in that order (one
//          event per tile, as exact). Both per head, f32: mathematically the same attention.
// exact sums the row in f64, flash in f32 (as flash kernels do): same result to f32 rounding (~1e-6 rel).
inline constexpr std::size_t kAttnBlockRows = 32;
inline constexpr std::size_t kFlashBlockKeys = 64;
void attention_causal(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                      const AttentionShape& shape, float* out, const TensorHook* hook = nullptr,
                      int layer = -1, const KernelOptions& opt = {});

// One decode step of several sequences: sequence b's query row q[b] (at position seqs[b].pos) over its own
// cache seqs[b].k / .v (keys 0 … pos), into out[b]; q, out: [B, nH·hd]. Row b is bitwise
// attention_causal(q[b], 1, pos, k, v, …) (the same per-head tile, the same hook events); all (sequence,
// head) tiles run in one parallel region.
struct AttentionSeq {
  std::size_t pos = 0;
  const float* k = nullptr;
  const float* v = nullptr;
};
void attention_decode(const float* q, std::span<const AttentionSeq> seqs, const AttentionShape& shape,
                      float* out, const TensorHook* hook = nullptr, int layer = -1, const KernelOptions& opt = {});

}  // namespace kc::engine
