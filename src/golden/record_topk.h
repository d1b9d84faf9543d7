// Golden and candidate files from per-position top-k rows computed elsewhere (kerncheck.torch computes
// them on the model's device, so that only k values per position reach the host). The files are the
// ones `kerncheck record --model` writes: same tensors, segments, phases, depths and the segments' first
// tokens (so `record --model --golden` can score any engine against a golden recorded from PyTorch).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "golden/corpus.h"
#include "golden/golden.h"

namespace kc {

// The metadata key record --model adds to a golden: JSON list of each segment's first token.
inline constexpr const char* kCorpusFirstTokensKey = "kerncheck.corpus_first_tokens";

// The golden's segments' first tokens (kCorpusFirstTokensKey, one per segment), checked.
std::vector<std::int32_t> corpus_first_tokens(const Golden& g);

// Reference rows for every scored position of a corpus, in corpus order (segment by segment, position i
// of a segment predicting t_{i+1}): N = corpus.positions().
struct TopkGoldenRows {
  int k = 20;
  std::span<const std::int32_t> top_ids;    // N·k, any order within a row (sorted here)
  std::span<const float> top_logprobs;      // N·k, log-softmax over the full vocabulary
  std::span<const float> other_logprob;     // N, log of the tail mass outside the row's top-k
  std::span<const float> token_logprob;     // N, log-prob of the corpus token
  std::span<const std::uint8_t> flags;      // N, PositionFlag bits (must be clean: no NaN/+inf)
};

// Checks the rows (sizes, ids in [0, vocab) and distinct, finite values, clean flags), sorts each row
// (log-prob descending, ties by lower id, as record_logits does) and writes the golden atomically.
// Returns the checksum.
std::string write_golden_from_topk(const std::string& out, const Corpus& corpus, const TopkGoldenRows& rows,
                                   std::int64_t vocab, const std::string& model_identity,
                                   const Provenance& made_by);

// One segment of a golden recorded over a corpus: the tokens to feed (depth + 1: t_0 … t_depth) and
// where its rows go.
struct GoldenWindow {
  std::int64_t start = 0, depth = 0, n_prefill = 0;
  std::vector<std::int32_t> tokens;
};
// From a golden written by record --model or write_golden_from_topk (needs the first-tokens metadata).
std::vector<GoldenWindow> golden_windows(const Golden& g);

// Candidate rows for golden positions [begin, begin + N).
struct TopkCandidateRows {
  std::span<const float> logprobs_at_ref;  // N·k, at the golden's top_ids
  std::span<const float> other_logprob;    // N, log of the mass outside the golden's top-k
  std::span<const std::int32_t> top1_id;   // N
  std::span<const float> top1_logprob;     // N
  std::span<const float> token_logprob;    // N
  std::span<const std::uint8_t> flags;     // N; broken rows get NaN values, as record_logits does
};
std::string write_candidate_from_topk(const std::string& out, const Golden& g, const TopkCandidateRows& rows,
                                      const Provenance& made_by);

}  // namespace kc
