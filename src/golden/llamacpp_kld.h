// Reader of llama.cpp's KL-divergence base file (`llama-perplexity --kl-divergence-base FILE`), checked
// against tools/perplexity/perplexity.cpp (perplexity(), process_logits(), log_softmax(…, uint16_t*, …)):
//
//   "_logits_" (8 B) | n_ctx u32 | n_vocab i32 | n_chunk i32 | tokens i32[n_ctx·n_chunk]
//   then per chunk, (n_ctx − 1 − n_ctx/2) records of nv = 2·((n_vocab+1)/2) + 4 uint16:
//     f32 scale, f32 min_log_prob, uint16 q[n_vocab] (+1 pad when n_vocab is odd)
//
// Record i of chunk c is the logits row at chunk position first + i (first = n_ctx/2), i.e. the
// distribution after the tokens [c·n_ctx, c·n_ctx + first + i] that predicts token c·n_ctx + first + i + 1.
// (llama.cpp feeds BOS instead of the chunk's first token when the vocabulary adds BOS; the file stores
// the original tokens.) Quantisation: min_logit = max(min logit, max logit − 16),
// scale = (max logit − min_logit)/65535, q = round((logit − min_logit)/scale) for logit > min_logit else 0,
// min_log_prob = min_logit − max logit − log Σ exp(logit − max logit). So log p = scale·q + min_log_prob,
// within scale/2 ≤ 1.3e-4; where the clamp bit (range of 16 nats) a q of 0 only says log p ≤ min_log_prob.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace kc {

class LlamaKldFile {
 public:
  // Maps and validates the whole file: magic, header ranges, exact size (an interrupted run leaves a
  // short file: refused, naming the chunk count it holds), every token in [0, n_vocab).
  // Record contents (scale, min_log_prob) are checked when read.
  static LlamaKldFile open(const std::string& path);
  // The same over bytes the caller keeps alive (fuzzing); `name` is used in messages.
  static LlamaKldFile parse(std::span<const std::uint8_t> bytes, const std::string& name,
                            std::shared_ptr<const void> owner = nullptr);

  const std::string& path() const { return path_; }
  std::uint32_t n_ctx() const { return n_ctx_; }
  std::int32_t n_vocab() const { return n_vocab_; }
  std::int32_t n_chunk() const { return n_chunk_; }
  std::size_t first() const { return n_ctx_ / 2; }  // chunk position of record 0
  std::size_t scored_per_chunk() const { return n_ctx_ - 1 - n_ctx_ / 2; }
  std::size_t n_records() const { return scored_per_chunk() * static_cast<std::size_t>(n_chunk_); }
  std::size_t record_u16() const { return 2 * ((static_cast<std::size_t>(n_vocab_) + 1) / 2) + 4; }
  std::span<const std::int32_t> tokens() const { return tokens_; }  // n_ctx·n_chunk, as stored

  // One dequantised row.
  struct Row {
    float scale = 0, min_log_prob = 0;
    bool clamped = false;             // the 16-nat clamp bit: q == 0 means "≤ min_log_prob"
    const std::uint8_t* q = nullptr;  // n_vocab little-endian uint16 (unaligned access via memcpy)
    std::int32_t n_vocab = 0;
    std::uint16_t code(std::int32_t id) const;
    float log_prob(std::int32_t id) const { return scale * static_cast<float>(code(id)) + min_log_prob; }
    // false only for an id whose log-prob is just bounded above (clamped row, q == 0)
    bool exact(std::int32_t id) const { return !clamped || code(id) != 0; }
  };
  // Record r (0 ≤ r < n_records()). Throws kc::Error naming the file and record for a non-finite or
  // out-of-range scale / min_log_prob.
  Row row(std::size_t r) const;

  // The k ids with the largest codes (ties: smaller id first), best first. k ≤ n_vocab.
  static void top_k(const Row& row, int k, std::vector<std::int32_t>& ids);

 private:
  std::string path_;
  std::span<const std::uint8_t> bytes_;
  std::shared_ptr<const void> owner_;
  std::uint32_t n_ctx_ = 0;
  std::int32_t n_vocab_ = 0, n_chunk_ = 0;
  std::vector<std::int32_t> tokens_;
  std::size_t records_offset_ = 0;
};

// The size llama.cpp's base file has for n_chunk chunks of n_ctx tokens (bench/golden_size.py).
std::uint64_t llamacpp_kld_file_bytes(std::uint64_t n_ctx, std::uint64_t n_vocab, std::uint64_t n_chunk);

}  // namespace kc
