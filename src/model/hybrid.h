// kerncheck's f32 reference engine for the Gated DeltaNet hybrids: Qwen3.5 (text exports and the
// vision-language wrappers' language model) and Qwen3-Next (fused projections, MoE with a shared expert).
// Layers are either Gated DeltaNet (linear attention with an f32 recurrent state per value head and a short
// causal conv) or gated full attention; norms are zero-centred RMSNorm (y = x̂·(1 + w)) except the GDN
// output norm (plain weight, gated by silu(z)). Math: ../shared/docs/qwen3_5-hybrid.md, docs/hybrid.md.
//
// Prefill runs the chunked algorithm (chunk 64) and decode the recurrence from the cached f32 state, as
// transformers does. A second prefill() on the same state continues from the stored recurrent and conv
// states ("prefill in blocks").
//
// Example:
//   auto m = kc::HybridModel::load("tests/data/fixtures/qwen3_5-tiny");
//   auto st = m.new_state();
//   m.prefill(*st, prompt, sink);
//   std::vector<float> next = m.decode(*st, token);
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/spare_pool.h"
#include "ops/engine_gdn.h"
#include "ops/engine_ops.h"

namespace kc {

enum class HybridArch { qwen3_5, qwen3_next };

struct HybridConfig {
  HybridArch arch = HybridArch::qwen3_5;
  std::string weight_prefix = "model.";  // "model.language_model." in vision-language wrappers
  std::size_t n_vocab = 0, d_model = 0, n_layers = 0, d_ff = 0;
  float rms_eps = 1e-6f;
  bool tied_embeddings = false;
  std::vector<bool> full_attention;  // per layer: gated full attention (else Gated DeltaNet)
  // Gated DeltaNet
  std::size_t lin_k_heads = 0, lin_v_heads = 0, lin_dk = 0, lin_dv = 0, conv_kernel = 4;
  // gated attention
  std::size_t n_heads = 0, n_kv_heads = 0, head_dim = 0, rot_dim = 0;  // rot_dim = head_dim · partial factor
  engine::RopeParams rope;
  // MoE (Qwen3-Next): per layer whether the FFN is sparse
  std::vector<bool> moe;
  std::size_t n_experts = 0, top_k = 0, moe_ff = 0, shared_ff = 0;
  bool norm_topk = true;

  std::size_t key_dim() const { return lin_k_heads * lin_dk; }
  std::size_t value_dim() const { return lin_v_heads * lin_dv; }
  std::size_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

struct HybridLayerWeights {
  std::vector<float> in_norm, post_norm;  // [D] zero-centred
  // Gated DeltaNet. w_in rows: [Q (Hk·dk) | K (Hk·dk) | V (Hv·dv) | Z (Hv·dv)] (Qwen3-Next's grouped rows are
  // regrouped at load); w_ba rows: [b (Hv) | a (Hv)].
  std::vector<float> w_in, w_ba, conv, dt_bias, A_log, gdn_norm, w_out;
  // gated attention: wq [nH·2hd, D] (per head: hd query rows then hd gate rows)
  std::vector<float> wq, wk, wv, wo, q_norm, k_norm;
  // dense FFN
  std::vector<float> w_gate, w_up, w_down;
  // MoE: router [E, D]; experts gate_up [E, 2·Im, D] (gate rows first), down [E, D, Im]; shared expert
  std::vector<float> router, ex_gate_up, ex_down, sh_gate, sh_up, sh_down, sh_gate_w;
};

// Per-sequence state: KV cache of the attention layers, conv and recurrent states of the GDN layers.
struct HybridState : SequenceState {
  explicit HybridState(const HybridConfig& c);
  std::size_t position() const override { return pos; }
  std::size_t pos = 0;
  std::size_t capacity = 0;
  std::vector<std::vector<float>> k, v;  // attention layers: [capacity, nKV·hd]; GDN layers: empty
  std::vector<std::vector<float>> conv;  // GDN layers: [Kc−1, conv_dim] last pre-conv rows, oldest first
  std::vector<std::vector<float>> S;     // GDN layers: [Hv, dk, dv] f32
  std::size_t kv_width = 0;
  void reserve(std::size_t n_pos);
};

class HybridModel : public CausalLM {
 public:
  // An HF checkpoint folder (config.json model_type qwen3_5[_moe][_text] / qwen3_next). Throws kc::Error
  // naming the file, the tensor or field and the expected value.
  static HybridModel load(const std::string& dir);
  // True when config.json's model_type (or text_config.model_type) is a hybrid this class loads.
  static bool is_hybrid_model_type(const std::string& model_type);

  const HybridConfig& config() const { return config_; }

  std::vector<float> prefill(HybridState& st, std::span<const std::int32_t> tokens) const;
  void prefill(HybridState& st, std::span<const std::int32_t> tokens, const LogitsSink& sink) const;
  std::vector<float> decode(HybridState& st, std::int32_t token) const;

  // CausalLM
  std::string architecture() const override;
  std::size_t vocab_size() const override { return config_.n_vocab; }
  std::size_t n_layers() const override { return config_.n_layers; }
  std::unique_ptr<SequenceState> new_state() const override { return std::make_unique<HybridState>(config_); }
  void prefill(SequenceState& st, std::span<const std::int32_t> tokens,
               const LogitsSink& sink) const override {
    prefill(static_cast<HybridState&>(st), tokens, sink);
  }
  std::vector<float> decode(SequenceState& st, std::int32_t token) const override {
    return decode(static_cast<HybridState&>(st), token);
  }
  void set_hook(engine::TensorHook hook) override { hook_ = std::move(hook); }
  void for_each_weight(const std::function<void(const std::string&, std::span<float>)>& fn) override;
  void set_kernel_options(const engine::KernelOptions& o) override { kernel_ = o; }

  static constexpr std::size_t kPrefillChunk = 512;  // multiple of engine::kGdnChunk

 private:
  struct Scratch;
  using ScratchPtr = SparePool<Scratch>::Ptr;
  ScratchPtr take_scratch() const;
  void give_back(ScratchPtr s) const;  // frees an LM-head buffer over 64 MB, keeps the rest for the next call
  // want_logits = false skips the LM head (a prefill whose caller passed no sink).
  void forward(HybridState& st, std::span<const std::int32_t> tokens, bool decode_step, bool last_piece,
               Scratch& s, bool want_logits = true) const;
  void gdn_block(std::size_t il, HybridState& st, std::size_t T, bool decode_step, bool store,
                 Scratch& s) const;
  void attention_block(std::size_t il, HybridState& st, std::size_t T, Scratch& s) const;
  void ffn_block(std::size_t il, std::size_t T, Scratch& s) const;
  // The GEMMs' schedule: order=SEED (bug:gemm_acc is the packed GEMM's, Llama only).
  engine::GemmSchedule gemm_schedule() const { return {kernel_.order, 0}; }
  void project_residual(const float* in, std::size_t T, std::size_t k, const std::vector<float>& w, Scratch& s,
                        std::string_view name, int layer) const;
  void norm(const std::vector<float>& w, const float* x, std::size_t rows, std::size_t d, float* y) const;
  void report(std::string_view name, int layer, std::size_t pos0, std::size_t rows, std::size_t cols,
              float* data) const;
  void check_tokens(std::span<const std::int32_t> tokens) const;

  HybridConfig config_;
  std::vector<float> embed_, final_norm_, lm_head_;
  std::vector<HybridLayerWeights> layers_;
  std::vector<float> inv_freq_;
  engine::TensorHook hook_;
  engine::KernelOptions kernel_;
  std::shared_ptr<SparePool<Scratch>> scratch_pool_ = std::make_shared<SparePool<Scratch>>();
};

}  // namespace kc
