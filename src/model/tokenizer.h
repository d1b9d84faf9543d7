// Byte-level BPE tokenizer (GPT-2 family: SmolLM2, Qwen, Llama 3 …), read from GGUF metadata or from a
// Hugging Face tokenizer.json, giving the same ids as the HF `tokenizers` library.
//
// Encode: (1) added tokens in the text (<|im_start|> …) are cut out as atomic tokens, leftmost-longest,
// honouring their lstrip/rstrip flags; special ones only when `parse_special` (HF's default, and
// llama.cpp's parse_special); (2) each remaining span is pre-tokenized by the configured regex splits
// (PCRE2 with UTF + UCP, so \p{L}, \p{N}, \s are Unicode-aware); (3) each piece's bytes are mapped to
// GPT-2's byte-level alphabet and merged by BPE in merge-rank order (ties: leftmost first, as HF does);
// results are cached per piece.
// Decode: ids → token strings → bytes (byte-level alphabet inverted; added tokens verbatim) → UTF-8 with
// invalid sequences replaced by U+FFFD (like HF's lossy decode).
//
// Supported configurations (everything else is a kc::Error naming the file and field):
// - GGUF: tokenizer.ggml.model "gpt2"; tokenizer.ggml.pre "smollm" (and the llama.cpp pre-tokenizers
//   that share its regexes: "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva"), "gpt2"
//   (also "gpt-2", "mpt", "olmo", "jais"), "qwen2" (also "stablelm2"), "llama-bpe" (also "llama3"),
//   "default"; token types CONTROL (special) and USER_DEFINED (always matched) are added tokens.
// - tokenizer.json: model BPE (vocab, merges as "a b" strings or [a, b] pairs, unk_token, fuse_unk,
//   ignore_merges); pre_tokenizer ByteLevel / Split (Regex or String; any behavior; invert) / Digits /
//   Sequence of those with ByteLevel last; decoder ByteLevel (or null); normalizer null; added_tokens
//   with lstrip/rstrip (single_word is refused).
//
// **Example**:
//   auto tok = kc::Tokenizer::from_gguf(kc::GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf"));
//   tok.encode("<|im_start|>user\nHi 42");   // {1, 4093, 198, 26843, 216, 36, 34}
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kc {

class GgufFile;

class Tokenizer {
 public:
  static Tokenizer from_gguf(const GgufFile& g);
  static Tokenizer from_tokenizer_json(const std::string& path);
  // Parses tokenizer.json text; `origin` names it in error messages.
  static Tokenizer from_json_text(std::string_view json, const std::string& origin);

  // Text must be valid UTF-8 (else kc::Error naming the byte offset). No BOS/EOS is added: see add_bos().
  std::vector<std::int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Ids must be < vocab_size() (else kc::Error). skip_special drops special added tokens.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;
  std::string decode_bytes(std::span<const std::int32_t> ids, bool skip_special = false) const;  // raw bytes

  std::size_t vocab_size() const;                 // max id + 1 (base vocab + added tokens)
  std::string_view token(std::int32_t id) const;  // the token string as stored (byte-level alphabet)
  std::optional<std::int32_t> token_id(std::string_view token) const;
  bool is_special(std::int32_t id) const;
  const std::string& origin() const;    // file the tokenizer came from
  const std::string& pre_name() const;  // "smollm", "tokenizer.json", …

  // Special ids from GGUF metadata or tokenizer.json added tokens; -1 when the file names none.
  std::int32_t bos_id() const;
  std::int32_t eos_id() const;
  std::int32_t pad_id() const;
  bool add_bos() const;  // tokenizer.ggml.add_bos_token (false when absent)

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The tokenizer must cover exactly the model's embedding rows: vocab_size() == model_vocab. With
// allow_padded_model, a model with more rows than the tokenizer has ids is accepted (HF checkpoints pad
// embeddings to a multiple of 64/128). Throws kc::Error (exit 3) naming both sources otherwise.
void check_vocab_size(const Tokenizer& tok, std::uint64_t model_vocab, std::string_view model_origin,
                      bool allow_padded_model = false);

}  // namespace kc
