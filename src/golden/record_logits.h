// Golden and candidate files from full logits [N, V] (.npy or .safetensors; f32, bf16 or f16).
// Per row: log-softmax with f64 accumulation, top-k by a single linear scan (ties by lower id), the tail
// mass summed over the non-top-k ids (directly when it is small, so it keeps full relative precision).
// Rows are processed in parallel in fixed chunks: the output does not depend on the thread count.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "golden/golden.h"
#include "io/tensor.h"

namespace kc {

// A logits matrix as mapped from its file.
struct Logits {
  Tensor t;
  std::int64_t n = 0, vocab = 0;
  // Decodes row i into out[0, vocab).
  void row(std::int64_t i, float* out) const;
};
Logits open_logits(const std::string& path);  // refuses anything but a 2-D f32/bf16/f16 tensor

// Everything about one row of logits the golden and candidate need.
struct RowSummary {
  std::uint8_t flags = 0;
  double lse = NAN;        // log Σ exp(x)
  std::int32_t top1 = -1;  // argmax, lowest id on ties
  float top1_logprob = NAN;
};

// Top-k ids (sorted: log-prob desc, ties by lower id) of a row of finite/−inf logits. k ≤ vocab.
void top_k_ids(const float* x, std::int64_t vocab, int k, std::int32_t* ids);
RowSummary summarize_row(const float* x, std::int64_t vocab);
// log of Σ_{i ∉ ids} exp(x_i − lse), exact (no cancellation when the tail is small).
double tail_logprob(const float* x, std::int64_t vocab, double lse, std::span<const std::int32_t> ids,
                    std::vector<std::uint8_t>& mark_scratch);

// Per-position corpus layout for a golden: which segment, depth and phase each position has.
struct CorpusLayout {
  std::vector<Segment> segments;
  std::vector<std::int32_t> segment, depth;
  std::vector<std::uint8_t> phase;
};
// From a segments JSON file (docs/golden-format.md), or one segment "all" (prose, depth n + 1, prefill)
// when path is empty.
CorpusLayout read_layout(const std::string& path, std::int64_t n);

// Reads token ids: .npy/.safetensors integer vector of N (the next token of each row) or N + 1 entries
// (the whole sequence; then entry i + 1 is row i's next token).
std::vector<std::int32_t> read_next_tokens(const std::string& path, std::int64_t n, std::int64_t vocab);

GoldenBuffers record_golden(const Logits& logits, std::span<const std::int32_t> next_tokens,
                            const CorpusLayout& layout, int k);
// Candidate for positions [begin, end) of `golden` from logits whose row 0 is golden position `begin`.
CandidateBuffers record_candidate(const Logits& logits, const Golden& golden, std::int64_t begin,
                                  std::int64_t end);

}  // namespace kc
