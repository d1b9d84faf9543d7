// Sparse MoE FFN of the reference engine (Qwen3-Next's Qwen3NextSparseMoeBlock): router softmax in f32,
// top-k (ties to the lower expert index), renormalised weights (norm_topk), the routed experts in index
// order, then the sigmoid-gated shared expert.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/engine_ops.h"

namespace kc::engine {

// Row-major f32 weights of one MoE layer (HF layouts).
struct MoeWeights {
  std::size_t d = 0, n_experts = 0, top_k = 0, expert_ff = 0, shared_ff = 0;
  bool norm_topk = true;
  const float* router = nullptr;          // [E, D]
  const float* expert_gate_up = nullptr;  // [E, 2·Im, D], gate rows first
  const float* expert_down = nullptr;     // [E, D, Im]
  const float* shared_gate = nullptr;     // [Fs, D]
  const float* shared_up = nullptr;       // [Fs, D]
  const float* shared_down = nullptr;     // [D, Fs]
  const float* shared_gate_w = nullptr;   // [1, D]: the shared expert's sigmoid gate
};

// out[T, D] = MoE(xn[T, D]). "moe.router" (the router logits [T, E], before the softmax) goes to hook, if
// set, as layer `layer` at position pos0. order: the GEMMs' summation-order seed (`order=SEED`);
// sigmoid_bits: the shared expert's silu_mul (`bug:silu`).
void moe_ffn(const float* xn, std::size_t T, const MoeWeights& w, float* out, std::uint32_t order,
             int sigmoid_bits, const TensorHook* hook, int layer, std::size_t pos0);

}  // namespace kc::engine
