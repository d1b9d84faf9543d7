// Evaluation corpora (docs/corpus.md): token windows at several context depths, cut from prose and code
// documents, stored as a safetensors file (.kcorpus): tensor "tokens" [total] I32 (every segment's window,
// concatenated) and string metadata kerncheck.format = "corpus", kerncheck.version, tokenizer (identity),
// tokenizer_origin, vocab, preset, seed, segments (JSON), checksum ("xxh3:" + hex of the token bytes).
//
// A segment of depth D holds D + 1 tokens t_0 … t_D: D scored positions, position i predicting t_{i+1}
// from the i + 1 tokens before it, so the deepest position sees exactly D tokens. The first
// D − decode_last positions are scored from one prefill; the last decode_last come from decoding
// t_{D−decode_last} … t_{D−1} one at a time through the KV cache (the seed's "last 512 decoded").
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace kc {

struct CorpusSegment {
  std::string name;              // "prose-d256-0"
  std::string domain;            // "prose" | "code"
  std::int64_t depth = 0;        // scored positions = context length of the deepest one
  std::int64_t decode_last = 0;  // how many final positions are scored in decode phase
  std::int64_t token_begin = 0;  // index of t_0 in the tokens tensor; the segment has depth + 1 tokens
  std::string source;            // file (or "kjv", "devil") the window was cut from
  std::int64_t byte_offset = 0;  // where in the source
  std::string text;              // the window's text (valid UTF-8), for quoting
  std::vector<std::int64_t> offsets;  // per scored position: byte offset in text of the token it predicts
};

struct Corpus {
  std::string path;  // where it was read from (empty for one just built)
  std::string tokenizer_id, tokenizer_origin, preset;
  std::int64_t vocab = 0;
  std::uint64_t seed = 0;
  std::vector<CorpusSegment> segments;
  std::vector<std::int32_t> tokens;
  std::string checksum;  // "xxh3:<16 hex>" over the token bytes
  // The source documents' identity (sources_identity; metadata key "sources"); empty for answer corpora
  // and for files written before it existed.
  std::string sources_id;
  // Answer corpora (preset "answers", generate.h): JSON of the model, its identity, the prompts file and
  // the generation settings (metadata key "generation"); empty for text corpora.
  std::string generation;
  std::string identity() const { return "kcc-" + checksum; }
  std::span<const std::int32_t> window(const CorpusSegment& s) const {
    return std::span<const std::int32_t>(tokens).subspan(s.token_begin, s.depth + 1);
  }
  std::int64_t positions() const;  // Σ depth
};

struct SourceDoc {
  std::string domain, name, text;
};

struct CorpusOptions {
  std::string preset = "quick";  // quick | full | custom (set when depths etc. are overridden)
  std::vector<std::int64_t> depths;
  // Not set: the preset's. A value set is used as given (decode_last 0: every position from the prefill)
  // or refused, never replaced by the preset's.
  std::optional<std::int64_t> segments_per_depth, decode_last;
  std::vector<std::string> prose_files, code_files;      // empty both: the default Debian/system sources
  std::uint64_t seed = 20251130;
};

// Fills depths / segments_per_depth / decode_last from the preset where not given; throws on bad values.
void resolve_corpus_options(CorpusOptions& o);

// Tokenizer from a .gguf (its metadata), a tokenizer.json, or a folder holding tokenizer.json.
Tokenizer load_tokenizer(const std::string& path);
// "tok-sha256:<hex>" over every token string with its special flag and the ids of a fixed probe text
// (so a change of merges or pre-tokenizer shows too). Equal for a GGUF and its tokenizer.json when they
// tokenize alike.
std::string tokenizer_identity(const Tokenizer& tok);

// The default sources, pinned by data/corpus/manifest.tsv (docs/corpus.md): King James Bible (`bible`,
// packages bible-kjv bible-kjv-text) and The Devil's Dictionary (/usr/share/dictd/devil.dict.dz,
// dict-devil) from the Debian packages, and the code files shipped in data/corpus/code/. Every source must
// have the manifest's size and SHA-256, so the corpus is the same on every machine. Throws kc::Error (exit 3)
// naming the apt-get command when a package is missing, and the expected and actual hash when a source
// differs. The data folder: $KC_CORPUS_DIR, else the source tree's data/corpus (a build-time path).
std::vector<SourceDoc> default_sources();
std::string corpus_data_dir();
// "src-sha256:<hex>" over each document's domain and the SHA-256 of its text, in order: equal for two
// corpora built from the same bytes (names and paths do not enter).
std::string sources_identity(const std::vector<SourceDoc>& docs);
std::vector<SourceDoc> read_sources(const std::vector<std::string>& prose, const std::vector<std::string>& code);

// Deterministic in (options, sources, tokenizer).
Corpus build_corpus(const CorpusOptions& o, const std::vector<SourceDoc>& docs, const Tokenizer& tok,
                    const std::string& tokenizer_origin);

// A segment of a corpus of the model's own answers (domain "answer"): window = prompt + answer, depth =
// |prompt| + |answer| − 1, decode_last = |answer| (the answer tokens are the decode-phase positions). Its
// text is the window's decoded bytes with invalid UTF-8 bytes replaced by '?' (so offsets stay byte
// offsets). Throws kc::Error when the prompt has fewer than 2 tokens or the answer is empty.
CorpusSegment answer_segment(const Tokenizer& tok, std::span<const std::int32_t> prompt,
                             std::span<const std::int32_t> answer);

void write_corpus(const std::string& path, Corpus& c);  // fills c.checksum
Corpus read_corpus(const std::string& path);            // validates everything

}  // namespace kc
