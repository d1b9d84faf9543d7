// What an inference engine reported about the prompt of each request, position by position, before it is
// matched to a golden (src/golden/importers.h does that). Readers: read_vllm_logprobs (vLLM
// prompt_logprobs), read_sglang_logprobs (SGLang /generate meta_info.input_*). docs/importers.md has the
// accepted JSON shapes.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace kc {

// One request's prompt. Row i is the distribution that predicted tokens[i] from the tokens before it;
// engines report none for a prompt's first token, so has_row[0] is 0.
struct EngineSequence {
  std::string where;                  // "choices[0]" / "[3]": names the request in messages
  std::int64_t first_token = 0;       // index in the prompt of tokens[0] (SGLang logprob_start_len)
  bool tokens_known = true;           // false: the dump has no prompt ids (tokens[i] = -1)
  std::vector<std::int32_t> tokens;   // prompt ids from first_token on
  std::vector<std::uint8_t> has_row;  // per token: 1 when the engine reported a distribution
  // Reported (id, log-prob) pairs of row i: [row_begin[i], row_begin[i+1]). Own top-K', the prompt
  // token, and ids asked for by name; first occurrence wins. Log-probs may be non-finite (the engine's).
  std::vector<std::uint64_t> row_begin{0};
  std::vector<std::int32_t> ids;
  std::vector<float> log_probs;
  // Per row: every id not listed has log p ≤ bound. 0 when the engine gave no top-K' (no information);
  // −inf when it listed the whole vocabulary.
  std::vector<float> bound;

  std::size_t size() const { return tokens.size(); }
  std::size_t row_size(std::size_t i) const { return row_begin[i + 1] - row_begin[i]; }
  // Log-prob of `id` in row i if the engine listed it.
  bool find(std::size_t i, std::int32_t id, float& log_prob) const {
    for (auto j = row_begin[i]; j < row_begin[i + 1]; ++j)
      if (ids[j] == id) return log_prob = log_probs[j], true;
    return false;
  }
  // Appends one row (the caller has de-duplicated ids).
  void push_row(std::int32_t token, bool present, const std::vector<std::pair<std::int32_t, float>>& entries,
                float row_bound) {
    tokens.push_back(token);
    has_row.push_back(present ? 1 : 0);
    for (auto& [id, lp] : entries) ids.push_back(id), log_probs.push_back(lp);
    row_begin.push_back(ids.size());
    bound.push_back(row_bound);
  }
};

struct EngineDump {
  std::string engine;  // "vllm", "sglang"
  std::string path;
  std::vector<EngineSequence> sequences;  // in file order
};

EngineDump read_vllm_logprobs(const std::string& path);
EngineDump read_sglang_logprobs(const std::string& path);
// The same over bytes in memory (fuzzing); `name` is the file name used in messages and for the
// JSON Lines decision (suffix .jsonl / .ndjson).
EngineDump parse_vllm_logprobs(std::span<const std::uint8_t> bytes, const std::string& name);
// Which of a /generate response's log-prob lists to read: the prompt's (meta_info.input_*: one row per
// prompt token, what `import sglang` reads) or the generated tokens' (meta_info.output_*: one row per
// generated token; `record --server --api sglang` decode steps). Same triples, same merging.
enum class SglangSide { input, output };
EngineDump parse_sglang_logprobs(std::span<const std::uint8_t> bytes, const std::string& name,
                                 SglangSide side = SglangSide::input);

}  // namespace kc
