// kerncheck trace: how far a precision variant moves every named intermediate tensor of the engine from
// the f32 reference on one prompt (the seed's per-layer figures: first-layer attention error vs final
// logits error for each P precision). docs/lab.md.
//
// The prompt is tokenized with the model's tokenizer and run twice: first the reference (default the f32
// engine; prefill, then decode_steps greedy steps: each feeds the reference's own argmax), then the
// variant on exactly the same tokens (on the same loaded model, whose weights the reference may have
// rounded to bf16; a fresh load when the variant has no bf16 base but the reference has). Per layer and
// traced tensor the relative error ‖a − b‖₂ / ‖b‖₂ (a = variant, b = reference, sums in f64) is reported for
// the whole prefill and for each decode step; for the logits of the last prefill position and of each decode
// step, the relative error and KL(reference ‖ variant) over the full vocabulary.
//
// Tensors whose name contains "state" (the hybrid's "gdn.state") are compared as they stand at the end of
// each phase (the last event of the phase); every other tensor as the rows of all positions of the phase.
// Memory: the traced tensors of both runs ([prompt, cols] per tensor and layer) — hence the prompt cap.
//
// Example:
//   kc::TraceOptions o;  o.model = "SmolLM2.gguf";  o.prompt_file = "p.txt";  o.variant = "bf16+p=fp8";
//   kc::TraceResult r = kc::run_trace(o);
//   std::fputs(kc::trace_text(r).c_str(), stdout);
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kc {

struct TraceOptions {
  std::string model, tokenizer;   // tokenizer: default the model's (see record_model.h tokenizer_source)
  std::string prompt_file;        // UTF-8 text
  std::string variant;            // model/variant.h syntax
  std::string reference = "f32";  // what the variant is compared with (the seed: "bf16", i.e. P kept f32)
  int decode_steps = 4;
  // > 0: the prompt's last decode_last tokens are decoded one at a time (teacher-forced, as a corpus
  // segment's decode_last positions) instead of decode_steps greedy steps; the prefill is the rest.
  int decode_last = 0;
  std::vector<std::string> tensors;  // hook names; empty = attn.out, mlp.out, hidden (+ gdn.state if any)
  std::size_t max_tokens = 1024;     // longer prompts are refused
  int prefill_block = 0;             // 0: one prefill call; N: calls of N tokens (the variant's run)
  // The reference's prefill calls: -1 = as prefill_block. With the same variant on both sides this
  // measures what feeding the prompt in pieces alone does (e.g. gdn=fla, one call vs 512-token pieces).
  int reference_prefill_block = -1;
  std::string dump;  // optional .safetensors with every captured tensor of both runs
};

struct TensorTrace {
  std::string name;
  int layer = -1;
  double prefill = 0;          // relative error over the prefill
  std::vector<double> decode;  // per decode step
  double decode_mean() const;
};

struct LogitsTrace {
  double rel_err = 0;  // ‖a − b‖₂ / ‖b‖₂ over the vocabulary
  double kl = 0;       // KL(P_ref ‖ P_variant), full vocabulary, nats
};

struct TraceResult {
  std::string model, variant, reference;  // variant, reference: canonical
  std::vector<std::int32_t> prompt;       // token ids of the prefill
  // Fed in the decode steps: the reference's greedy tokens, or (teacher_forced) the prompt's last
  // decode_last tokens.
  std::vector<std::int32_t> decoded;
  bool teacher_forced = false;
  std::vector<TensorTrace> tensors;  // by layer, then in the requested order
  LogitsTrace prefill_logits;        // last prefill position
  std::vector<LogitsTrace> decode_logits;
  int prefill_block = 0, reference_prefill_block = 0;  // 0: one call
};

// ‖a − b‖₂ / ‖b‖₂ with sums in f64 (0 when both are zero, +inf when only b is): trace's and locate's error.
double relative_l2_error(std::span<const float> a, std::span<const float> b);

TraceResult run_trace(const TraceOptions& o);
std::string trace_text(const TraceResult& r);
std::string trace_json(const TraceResult& r);  // JSON document (docs/lab.md)

}  // namespace kc
