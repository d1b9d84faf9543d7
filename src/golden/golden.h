// Golden and candidate files (docs/golden-format.md): safetensors containers that stock loaders read.
//
// Golden, per scored position n of N (k = top-k size, 182 bytes per position at k = 20):
//   top_ids        [N, k] I32  reference top-k ids, log-prob descending, ties by lower id
//   top_logprobs   [N, k] F32  their log-probs, normalised over the full vocabulary
//   other_logprob  [N]    F32  log of the tail mass 1 − Σ_j p_j, summed directly over the tail (exact)
//   token          [N]    I32  the corpus token that follows the position
//   token_logprob  [N]    F32  its log-prob
//   segment        [N]    I32  index into the "segments" metadata list
//   depth          [N]    I32  context length at the position (tokens before the predicted one)
//   phase          [N]    U8   0 prefill, 1 decode
//   flags          [N]    U8   PositionFlag bits of the reference row
// Candidate, per position of the golden (all positions, or a contiguous range for shards):
//   logprobs_at_ref [N, k] F32 candidate log-probs at the golden's top_ids (for an id the engine did not
//                              report: an upper bound of its log-prob, with covered = 0)
//   other_logprob   [N]    F32 candidate log tail mass outside the golden's top-k; NaN = unknown
//   top1_id         [N]    I32 candidate's own top-1 (ties by lower id)
//   top1_logprob    [N]    F32
//   token_logprob   [N]    F32 candidate log-prob of the corpus token; NaN = unknown
//   flags           [N]    U8  PositionFlag bits of the candidate row
//   covered         [N, k] U8  optional; 1 = the engine reported this id. Absent = all covered.
// Metadata (strings): kerncheck.format ("golden" | "candidate"), kerncheck.version ("2"), k, vocab,
// positions, model, tokenizer, corpus, engine, variant, command_line, segments (JSON), checksum; candidates
// also golden_checksum and position_begin; any other key (e.g. kerncheck.corpus_first_tokens) in `extra`.
// checksum = "xxh3:" + XXH3-64 of (every metadata key but checksum, sorted, length-prefixed; then the
// XXH3-64 of every tensor's bytes in file order): a changed label, segment or identity fails it like a
// changed log-prob (version 1 covered the tensors only; its files are refused with "re-record").
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace kc {

inline constexpr const char* kFormatVersion = "2";

enum PositionFlag : std::uint8_t {
  kFlagNaN = 1,            // the row had a NaN logit
  kFlagPosInf = 2,         // the row had a +inf logit
  kFlagNoFinite = 4,       // no finite logit at all
  kFlagNegInf = 8,         // some logits were −inf (masked ids; informational)
  kFlagTokenUnknown = 16,  // candidate: the corpus token's log-prob was not reported
};
inline constexpr std::uint8_t kFlagsBroken = kFlagNaN | kFlagPosInf | kFlagNoFinite;

struct Segment {
  std::string name;
  std::string domain = "prose";       // "code" | "prose" | any other label
  std::int64_t depth = 0;             // nominal context depth of the segment (informational)
  std::int64_t start = 0;             // index of its first scored position in the golden
  std::string text;                   // optional: the text, for quoting the worst positions
  std::vector<std::int64_t> offsets;  // optional: per scored position, char offset in text of the next token
};

// Who/what made a file.
struct Provenance {
  std::string engine, variant, command_line;
};

struct Identity {
  std::string model, tokenizer, corpus;  // hash strings; corpus defaults to "tokens-sha256:<hex>"
};

struct GoldenMeta {
  int k = 20;
  std::int64_t vocab = 0;
  std::int64_t n = 0;
  Identity identity;
  Provenance made_by;
  std::vector<Segment> segments;
  std::map<std::string, std::string> extra;  // other metadata keys (covered by the checksum too)
  std::string checksum;                      // filled by the reader and the writer
};

// Views of the golden arrays (into a mapped file or the caller's buffers).
struct GoldenArrays {
  std::span<const std::int32_t> top_ids;  // N·k
  std::span<const float> top_logprobs;    // N·k
  std::span<const float> other_logprob;   // N
  std::span<const std::int32_t> token;    // N
  std::span<const float> token_logprob;   // N
  std::span<const std::int32_t> segment;  // N
  std::span<const std::int32_t> depth;    // N
  std::span<const std::uint8_t> phase;    // N
  std::span<const std::uint8_t> flags;    // N
};

// XXH3-64 (the file checksum: the digest kc::Xxh64 gives) of the concatenation of `parts`, computed out of
// order, so that a reader can hash each block of rows while the judge has it in cache (one pass over the
// file instead of two). Within each 1 kB block XXH3's accumulator update is a sum over 64-byte stripes of
// terms that depend only on the stripe's bytes and its index in the block; add_rows sums them per block
// (exact, mod 2^64, in any order) and digest() chains the blocks (XXH3's scramble) in one cheap pass.
// Part p holds `rows` rows of parts[p].size() / rows bytes. Every row of every part must be added once;
// add_rows is thread-safe for disjoint row ranges.
class SplitXxh3 {
 public:
  SplitXxh3(std::vector<std::span<const std::uint8_t>> parts, std::int64_t rows);
  ~SplitXxh3();
  SplitXxh3(const SplitXxh3&) = delete;
  SplitXxh3& operator=(const SplitXxh3&) = delete;
  // progress (optional) is called with r after the range's bytes up to row r were hashed, every ~8 kB and
  // last with `end`: a caller that checks rows [previous r, r) then reads them while they are in L1.
  void add_rows(std::size_t part, std::int64_t begin, std::int64_t end,
                const std::function<void(std::int64_t)>& progress = {});
  std::uint64_t digest();

 private:
  void add_range(std::size_t part, std::uint64_t start, std::uint64_t end,
                 const std::function<void(std::int64_t)>* progress);
  void copy_stream(std::uint64_t off, std::uint8_t* dst, std::size_t len) const;
  std::vector<std::span<const std::uint8_t>> parts_;
  std::vector<std::uint64_t> offset_, width_;
  std::uint64_t len_ = 0, stripes_ = 0;  // bytes; stripes accumulated block-wise: (len − 1) / 64
  std::uint64_t full_ = 0;               // blocks followed by a scramble: (len − 1) / 1024
  static constexpr std::uint64_t kBusy = ~std::uint64_t{0};
  std::atomic<std::uint64_t> next_{0};  // the next block to chain in place, or kBusy while one range has it
  std::uint64_t acc_[8];                // the chain's state after blocks [0, next_)
  bool sequential_ = false;             // short streams: hashed in one go by digest()
  std::uint64_t* delta_ = nullptr;      // per block: 8 lane sums (blocks owned by one range)
  std::size_t delta_bytes_ = 0;
  std::mutex mu_;
  std::vector<std::pair<std::uint64_t, std::array<std::uint64_t, 8>>> partial_;  // blocks split by ranges
  std::vector<std::uint64_t> straddle_;  // stripes that cross a range boundary
};

// A golden's top-k probability mass Σ exp(top_logprobs) may exceed 1 by this much (f32 rounding), no more.
inline constexpr float kTopkMassTol = 1e-3f;

// Verification deferred to the judge's pass (`kerncheck test` reads each file once): a reader called with
// defer = true checks the header, metadata and shapes only and leaves this in `pending`. rows(b, e) hashes
// and checks file rows [b, e) (any order, any threads, each row once); finish() then throws exactly what
// the reader would have thrown (checksum first, then the first bad row). Nothing computed from the rows
// may be reported before finish() returned.
class DeferredCheck {
 public:
  virtual ~DeferredCheck() = default;
  virtual void rows(std::int64_t begin, std::int64_t end) = 0;
  // rows(), less the golden's top-k mass check, for a caller that sums the mass anyway (the judge's
  // scoring): it calls refuse() for a row whose mass exceeds 1 + kTopkMassTol (the f32 sum of exp).
  virtual void rows_but_mass(std::int64_t begin, std::int64_t end) = 0;
  virtual void finish() = 0;
  void refuse() { ok_ = false; }  // a caller's check failed: finish() names the first bad row
  std::int64_t n() const { return n_; }
  bool done() const { return done_; }  // finish() returned
  // rows(0, n) and finish(): for callers that cannot fuse the check with their pass.
  void verify_all() {
    rows(0, n_);
    finish();
  }

 protected:
  std::int64_t n_ = 0;
  std::atomic<std::int64_t> seen_{0};  // rows passed to rows()
  std::atomic<bool> done_{false};
  std::atomic<bool> ok_{true};  // every check so far passed
};

struct Golden {
  std::string path;
  GoldenMeta meta;
  GoldenArrays a;
  // top_ids[:, 0], gathered by read_golden while it verifies top_ids (the block is in cache then): the
  // judge's flip test reads 4 bytes per position instead of a cache line of top_ids. Empty when the
  // reader did not verify (then use top_ids).
  std::span<const std::int32_t> top1;
  std::shared_ptr<const void> owner;       // keeps the mapping (or copies) alive
  std::shared_ptr<DeferredCheck> pending;  // read with defer = true: rows not yet verified
};

struct CandidateMeta {
  int k = 20;
  std::int64_t vocab = 0;
  std::int64_t n = 0;               // positions in this file
  std::int64_t position_begin = 0;  // golden index of its first position
  Identity identity;                // the golden's
  std::string golden_checksum;
  Provenance made_by;
  std::map<std::string, std::string> extra;  // other metadata keys (covered by the checksum too)
  std::string checksum;
};

struct CandidateArrays {
  std::span<const float> logprobs_at_ref;  // N·k
  std::span<const float> other_logprob;    // N (NaN = unknown)
  std::span<const std::int32_t> top1_id;   // N
  std::span<const float> top1_logprob;     // N
  std::span<const float> token_logprob;    // N (NaN = unknown)
  std::span<const std::uint8_t> flags;     // N
  std::span<const std::uint8_t> covered;   // N·k, or empty = every id covered
};

struct Candidate {
  std::string path;
  CandidateMeta meta;
  CandidateArrays a;
  std::shared_ptr<const void> owner;
  std::shared_ptr<DeferredCheck> pending;  // read with defer = true: rows not yet verified
};

// Owned buffers for building a candidate (importers, record). Fill with push(), then write_candidate.
struct CandidateBuffers {
  int k = 20;
  std::vector<float> logprobs_at_ref, other_logprob, top1_logprob, token_logprob;
  std::vector<std::int32_t> top1_id;
  std::vector<std::uint8_t> flags, covered;  // leave `covered` empty when every id is always covered
  std::size_t size() const { return top1_id.size(); }
  // One position. `covered` may be nullptr (all covered); once any position has a covered mask, earlier
  // positions are back-filled as fully covered.
  void push(std::span<const float> lp_at_ref, float other, std::int32_t top1, float top1_lp, float token_lp,
            std::uint8_t flags, const std::uint8_t* covered = nullptr);
  CandidateArrays view() const;
};

struct GoldenBuffers {
  int k = 20;
  std::vector<std::int32_t> top_ids, token, segment, depth;
  std::vector<float> top_logprobs, other_logprob, token_logprob;
  std::vector<std::uint8_t> phase, flags;
  std::size_t size() const { return token.size(); }
  GoldenArrays view() const;
};

// Readers validate everything (format, version, dtypes, shapes, ids in [0, vocab), segments, checksum) and
// throw kc::Error "FILE: FIELD: expected …, got …". The reader maps the file; the arrays are views.
// defer = true: see DeferredCheck (the caller must run `pending` before using the rows).
Golden read_golden(const std::string& path, bool defer = false);
Candidate read_candidate(const std::string& path, bool defer = false);
// The same from bytes in memory (fuzzing). `verify_checksum` can be turned off only by fuzzers.
Golden parse_golden(std::span<const std::uint8_t> bytes, const std::string& path,
                    bool verify_checksum = true);
Candidate parse_candidate(std::span<const std::uint8_t> bytes, const std::string& path,
                          bool verify_checksum = true);

// Writers check shapes and write atomically; they compute the checksum (returned, and stored in meta).
std::string write_golden(const std::string& path, const GoldenMeta& meta, const GoldenArrays& a);
std::string write_candidate(const std::string& path, const CandidateMeta& meta, const CandidateArrays& a);

// A candidate's metadata for judging against `golden` (identity, k, vocab, checksum, n = all positions).
CandidateMeta candidate_meta_for(const Golden& golden, const Provenance& made_by);

// Refuses (kc::Error) a candidate that does not belong to the golden: k, vocab, identity, golden checksum,
// position range within [0, N).
void check_candidate_matches(const Golden& g, const Candidate& c);

// The golden/candidate checksum: "xxh3:" + XXH3-64 of the metadata `md` (every key but "checksum", in
// key order, each key and value preceded by its byte length as a little-endian u64) followed by the
// little-endian u64 `data_digest` (XXH3-64 of the tensors' bytes in file order).
std::string metadata_checksum(const std::map<std::string, std::string>& md, std::uint64_t data_digest);

// "tokens-sha256:<hex>" of the token ids (the corpus identity when none is given).
std::string corpus_identity_of_tokens(std::span<const std::int32_t> tokens);

// Segments as the JSON text stored in the metadata, and back (validated against n positions).
std::string segments_to_json(const std::vector<Segment>& segments);
std::vector<Segment> segments_from_json(const std::string& text, const std::string& file, std::int64_t n);

}  // namespace kc
