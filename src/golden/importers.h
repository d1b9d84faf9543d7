// Importers: turn what inference engines report into kerncheck candidates (and llama.cpp's KLD base file
// into a golden), so `kerncheck test` can judge vLLM, SGLang and llama.cpp runs. docs/importers.md.
//
// Alignment. Golden segment s is request s of the engine dump (file order), and golden position n
// (segment s, depth d, corpus token t) is the engine's distribution over prompt token d of that request
// (the one computed from prompt tokens [0, d)). The prompt token there must be t: the first mismatch is
// refused, naming the position. Engines that report only their own top-K' leave some of the golden's
// top-k ids uncovered: those get covered = 0 and, as their log-prob, the engine's bound for unlisted ids
// (the smallest log-prob of its top-K'), so the judge reports KL as [lower, upper] with a coverage rate.
#pragma once
#include <cstdint>
#include <string>

#include "golden/engine_logprobs.h"
#include "golden/golden.h"
#include "golden/llamacpp_kld.h"

namespace kc {

struct ImportStats {
  std::int64_t positions = 0;
  std::int64_t ids = 0, ids_covered = 0;  // golden top-k ids seen / reported by the engine
  std::int64_t positions_fully_covered = 0;
  std::int64_t token_unknown = 0;  // positions without the corpus token's log-prob
  std::int64_t non_finite = 0;     // positions with a non-finite reported log-prob
  std::int64_t min_reported = -1;  // fewest ids listed at one position
  double coverage() const { return ids ? static_cast<double>(ids_covered) / static_cast<double>(ids) : 1.0; }
};

// vLLM / SGLang dump → candidate rows for every golden position. Throws kc::Error (exit 3) on a segment
// count mismatch, a missing row, a token mismatch (first differing position), or rows without any top-K'.
CandidateBuffers candidate_from_engine(const Golden& golden, const EngineDump& dump,
                                       ImportStats* stats = nullptr);

// llama.cpp KLD file of the candidate model → candidate rows (full vocabulary: all ids covered except
// those the 16-nat clamp erased). Chunk s ↔ segment s; depth d ↔ record d − n_ctx/2 − 1.
CandidateBuffers candidate_from_llamacpp(const Golden& golden, const LlamaKldFile& file,
                                         ImportStats* stats = nullptr);

// llama.cpp KLD base file → golden with top-k (k ≤ n_vocab). One segment per chunk ("chunk C", `domain`),
// positions n_ctx/2 … n_ctx−2 of each chunk (depth n_ctx/2+1 … n_ctx−1), phase prefill.
void golden_from_llamacpp(const LlamaKldFile& file, int k, const std::string& domain, GoldenMeta& meta,
                          GoldenBuffers& out);

// Log of the tail mass of a llama.cpp row outside `exclude` (sorted ids): the direct sum over the tail,
// plus, for ids the 16-nat clamp erased, 1 − Σ(all other ids) kept within [0, n_erased·exp(min_log_prob)].
float llamacpp_tail_logprob(const LlamaKldFile::Row& row, std::span<const std::int32_t> exclude_sorted);

}  // namespace kc
