// kerncheck's f32 reference engine for the Llama family: Llama / SmolLM2, Qwen2 (q/k/v bias), Qwen3 (q/k
// RMSNorm, explicit head_dim). Weights come from a GGUF file (dequantized to f32) or an HF checkpoint
// (config.json + safetensors), all held in f32; every op runs in f32 (src/ops/engine_ops.h). Decode (one
// token) reads a GGUF's Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 matrices from the mapped file and dequantizes them in
// registers to the same f32 values (LlamaQuantWeights): 5-6× fewer bytes per token, same weights.
//
// The forward pass is one short function per block (attention_block, mlp_block, layer, forward) over
// explicit structs: LlamaWeights (read-only) and LlamaState (the KV cache). Named intermediate tensors
// are reported to an optional hook (docs/engine.md lists them), which may also change them in place.
//
// Example:
//   auto model = kc::LlamaModel::load("SmolLM2-135M-Instruct.Q4_1.gguf");
//   kc::LlamaState state(model.config());
//   std::vector<float> logits = model.prefill(state, tokens);  // [T, V]
//   std::vector<float> next = model.decode(state, 42);          // [V], position T
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "model/dequant.h"
#include "model/spare_pool.h"
#include "ops/engine_ops.h"
#include "ops/packed_gemm.h"

namespace kc {

enum class LlamaArch { llama, qwen2, qwen3 };
const char* llama_arch_name(LlamaArch a);

// How RoPE pairs the dims of a head: rotate-half (HF: i with i + hd/2) or adjacent pairs (llama.cpp NORM:
// 2i with 2i+1, which GGUF files' Q/K row permutation is made for).
enum class RopeStyle { rotate_half, adjacent_pairs };

struct LlamaConfig {
  LlamaArch arch = LlamaArch::llama;
  std::size_t n_vocab = 0, d_model = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, d_ff = 0;
  std::size_t n_ctx_train = 0;  // max_position_embeddings / context_length (informational)
  float rms_eps = 1e-6f;
  engine::RopeParams rope;
  RopeStyle rope_style = RopeStyle::rotate_half;
  bool qkv_bias = false;         // Qwen2
  bool qk_norm = false;          // Qwen3
  bool tied_embeddings = false;  // lm_head = token embedding
};

// Matrices are held once, in the packed GEMM's panel order (engine::PackedMatrix: prefill's GEMM and the
// f32 decode GEMV read them without re-packing); unpack() gives the HF row-major [out, in] values.
struct LlamaLayerWeights {
  std::vector<float> attn_norm;       // [D]
  engine::PackedMatrix wq;            // [nH·hd, D]
  engine::PackedMatrix wk;            // [nKV·hd, D]
  engine::PackedMatrix wv;            // [nKV·hd, D]
  std::vector<float> bq, bk, bv;      // [nH·hd], [nKV·hd], [nKV·hd]   (Qwen2; else empty)
  std::vector<float> q_norm, k_norm;  // [hd], [hd]                      (Qwen3; else empty)
  engine::PackedMatrix wo;            // [D, nH·hd]
  std::vector<float> mlp_norm;        // [D]
  engine::PackedMatrix w_gate, w_up;  // [F, D]
  engine::PackedMatrix w_down;        // [D, F]
};

struct LlamaWeights {
  std::vector<float> embed;  // [V, D] row-major; empty when tied (lm_head holds the embedding)
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> final_norm;  // [D]
  engine::PackedMatrix lm_head;   // [V, D]: lm_head.weight, or the token embedding when tied
  // Row t of the token embedding (D floats), from embed or, when tied, the packed lm_head.
  void embed_row(std::size_t t, float* out) const;
  std::vector<float> embed_f32() const;  // the token embedding [V, D] row-major
};

// Decode's view of a GGUF's quantized matrices, read in place from the mapped file (no copy): a matrix whose
// type quant_gemv supports (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) has data != nullptr, any other keeps the f32 path.
// Rows are the file's: q_rows / k_rows map HF row r to the GGUF row holding it (the loader's unpermute;
// empty when the file's order is kept). Its dequantized values equal the f32 weights bit for bit.
struct LlamaQuantLayer {
  QuantMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};
struct LlamaQuantWeights {
  std::shared_ptr<const void> file;  // keeps the mapping alive
  std::vector<LlamaQuantLayer> layers;
  QuantMatrix lm_head;  // output.weight, or token_embd.weight when tied
  std::vector<std::uint32_t> q_rows, k_rows;
};

// Named f32 weights of a checkpoint, addressed by HF names ("model.layers.3.self_attn.q_proj.weight") with
// HF shapes ([out, in] for matrices). A GGUF source translates names, reverses its dims and undoes the Q/K
// row permutation (unless asked for adjacent-pair RoPE).
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const std::string& path() const = 0;
  // `name` quoted as the file spells it, for messages: "'blk.1.ffn_up.weight'
  // (model.layers.1.mlp.up_proj.weight)".
  virtual std::string display_name(const std::string& name) const { return "'" + name + "'"; }
  virtual std::optional<std::vector<std::int64_t>> shape(const std::string& name) const = 0;
  virtual void read_f32(const std::string& name, std::span<float> out) const = 0;  // out.size() == numel
};

using LlamaLoadOptions = LoadOptions;

// The KV cache and position of one sequence. Grows on demand (whole chunks of kCacheGrow positions).
struct LlamaState : SequenceState {
  explicit LlamaState(const LlamaConfig& c);
  std::size_t position() const override { return pos; }
  std::size_t pos = 0;                // tokens already in the cache
  std::size_t capacity = 0;           // positions allocated per layer
  std::vector<std::vector<float>> k;  // [n_layers][capacity, nKV·hd] (after k-norm and RoPE)
  std::vector<std::vector<float>> v;  // [n_layers][capacity, nKV·hd]
  std::size_t row_width = 0;          // nKV·hd
  void reserve(std::size_t n_pos);
};

class LlamaModel : public CausalLM {
 public:
  // A .gguf file or an HF checkpoint folder (config.json + model.safetensors[.index.json]). Throws
  // kc::Error naming the file and field for unsupported architectures and missing or mis-shaped tensors.
  static LlamaModel load(const std::string& path, const LlamaLoadOptions& opt = {});
  // From a parsed config and a weight source (what load() does after reading the metadata).
  static LlamaModel from_source(const LlamaConfig& config, const WeightSource& src);

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  // The quantized decode path (GGUF files with supported types), or nullptr: HF checkpoints, and every
  // model after for_each_weight (the lab may have changed the f32 weights, so the file no longer holds them).
  const LlamaQuantWeights* quantized() const { return quant_.get(); }

  // Tokens enter at state.pos; the prompt runs in chunks of kPrefillChunk tokens through the KV cache, so
  // memory stays bounded at any length. Returns logits [T, V] (the sink overload hands them out per chunk
  // instead: a long prompt then never holds [T, V]; an empty sink skips the LM head).
  std::vector<float> prefill(LlamaState& state, std::span<const std::int32_t> tokens) const;
  void prefill(LlamaState& state, std::span<const std::int32_t> tokens, const LogitsSink& sink) const;
  // One token at state.pos: logits [V] (GEMV path).
  std::vector<float> decode(LlamaState& state, std::int32_t token) const;
  // One token for each of B distinct sequences, in one forward (GEMMs of B rows, attention per sequence):
  // logits [B, V], row b bitwise what decode(*states[b], tokens[b]) returns.
  std::vector<float> decode_batch(std::span<LlamaState* const> states, std::span<const std::int32_t> tokens) const;

  // CausalLM
  std::string architecture() const override { return llama_arch_name(config_.arch); }
  std::size_t vocab_size() const override { return config_.n_vocab; }
  std::size_t n_layers() const override { return config_.n_layers; }
  std::unique_ptr<SequenceState> new_state() const override { return std::make_unique<LlamaState>(config_); }
  void prefill(SequenceState& st, std::span<const std::int32_t> tokens,
               const LogitsSink& sink) const override {
    prefill(static_cast<LlamaState&>(st), tokens, sink);
  }
  std::vector<float> decode(SequenceState& st, std::int32_t token) const override {
    return decode(static_cast<LlamaState&>(st), token);
  }
  std::vector<float> decode_batch(std::span<SequenceState* const> states,
                                  std::span<const std::int32_t> tokens) const override;
  void set_hook(engine::TensorHook hook) override { hook_ = std::move(hook); }
  void for_each_weight(const std::function<void(const std::string&, std::span<float>)>& fn) override;
  void set_kernel_options(const engine::KernelOptions& o) override { kernel_ = o; }

  static constexpr std::size_t kPrefillChunk = 512;

 private:
  struct Scratch;
  void forward(std::span<const std::int32_t> tokens, Scratch& s, bool logits) const;
  void attention_block(std::size_t il, std::size_t T, Scratch& s) const;
  void mlp_block(std::size_t il, std::size_t T, Scratch& s) const;
  void layer(std::size_t il, std::size_t T, Scratch& s) const;
  void check_tokens(std::span<const std::int32_t> tokens) const;
  // y [T, n] = x [T, k] · wᵀ (+ bias) for each op of the same x (EngineBackend::linear: for one token the
  // file's quantized blocks where the op has them, else the packed f32 GEMM), with the kernel options' GEMM
  // schedule.
  void linear(const float* x, std::size_t T, std::size_t k, std::span<const LinearOp> ops) const;
  // engine::rmsnorm with the model's eps and the kernel options' order and norm bugs.
  void norm(const float* x, const float* w, std::size_t rows, std::size_t d, float* y) const;
  void report(std::string_view name, int layer, const Scratch& s, std::size_t cols, float* data) const;

  LlamaConfig config_;
  LlamaWeights weights_;
  std::vector<float> inv_freq_;  // [rot_dim/2]
  std::shared_ptr<const LlamaQuantWeights> quant_;
  // Work buffers kept for the next prefill/decode call (first-touch faults of a fresh 512-token scratch, 100 MB
  // of logits for SmolLM2, cost 5–10% of a prefill); the peak is unchanged, the next call needs them anyway.
  std::shared_ptr<SparePool<Scratch>> scratch_pool_ = std::make_shared<SparePool<Scratch>>();
  engine::TensorHook hook_;
  engine::KernelOptions kernel_;
};

// Config readers (exposed for tests): HF config.json text, GGUF metadata via the file.
LlamaConfig llama_config_from_hf_json(const std::string& json_text, const std::string& path);

}  // namespace kc
