// The engine seam: every op a model's forward pass runs, as one table of functions chosen once per engine
// instance (CausalLM::set_backend; default the host). The models call only these; a device (e.g. CUDA)
// implementation is one more table: a new backend_<name>.cpp defining its EngineBackend, and one line in
// backend.cpp's registry. The host table (backend_host.cpp) points at the f32 kernels of src/ops and the
// quantized GEMV of model/dequant (whose ggml block formats are the GGUF reader's: that is why the seam sits
// in src/model, the lowest layer that sees every op).
//
// Contract for every implementation: the ops' documented results (src/ops/*.h, model/dequant.h), and the
// same bits for any thread count (tests compare the host's kernels with their scalar twins).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "model/dequant.h"
#include "ops/engine_gdn.h"
#include "ops/engine_moe.h"
#include "ops/engine_ops.h"
#include "ops/packed_gemm.h"

namespace kc {

// One product y[m, n] = x[m, k] · wᵀ (+ bias[n]) over a weight as the model holds it: exactly one of
// `packed` (f32 in the packed GEMM's panels: Llama) and `rows` (f32 row-major [n, k]: the hybrid).
struct LinearOp {
  const engine::PackedMatrix* packed = nullptr;
  const float* rows = nullptr;
  std::size_t n = 0;
  float* y = nullptr;
  const float* bias = nullptr;
  // The same matrix in the file's ggml blocks (or nullptr / q->data == nullptr): when set, the product runs on
  // the blocks (quant_gemv, each row as a single-row GEMV), else on the f32 weights. The model sets it for
  // rows that are one-token steps (decode, a batch of decode steps, a 1-token prefill chunk).
  const QuantMatrix* q = nullptr;
  const std::uint32_t* row_map = nullptr;  // q's row of output row r (nullptr: r)
  float* residual = nullptr;               // rows only: residual[m, n] += y (inside the GEMM's tiles)
  bool one_col_tile = false;               // rows only: engine::RowGemmOp::one_col_tile
};

struct EngineBackend {
  const char* name;
  // GEMM of several weights applied to the same x in one parallel region. With q: quant_gemv of m rows (ops
  // that all have q share one region); packed: engine::packed_gemm (sched: order and bf16_every); rows:
  // engine::gemm_rows (sched.order).
  void (*linear)(const float* x, std::size_t m, std::size_t k, std::span<const LinearOp> ops,
                 const engine::GemmSchedule& sched);
  // gate.y = silu(x·gateᵀ) · (x·upᵀ) (up.y: scratch of the same shape): linear of both, then silu_mul (rows
  // weights with m > 1: fused per GEMM tile, engine::gemm_rows_silu; same bits).
  void (*linear_silu)(const float* x, std::size_t m, std::size_t k, const LinearOp& gate, const LinearOp& up,
                      const engine::GemmSchedule& sched, int sigmoid_bits);
  // Pointwise and norms (engine_ops.h).
  void (*rmsnorm)(const float* x, const float* w, std::size_t rows, std::size_t d, float eps, float* y,
                  std::uint32_t order, int rsqrt_bits);
  void (*silu_mul)(const float* gate, const float* up, std::size_t n, float* out, int sigmoid_bits);
  void (*add_inplace)(float* y, const float* x, std::size_t n);
  void (*sigmoid_gate)(float* x, const float* gate, std::size_t n);
  // RoPE (engine_ops.h).
  void (*rope_tables)(std::span<const float> inv_freq, std::size_t pos0, std::size_t n_pos, float* cos_t,
                      float* sin_t, int angle_bits);
  void (*rope_rotate_half)(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                           std::size_t rot_dim, const float* cos_t, const float* sin_t);
  void (*rope_adjacent_pairs)(float* x, std::size_t rows, std::size_t n_heads, std::size_t head_dim,
                              std::size_t rot_dim, const float* cos_t, const float* sin_t);
  // Causal GQA attention over the KV cache (engine_ops.h attention_causal).
  void (*attention_causal)(const float* q, std::size_t T, std::size_t pos0, const float* k, const float* v,
                           const engine::AttentionShape& shape, float* out, const engine::TensorHook* hook,
                           int layer, const engine::KernelOptions& opt);
  // One query row per sequence over each sequence's own cache (engine_ops.h attention_decode).
  void (*attention_decode)(const float* q, std::span<const engine::AttentionSeq> seqs,
                           const engine::AttentionShape& shape, float* out, const engine::TensorHook* hook,
                           int layer, const engine::KernelOptions& opt);
  // Gated DeltaNet (engine_gdn.h).
  void (*gdn_causal_conv1d_silu)(engine::RowsView x, std::size_t T, std::size_t C, const float* w,
                                 std::size_t K, float* conv_state, float* y);
  void (*gdn_l2norm_rows)(float* x, std::size_t rows, std::size_t d, std::size_t ld);
  void (*gdn_gates)(engine::RowsView a, engine::RowsView b, const float* A_log, const float* dt_bias,
                    std::size_t T, std::size_t Hv, float* g, float* beta);
  void (*gdn_gated_rmsnorm)(float* o, engine::RowsView z, std::size_t T, std::size_t heads, std::size_t dv,
                            const float* w, float eps);
  void (*gdn_chunked)(engine::RowsView q, engine::RowsView k, engine::RowsView v, const float* g,
                      const float* beta, std::size_t T, const engine::GdnShape& sh, float* state, float* out,
                      const engine::GdnOptions& opt, const std::function<void(std::size_t)>& after_chunk);
  void (*gdn_recurrent)(engine::RowsView q, engine::RowsView k, engine::RowsView v, const float* g,
                        const float* beta, std::size_t T, const engine::GdnShape& sh, float* state,
                        float* out);
  // MoE dispatch: router, top-k, experts, shared expert (engine_moe.h).
  void (*moe_ffn)(const float* xn, std::size_t T, const engine::MoeWeights& w, float* out,
                  std::uint32_t order, int sigmoid_bits, const engine::TensorHook* hook, int layer,
                  std::size_t pos0);
};

// The host (CPU) implementation: src/ops's kernels and model/dequant's quant_gemv.
const EngineBackend& host_backend();
// A registered backend by name ("host"); throws kc::Error naming the known ones otherwise.
const EngineBackend& engine_backend(std::string_view name);
// "host, …": the registered names, for messages and --help.
std::string engine_backend_names();

}  // namespace kc
