// Golden and candidate files recorded with kerncheck's f32 engine (any CausalLM) over a corpus
// (docs/corpus.md). Per segment: one prefill of the first depth − decode_last tokens (those positions are
// phase prefill; with prefill_block = N fed in calls of N tokens), then the last decode_last tokens decoded
// one at a time through the KV cache (phase decode); each row goes through record_logits' top-k /
// log-softmax code. Segments run in batches: their decode steps go through CausalLM::decode_batch together
// (one GEMM row per segment), which gives every row the bits of a batch of one, so the file is the same
// for any batch size. The engine runs the precision variant `variant` (model/variant.h, docs/lab.md; empty =
// the f32 reference); its canonical form goes into the file's `variant` metadata.
//
// Resumable: finished segments are checkpointed under OUT.partial/ (one file per segment, written
// atomically, plus a manifest naming the command line, model, corpus/golden); a rerun with the same
// inputs reuses them and the final file is byte-for-byte what an uninterrupted run writes.
// KC_RECORD_STOP_AFTER=N stops after N segments computed in this run (exit 3, "interrupted": tests).
// A golden recorded with a variant other than the reference is allowed; its metadata says so
// (kerncheck.golden_reference) and a note goes to stderr.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "golden/golden.h"
#include "io/safetensors.h"

namespace kc {

// Segments decoded together by default, and the most positions a batch may hold (their KV caches live at
// once: SmolLM2 keeps 46 KB per position, so 16 384 positions are ~750 MB).
inline constexpr int kDefaultBatchSegments = 32;
inline constexpr std::int64_t kBatchPositions = 16384;

struct RecordModelOptions {
  std::string model, tokenizer;   // tokenizer: default the model's (GGUF metadata, folder/tokenizer.json)
  std::string corpus, golden;     // golden mode: corpus; candidate mode: golden
  std::string out, command_line;
  std::string variant;             // model/variant.h syntax; "" or "f32" = the reference
  int k = 20;
  int prefill_block = 0;           // 0: one prefill call per segment; N: calls of N tokens (metadata
                                   // kerncheck.prefill_block; a hybrid stores its state between blocks)
  int batch = 0;                   // segments decoded together (0: kDefaultBatchSegments within
                                   // kBatchPositions; 1: one at a time); the file does not depend on it
  bool allow_other_model = false;  // candidate mode: accept a model whose identity differs from the golden's
  std::string logits_out;          // candidate mode: also write every position's full logits, f32 [N, vocab]
                                   // .npy in golden order (true full-vocabulary KL, bench/zoo.py); no reuse
                                   // of checkpoints then
};

// The per-segment checkpoint folder OUT.partial/ of one recording (`record --model`, `record --server`).
// OUT.partial/lock is locked (flock) while the object lives, so a second recording onto the same OUT is
// refused (exit 3) instead of mixing its segments with this one's. The folder is kept when its
// manifest.json holds `key` (the same run on the same inputs), else emptied and stamped with it, so a
// rerun resumes only its own run.
class CheckpointFolder {
 public:
  CheckpointFolder(const std::string& out, const std::string& key);
  ~CheckpointFolder();  // releases the lock, keeps the folder (a rerun resumes from it)
  CheckpointFolder(const CheckpointFolder&) = delete;
  CheckpointFolder& operator=(const CheckpointFolder&) = delete;
  const std::string& dir() const { return dir_; }
  void finish();  // the output is written: the folder and its lock go

 private:
  std::string dir_;
  int lock_fd_ = -1;
};

// The segment files of a CheckpointFolder (docs/golden-format.md "Record checkpoints"):
// OUT.partial/seg-NNNNN.safetensors, sealed, with the run's key and the segment number in the metadata.
class Checkpoints {
 public:
  // redo: what happens to a discarded segment, for the note ("recomputed", "requested again").
  Checkpoints(const std::string& out, const std::string& key, const char* redo = "recomputed");
  std::string file(std::int32_t i) const;
  // Segment i's checkpoint when it is intact (sealed: every byte checked) and belongs to this run and
  // segment; a damaged or foreign one is deleted, with a note, and the segment recomputed.
  std::optional<SafetensorsFile> open(std::int32_t i) const;
  void discard(std::int32_t i, const std::string& why) const;
  void write(std::int32_t i, const std::vector<NamedTensor>& tensors) const;
  void finish() { folder_.finish(); }

 private:
  CheckpointFolder folder_;
  std::string key_;
  const char* redo_;
};

// "model-xxh3:<hex>" over the model file (GGUF) or the checkpoint's config.json and *.safetensors.
std::string model_identity(const std::string& path);

// Where a model's tokenizer comes from: `tokenizer` if given, else the GGUF itself (its metadata) or the
// checkpoint folder (its tokenizer.json). Throws kc::Error naming the model when there is none.
std::string tokenizer_source(const std::string& model, const std::string& tokenizer = "");

// True when the model will be read as a GGUF file (magic "GGUF"), false for an HF folder.
bool is_gguf_model(const std::string& path);

// Checkpoints (docs/golden-format.md "Record checkpoints"): throws kc::Error unless `f` is sealed (its
// checksum is verified unless a fuzzer turns it off) and is segment `segment` of the run `key`.
void check_checkpoint(const SafetensorsFile& f, const std::string& key, std::int32_t segment,
                      bool verify_checksum = true);
// The rows of a checked checkpoint of n positions; false when its tensors are not those of n rows of k.
bool golden_checkpoint_rows(const SafetensorsFile& f, std::size_t n, std::size_t k, GoldenBuffers& g);
bool candidate_checkpoint_rows(const SafetensorsFile& f, std::size_t n, std::size_t k, CandidateBuffers& c);

// One segment of a golden recorded with `record --model`, as the engine replays it under teacher forcing:
// window[0 … depth] (the corpus' first token, then every scored position's token), of which the first
// n_prefill go through one prefill and the rest are decoded one at a time; its rows are golden positions
// start … start + depth − 1. Throws kc::Error naming the golden for segments, depths or phases that are not
// those of such a golden, and for first tokens outside [0, vocab).
struct SegmentReplay {
  std::vector<std::int32_t> window;  // depth + 1 tokens
  std::int64_t n_prefill = 0, depth = 0, start = 0;
  std::int32_t index = 0;
};
std::vector<SegmentReplay> golden_replays(const Golden& g, std::int64_t vocab);

// Refuses (kc::Error naming the golden) a model whose tokenizer differs from the golden's, or whose
// identity (model_identity) differs unless allow_other_model.
void check_golden_model(const Golden& g, const std::string& model, const std::string& model_id,
                        const std::string& tokenizer_id, bool allow_other_model);

void record_golden_with_model(const RecordModelOptions& o);
void record_candidate_with_model(const RecordModelOptions& o);

}  // namespace kc
