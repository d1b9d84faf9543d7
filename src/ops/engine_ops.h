// f32 ops of kerncheck's reference engine (used by src/model/llama.*). Raw-pointer kernels over row-major
// f32 arrays; they know nothing of the model graph (gemma.cpp ops.h style).
//
// Determinism: every op gives bitwise the same result for any thread count. Work is cut into chunks whose
// boundaries depend only on the shapes (kc::parallel_for), and each output element is computed by exactly
// one single-threaded kernel call. OpenBLAS runs single-threaded (init_blas); its own threading would cut
// the GEMM by thread count.
#pragma once
#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

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
// fixed tiles of rows × columns; each tile is one single-threaded cblas_sgemm (cblas_sgemv when m == 1).
void gemm_nt(const float* x, std::size_t m, std::size_t k, const float* w, std::size_t n, float* y,
             const float* bias = nullptr);

// Single-threaded strided GEMMs for use inside parallel tasks (ld* in floats):
//   c[m, n] = a[m, k] · b[n, k]ᵀ    and    c[m, n] = a[m, k] · b[k, n]
void sgemm_nt_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k);
void sgemm_nn_serial(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c,
                     std::size_t ldc, std::size_t m, std::size_t n, std::size_t k);

// ---------------------------------------------------------------------------------------------- pointwise
// RMSNorm per row (HF LlamaRMSNorm in f32): y = w · x / sqrt(mean(x²) + eps). x, y: [rows, d]; may alias.
void rmsnorm(const float* x, const float* w, std::size_t rows, std::size_t d, float eps, float* y);

// out[i] = silu(gate[i]) · up[i], silu(g) = g / (1 + exp(-g)). out may alias gate or up.
void silu_mul(const float* gate, const float* up, std::size_t n, float* out);

// y[i] += x[i]
void add_inplace(float* y, const float* x, std::size_t n);

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
void rope_tables(std::span<const float> inv_freq, std::size_t pos0, std::size_t n_pos, float* cos_t,
                 float* sin_t);

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
// implementations, whose difference is the normal difference (noise floor) of SPEC §2.
enum class AttentionKernel {
  exact,  // exact row max over all visible keys, one P·V GEMM per (head, 32-row) tile (the reference)
  flash,  // online softmax over blocks of kFlashBlockKeys keys (running max, rescaled partial sums and
          // output accumulator, f32 row sum), as flash attention 2 and the seed's attention_row
};
struct KernelOptions {
  AttentionKernel attention = AttentionKernel::exact;
  // Gated DeltaNet chunked prefill with FLA's bf16 casts (state cast to bf16 before W·S, V_new stored in
  // bf16, f32 accumulation; engine_gdn.h GdnOptions::fla_casts). Off: transformers' all-f32 algorithm.
  bool gdn_fla_casts = false;
};

// Causal GQA attention of T new queries at positions pos0 … pos0+T-1 over the KV cache:
//   out[t, h] = Σ_{j ≤ pos0+t} p_j v[j, g] / Σ_j p_j,  p_j = exp(s_j − max s),  s_j = q[t, h]·k[j, g] / √hd,
//   g = h / (n_heads / n_kv_heads).
// q: [T, nH·hd]; k, v: [≥ pos0+T, nKV·hd] (cache rows); out: [T, nH·hd].
// Work is tiled by (head, block of kAttnBlockRows queries); every tile is computed by one thread, so the
// result is bitwise the same for any thread count (both kernels).
// "attn.p" hook (from worker threads, concurrently): unnormalised p after the row sums took it and before
// p·v, so rounding p in the hook models a kernel that rounds P before the P·V product while summing the
// unrounded p (seed attention_row). Zero above the diagonal. pos0 of the event = query position of row 0.
//   exact: one event per tile, [rows ≤ 32, pos0+rows] over all visible keys, p = exp(s − exact row max).
//   flash: one event per tile and key block, [rows ≤ 32, ≤ kFlashBlockKeys] (keys j0 … j0+cols-1, j0 a
//          multiple of kFlashBlockKeys, in order), p = exp(s − running max after this block) ∈ [0, 1].
// exact sums the row in f64, flash in f32 (as flash kernels do): same result to f32 rounding (~1e-6 rel).
inline constexpr std::size_t kAttnBlockRows = 32;
inline constexpr std::size_t kFlashBlockKeys = 64;
void attention_causal(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                      const AttentionShape& shape, float* out, const TensorHook* hook = nullptr,
                      int layer = -1, const KernelOptions& opt = {});

}  // namespace kc::engine
