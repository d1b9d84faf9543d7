// Text generation with any reference-engine model (kc::CausalLM): greedy or sampled (temperature, top-p,
// seed), stopping at a stop token (EOS) or after max_tokens; and corpora of the model's own answers
// (docs/generate.md).
//
// Path: the prompt's first n − 1 tokens go through one prefill, its last token and every generated token
// through decode. That is exactly how `record --model` runs an answer segment (prefill depth − decode_last
// positions, decode the rest), so a recorded golden sees bit for bit the logits the generation saw.
//
// Sampling (deterministic on every platform: no std:: distributions):
//   p_i = exp((l_i − max l) / T) / Σ_j exp((l_j − max l) / T)     in double
//   order ids by p descending (ties: lower id first); keep the shortest prefix whose mass reaches top_p
//   (at least one token); draw u = SplitMix64 → top 53 bits / 2^53 ∈ [0, 1), one draw per step; the token
//   is the first in that order whose cumulative mass exceeds u · (kept mass).
// Greedy: the argmax (lowest id on ties); no draw.
//
// Example:
//   auto m = kc::load_causal_lm("SmolLM2-135M-Instruct.Q4_1.gguf");
//   kc::GenerateOptions o;  o.max_tokens = 64;  o.stop_ids = {2};
//   kc::Generation g = kc::generate(*m, prompt_ids, o);   // g.tokens, g.steps[i].margin …
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "golden/corpus.h"
#include "model/causal_lm.h"
#include "model/tokenizer.h"

namespace kc {

// SplitMix64 (Steele, Lea, Flood 2014): the whole generator is written out so a seed gives the same
// stream on any compiler and standard library.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : x_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1) with 53 random bits
 private:
  std::uint64_t x_;
};

struct SamplingOptions {
  bool greedy = true;        // argmax; temperature / top_p / seed unused
  double temperature = 1.0;  // > 0
  double top_p = 1.0;        // (0, 1]
  std::uint64_t seed = 0;
};

// The distribution sampling draws from, over the kept tokens only: ids in draw order and their
// renormalised probabilities (Σ = 1). Exposed for tests.
struct TruncatedDistribution {
  std::vector<std::int32_t> ids;
  std::vector<double> probs;
};
TruncatedDistribution sampling_distribution(std::span<const float> logits, double temperature, double top_p);

// Picks the next token from one logits row (advances rng once unless greedy).
std::int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, SplitMix64& rng);

struct GenerateOptions {
  SamplingOptions sampling;
  std::int64_t max_tokens = 128;       // ≥ 1
  std::vector<std::int32_t> stop_ids;  // generation ends after emitting one of these (it is kept)
  // Only ids < vocab_limit are generated (0: all the model's): a tokenizer with fewer ids than the model
  // has embedding rows (HF pads them) cannot decode the rest. Margins and logprobs are over these ids.
  std::size_t vocab_limit = 0;
};

struct GenerationStep {
  std::int32_t token = 0;
  std::int32_t top1 = 0, top2 = 0;  // by raw logit (lowest id first on ties)
  float margin = 0;                 // logit(top1) − logit(top2), of the raw logits
  double logprob = 0;               // log-softmax of the raw logits (T = 1, no top-p) at `token`
};

struct Generation {
  std::vector<std::int32_t> prompt, tokens;  // tokens: generated, the stop token included
  std::vector<GenerationStep> steps;         // one per generated token
  std::string stop_reason;                   // "stop_token" | "max_tokens"
};

// Validates options (kc::Error naming the flag) and the prompt (non-empty, ids < vocab).
void check_generate_options(const GenerateOptions& o);
// on_step (optional) sees each step as it is made (progress output).
Generation generate(const CausalLM& m, std::span<const std::int32_t> prompt, const GenerateOptions& o,
                    const std::function<void(const GenerationStep&)>& on_step = nullptr);

// Where two greedy generations from the same prompt part: the first index i with a.tokens[i] ≠
// b.tokens[i]; nullopt if they agree over their common length.
std::optional<std::size_t> first_divergence(const Generation& a, const Generation& b);

// Prompt text → ids. With chat, the text is wrapped in SmolLM2-Instruct's ChatML (what its GGUF
// tokenizer.chat_template produces for one user turn with add_generation_prompt):
//   "<|im_start|>system\n{system}<|im_end|>\n" (omitted when system is empty)
//   "<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
// Special tokens in the template are parsed; the user's text is encoded without parsing specials. BOS is
// prepended when the tokenizer says add_bos.
inline constexpr const char* kDefaultSystemPrompt =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
std::vector<std::int32_t> encode_prompt(const Tokenizer& tok, const std::string& text, bool chat,
                                        const std::string& system = kDefaultSystemPrompt);
// The stop ids: the tokenizer's EOS, and with chat <|im_end|> if the vocabulary has it.
std::vector<std::int32_t> default_stop_ids(const Tokenizer& tok, bool chat);

// Prompts file: one prompt per line, or JSON Lines ({"prompt": "…"} per line; a line starting with '{'
// is read as JSON). Blank lines are skipped. kc::Error naming file:line on a bad line or no prompt.
struct PromptLine {
  std::string text;
  std::int64_t line = 0, byte_offset = 0;
};
std::vector<PromptLine> read_prompts(const std::string& path);

// A corpus of the model's own answers (docs/corpus.md, "Answer corpora"): each prompt (encoded with
// encode_prompt) is answered by generate(); segment k = prompt + answer, domain "answer", depth =
// |prompt| + |answer| − 1, decode_last = |answer|: its decode-phase positions are exactly the answer
// tokens. Corpus::generation records the model, its identity and the settings.
struct AnswerCorpusOptions {
  GenerateOptions gen;  // stop_ids empty: default_stop_ids
  bool chat = false;
  std::string system = kDefaultSystemPrompt;
  std::string prompts_path, model_path, model_identity, tokenizer_origin;
};
Corpus build_answer_corpus(
    const CausalLM& m, const Tokenizer& tok, const std::vector<PromptLine>& prompts,
    const AnswerCorpusOptions& o,
    const std::function<void(std::size_t done, std::size_t total)>& progress = nullptr);

}  // namespace kc
