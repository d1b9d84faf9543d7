// The one interface every reference-engine model implements (Llama family in llama.h, the Gated DeltaNet
// hybrids in hybrid.h), so that recording, tracing, sweeps and generation work on any of them.
//
// A model is read-only during inference; the per-sequence state (KV cache, recurrent and conv states,
// position) lives in a SequenceState the caller owns, so one loaded model serves many sequences.
//
// Example:
//   std::unique_ptr<kc::CausalLM> m = kc::load_causal_lm("model.gguf");   // or an HF folder
//   auto st = m->new_state();
//   m->prefill(*st, prompt, [&](std::size_t pos0, std::size_t rows, std::span<const float> lg) { … });
//   std::vector<float> next = m->decode(*st, token);                      // [V]
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/backend.h"
#include "ops/engine_ops.h"

namespace kc {

// Receives logits rows as prefill produces them: logits [rows, V] for positions pos0 … pos0+rows-1.
// An empty sink means no logits are wanted: a model may then skip its LM head (LlamaModel does).
using LogitsSink = std::function<void(std::size_t pos0, std::size_t rows, std::span<const float> logits)>;

class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual std::size_t position() const = 0;  // tokens consumed so far
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual std::string architecture() const = 0;  // "llama", "qwen2", "qwen3", "qwen3_5", "qwen3_next"
  virtual std::size_t vocab_size() const = 0;
  virtual std::size_t n_layers() const = 0;

  virtual std::unique_ptr<SequenceState> new_state() const = 0;
  // Tokens enter at state.position(). One call may be cut into internal chunks; logits go to the sink
  // chunk by chunk, so a long prompt never holds [T, V]. Calling prefill again continues the sequence
  // (a hybrid then starts from its stored state: "prefill in blocks").
  virtual void prefill(SequenceState& st, std::span<const std::int32_t> tokens, const LogitsSink& sink) const = 0;
  // One token at state.position(): logits [V].
  virtual std::vector<float> decode(SequenceState& st, std::int32_t token) const = 0;
  // One token for each of B distinct sequences: logits [B, V], row b bitwise decode(*states[b], tokens[b]) —
  // no row's arithmetic depends on the other rows. A model that can run them as one forward (GEMMs of B rows)
  // overrides this; the default decodes them one after another.
  virtual std::vector<float> decode_batch(std::span<SequenceState* const> states,
                                          std::span<const std::int32_t> tokens) const {
    std::vector<float> out;
    for (std::size_t b = 0; b < states.size(); ++b) {
      const std::vector<float> row = decode(*states[b], tokens[b]);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }

  // Named intermediate tensors go to this hook (nullptr: none); see engine::TensorEvent and docs/engine.md.
  virtual void set_hook(engine::TensorHook hook) = 0;
  // Every weight tensor by its HF name, mutable: the lab's production-like base rounds them in place.
  virtual void for_each_weight(const std::function<void(const std::string& name, std::span<float> w)>& fn) = 0;
  // Kernel choices of equal precision (engine::KernelOptions).
  virtual void set_kernel_options(const engine::KernelOptions& o) = 0;
  // Where the ops run (model/backend.h): chosen once per engine instance, before the first forward pass;
  // the default is the host.
  void set_backend(const EngineBackend& b) { ops_ = &b; }
  const EngineBackend& backend() const { return *ops_; }

 protected:
  const EngineBackend* ops_ = &host_backend();
};

struct LoadOptions {
  // GGUF only: keep the file's Q/K row order and rotate adjacent pairs (as llama.cpp does) instead of
  // undoing the permutation and rotating halves (as transformers does). Same math, different rounding.
  bool gguf_adjacent_pairs = false;
};

// A .gguf file or an HF checkpoint folder (config.json + model.safetensors[.index.json]), dispatched on
// the architecture. Throws kc::Error naming the file and field for anything unsupported or malformed.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& path, const LoadOptions& opt = {});

}  // namespace kc
