// The host implementation of the engine seam (model/backend.h): src/ops's f32 kernels and the quantized
// decode GEMV of model/dequant.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "model/backend.h"

namespace kc {
namespace {

bool use_quant(const LinearOp& op, std::size_t k) {
  if (!op.q || !op.q->data) return false;
  KC_ASSERT(op.q->rows == op.n && op.q->cols == k, "linear: quantized [{}, {}] for [{}, {}]", op.q->rows,
            op.q->cols, op.n, k);
  return true;
}

QuantGemv quant_job(const LinearOp& op, const float* x, std::size_t m) {
  return {*op.q, x, op.y, op.row_map, op.bias, m};
}

void host_linear(const float* x, std::size_t m, std::size_t k, std::span<const LinearOp> ops,
                 const engine::GemmSchedule& sched) {
  std::vector<QuantGemv> quant;
  std::vector<engine::PackedGemmOp> packed;
  std::vector<engine::RowGemmOp> rows;
  for (const auto& op : ops) {
    KC_ASSERT(!op.packed != !op.rows, "linear: exactly one of packed and rows");
    if (use_quant(op, k)) {
      quant.push_back(quant_job(op, x, m));
    } else if (op.packed) {
      KC_ASSERT(op.packed->rows() == op.n && op.packed->cols() == k, "linear: weight [{}, {}] for [{}, {}]",
                op.packed->rows(), op.packed->cols(), op.n, k);
      KC_ASSERT(!op.residual, "linear: residual is for row-major weights");
      packed.push_back({op.packed, op.y, op.bias});
    } else {
      rows.push_back({op.rows, op.n, op.y, op.bias, op.residual, op.one_col_tile});
    }
  }
  if (quant.size() == ops.size()) return quant_gemv(quant);  // decode's Q/K/V or gate/up: one region
  for (const auto& j : quant) quant_gemv({&j, 1});
  if (!rows.empty()) engine::gemm_rows(x, m, k, rows, sched.order);
  if (!packed.empty()) engine::packed_gemm(x, m, packed, sched);
}

void host_linear_silu(const float* x, std::size_t m, std::size_t k, const LinearOp& gate, const LinearOp& up,
                      const engine::GemmSchedule& sched, int sigmoid_bits) {
  KC_ASSERT(gate.n == up.n, "linear_silu: gate {} and up {} columns", gate.n, up.n);
  if (gate.rows && up.rows && m > 1 && !gate.bias && !up.bias)
    return engine::gemm_rows_silu(x, m, k, gate.rows, up.rows, gate.n, gate.y, up.y, sched.order,
                                  sigmoid_bits);
  const LinearOp both[] = {gate, up};
  host_linear(x, m, k, std::span<const LinearOp>(both), sched);
  engine::silu_mul(gate.y, up.y, m * gate.n, gate.y, sigmoid_bits);
}

}  // namespace

const EngineBackend& host_backend() {
  static const EngineBackend host{
      .name = "host",
      .linear = host_linear,
      .linear_silu = host_linear_silu,
      .rmsnorm = engine::rmsnorm,
      .silu_mul = engine::silu_mul,
      .add_inplace = engine::add_inplace,
      .sigmoid_gate = engine::sigmoid_gate,
      .rope_tables = engine::rope_tables,
      .rope_rotate_half = engine::rope_rotate_half,
      .rope_adjacent_pairs = engine::rope_adjacent_pairs,
      .attention_causal = engine::attention_causal,
      .attention_decode = engine::attention_decode,
      .gdn_causal_conv1d_silu = engine::gdn_causal_conv1d_silu,
      .gdn_l2norm_rows = engine::gdn_l2norm_rows,
      .gdn_gates = engine::gdn_gates,
      .gdn_gated_rmsnorm = engine::gdn_gated_rmsnorm,
      .gdn_chunked = engine::gdn_chunked,
      .gdn_recurrent = engine::gdn_recurrent,
      .moe_ffn = engine::moe_ffn,
  };
  return host;
}

}  // namespace kc
