// Golden and candidate files recorded with kerncheck's f32 Llama-family engine over a corpus
// (docs/corpus.md). Per segment: one prefill of the first depth − decode_last tokens (those positions are
// phase prefill), then the last decode_last tokens decoded one at a time through the KV cache (phase
// decode); each row goes through record_logits' top-k / log-softmax code.
//
// Resumable: finished segments are checkpointed under OUT.partial/ (one file per segment, written
// atomically, plus a manifest naming the command line, model, corpus/golden); a rerun with the same
// inputs reuses them and the final file is byte-for-byte what an uninterrupted run writes.
// KC_RECORD_STOP_AFTER=N stops after N segments computed in this run (exit 3, "interrupted": tests).
#pragma once
#include <string>

namespace kc {

struct RecordModelOptions {
  std::string model, tokenizer;   // tokenizer: default the model's (GGUF metadata, folder/tokenizer.json)
  std::string corpus, golden;     // golden mode: corpus; candidate mode: golden
  std::string out, variant, command_line;
  int k = 20;
  bool allow_other_model = false;  // candidate mode: accept a model whose identity differs from the golden's
};

// "model-xxh3:<hex>" over the model file (GGUF) or the checkpoint's config.json and *.safetensors.
std::string model_identity(const std::string& path);

void record_golden_with_model(const RecordModelOptions& o);
void record_candidate_with_model(const RecordModelOptions& o);

}  // namespace kc
