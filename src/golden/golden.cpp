#include "golden/golden.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "core/error.h"
#include "core/hash.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "numeric/fastmath.h"
#include "io/safetensors.h"

// The row scans are plain loops that GCC vectorises; it picks 256-bit vectors on this CPU by default
// (-mprefer-vector-width=256), half the lanes AVX-512 has for them.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace kc {
namespace {

using nlohmann::json;

template <typename T>
std::span<const std::uint8_t> as_bytes(std::span<const T> s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size_bytes()};
}

template <typename T>
Tensor view_tensor(DType d, std::vector<std::int64_t> shape, std::span<const T> s, const char* name) {
  Tensor t;
  t.dtype = d;
  t.shape = std::move(shape);
  t.bytes = as_bytes(s);
  t.origin = name;
  return t;
}

std::int64_t parse_int(const std::map<std::string, std::string>& md, const std::string& file, const char* key,
                       std::int64_t lo, std::int64_t hi) {
  auto it = md.find(key);
  if (it == md.end()) throw_input_error(file, std::string("metadata ") + key, "an integer", "nothing");
  std::int64_t v = 0;
  const std::string& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty())
    throw_input_error(file, std::string("metadata ") + key, "an integer", "\"" + s.substr(0, 40) + "\"");
  if (v < lo || v > hi)
    throw_input_error(file, std::string("metadata ") + key, fmt::format("an integer in [{}, {}]", lo, hi), s);
  return v;
}

std::string get_str(const std::map<std::string, std::string>& md, const char* key) {
  auto it = md.find(key);
  return it == md.end() ? std::string() : it->second;
}

void check_format(const std::map<std::string, std::string>& md, const std::string& file, const char* want) {
  auto f = md.find("kerncheck.format");
  if (f == md.end())
    throw_input_error(file, "metadata kerncheck.format", fmt::format("\"{}\"", want),
                      "nothing (not a kerncheck file)");
  if (f->second != want)
    throw_input_error(file, "metadata kerncheck.format", fmt::format("\"{}\"", want),
                      "\"" + f->second.substr(0, 40) + "\"");
  auto v = md.find("kerncheck.version");
  if (v != md.end() && v->second == "1")
    throw_input_error(file, "metadata kerncheck.version", fmt::format("\"{}\"", kFormatVersion),
                      "\"1\" (written by an older kerncheck, whose checksum did not cover the metadata: "
                      "re-record the file)");
  if (v == md.end() || v->second != kFormatVersion)
    throw_input_error(file, "metadata kerncheck.version", fmt::format("\"{}\"", kFormatVersion),
                      v == md.end() ? "nothing" : "\"" + v->second.substr(0, 40) + "\"");
}

// Storage for arrays that had to be copied (misaligned in the file).
struct Holder {
  std::shared_ptr<const void> file_owner;
  std::vector<std::vector<std::uint8_t>> copies;
};

template <typename T>
std::span<const T> get_array(const SafetensorsFile& f, Holder& h, const char* name, DType want,
                             std::vector<std::int64_t> shape, bool optional = false) {
  const std::string& file = f.path();
  if (!f.contains(name)) {
    if (optional) return {};
    throw_input_error(file, fmt::format("tensor {}", name), "present", "missing");
  }
  Tensor t = f.tensor(name);
  if (t.dtype != want)
    throw_input_error(file, fmt::format("tensor {} dtype", name), safetensors_code(want),
                      safetensors_code(t.dtype));
  if (t.shape != shape) {
    Tensor s;
    s.shape = shape;
    throw_input_error(file, fmt::format("tensor {} shape", name), s.shape_str(), t.shape_str());
  }
  std::size_t n = t.bytes.size() / sizeof(T);
  if (reinterpret_cast<std::uintptr_t>(t.bytes.data()) % alignof(T) == 0)
    return {reinterpret_cast<const T*>(t.bytes.data()), n};
  h.copies.emplace_back(t.bytes.begin(), t.bytes.end());  // vector storage is suitably aligned
  return {reinterpret_cast<const T*>(h.copies.back().data()), n};
}

std::uint64_t digest_of(std::initializer_list<std::span<const std::uint8_t>> parts) {
  Xxh64 h;
  for (auto& p : parts) h.update(p);
  return h.digest();
}

// The metadata part of the checksum, as hashed by metadata_checksum.
std::string canonical_metadata(const std::map<std::string, std::string>& md) {
  std::string out;
  auto put = [&out](const std::string& s) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(static_cast<std::uint64_t>(s.size()) >> (8 * i)));
    out += s;
  };
  for (auto& [key, value] : md)
    if (key != "checksum") put(key), put(value);
  return out;
}

std::string seal(const std::string& canonical, std::uint64_t data_digest) {
  Xxh64 h;
  h.update({reinterpret_cast<const std::uint8_t*>(canonical.data()), canonical.size()});
  std::uint8_t d[8];
  for (int i = 0; i < 8; ++i) d[i] = static_cast<std::uint8_t>(data_digest >> (8 * i));
  h.update(d);
  return "xxh3:" + h.hex();
}

std::uint64_t golden_digest(const GoldenArrays& a) {
  return digest_of({as_bytes(a.top_ids), as_bytes(a.top_logprobs), as_bytes(a.other_logprob),
                      as_bytes(a.token), as_bytes(a.token_logprob), as_bytes(a.segment), as_bytes(a.depth),
                      as_bytes(a.phase), as_bytes(a.flags)});
}

std::uint64_t candidate_digest(const CandidateArrays& a) {
  return digest_of({as_bytes(a.logprobs_at_ref), as_bytes(a.other_logprob), as_bytes(a.top1_id),
                      as_bytes(a.top1_logprob), as_bytes(a.token_logprob), as_bytes(a.flags),
                      as_bytes(a.covered)});
}

// Branch-free scans (the compiler vectorises them): true when every row passes the golden's checks. The
// conditions are written so that NaN fails them (!(x <= limit)). vocab and n_seg are ≤ 2³¹. Non-increasing
// log-probs and distinct neighbours within a row: the violations of the flat arrays shifted by one are
// counted (one vectorised pass), minus those at row starts, which straddle two rows.
// One fused pass each, counting in 32-bit lanes (blocks of 2^24 elements; 64-bit counters made the compiler
// widen every compare, which cost more than the loads).
constexpr std::int64_t kScanBlock = std::int64_t{1} << 24;

// ok(x): the element passes; breaks(prev, x): neighbours that violate the order within a row.
template <typename T, typename Ok, typename Breaks>
[[gnu::always_inline]] inline bool rows_ok(const T* __restrict x, std::int64_t rows, std::int64_t k, Ok ok,
                                           Breaks breaks) {
  const std::int64_t m = rows * k;
  if (m <= 0) return true;
  std::int32_t bad = !ok(x[0]);
  std::int64_t flat = 0, straddle = 0;
  for (std::int64_t t0 = 1; t0 < m; t0 += kScanBlock) {
    const std::int64_t t1 = std::min(m, t0 + kScanBlock);
    std::int32_t f = 0;
    for (std::int64_t t = t0; t < t1; ++t) {
      bad |= !ok(x[t]);
      f += breaks(x[t - 1], x[t]);
    }
    flat += f;
  }
  for (std::int64_t t = k; t < m; t += k) straddle += breaks(x[t - 1], x[t]);
  return bad == 0 && flat == straddle;
}

[[gnu::noinline]] bool ids_rows_ok(const std::int32_t* __restrict ids, std::int64_t rows, std::int64_t k,
                                   std::uint32_t vocab) {
  return rows_ok(
      ids, rows, k, [vocab](std::int32_t v) { return static_cast<std::uint32_t>(v) < vocab; },
      [](std::int32_t prev, std::int32_t v) { return v == prev; });
}

[[gnu::noinline]] bool lp_rows_ok(const float* __restrict lp, std::int64_t rows, std::int64_t k) {
  return rows_ok(
      lp, rows, k, [](float v) { return v <= 1e-3f; }, [](float prev, float v) { return v > prev; });
}

// Whole-row checks: distinct ids and top-k mass Σ exp(log-prob) ≤ 1 + kMassTol. Up to kTRows rows are
// transposed (column j contiguous) so that the pairwise compares and the sums run across rows, one row per
// SIMD lane, in the same pass as the other checks (k > kTMaxK: row by row).
constexpr std::int64_t kTRows = 128, kTMaxK = 64;
constexpr float kMassTol = kTopkMassTol;

[[gnu::noinline]] bool ids_distinct(const std::int32_t* __restrict x, std::int64_t rows, std::int64_t k) {
  int bad = 0;
  if (k > kTMaxK) {
    std::vector<std::int32_t> row(static_cast<std::size_t>(k));
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy(x + r * k, x + (r + 1) * k, row.begin());
      std::sort(row.begin(), row.end());
      bad |= std::adjacent_find(row.begin(), row.end()) != row.end();
    }
    return bad == 0;
  }
#ifdef __AVX512CD__
  // Row by row (no transposition, which cost more than the compares): duplicates within each block of 16
  // ids by one conflict detection, across blocks by comparing each later id, broadcast, with the block.
  // Padding lanes hold -1 … -16 (distinct, never a valid id: a negative id fails ids_rows_ok anyway).
  const __m512i pad = _mm512_setr_epi32(-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -15, -16);
  const int kk = static_cast<int>(k);
  __mmask16 hit = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t* row = x + r * k;
    for (int b0 = 0; b0 < kk; b0 += 16) {
      const int len = std::min(16, kk - b0);
      const __mmask16 m = static_cast<__mmask16>((1u << len) - 1);
      const __m512i v = _mm512_mask_loadu_epi32(pad, m, row + b0);
      const __m512i c = _mm512_conflict_epi32(v);
      hit |= _mm512_test_epi32_mask(c, c);
      for (int j = b0 + 16; j < kk; ++j) hit |= _mm512_mask_cmpeq_epi32_mask(m, v, _mm512_set1_epi32(row[j]));
    }
  }
  return hit == 0;
#else
  alignas(64) std::int32_t col[kTMaxK][kTRows];
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTRows) {
    const std::int64_t n = std::min(kTRows, rows - r0);
    const std::int32_t* b = x + r0 * k;
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t r = 0; r < n; ++r) col[j][r] = b[r * k + j];
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t j = i + 2; j < k; ++j)  // neighbours (j = i + 1): rows_ok's order check
        for (std::int64_t r = 0; r < n; ++r) bad |= col[i][r] == col[j][r];
  }
  return bad == 0;
#endif
}

[[gnu::noinline]] bool mass_ok(const float* __restrict lp, std::int64_t rows, std::int64_t k) {
  alignas(64) float sum[kTRows];
  int bad = 0;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTRows) {
    const std::int64_t n = std::min(kTRows, rows - r0);
    const float* b = lp + r0 * k;
    for (std::int64_t r = 0; r < n; ++r) sum[r] = 0.0f;
    for (std::int64_t j = 0; j < k; ++j)
      for (std::int64_t r = 0; r < n; ++r) sum[r] += fastmath::exp_f32(b[r * k + j]);
    for (std::int64_t r = 0; r < n; ++r) bad |= sum[r] > 1.0f + kMassTol;  // NaN: the caller's checks
  }
  return bad == 0;
}

double row_mass(const float* lp, std::int64_t k) {
  double m = 0;
  for (std::int64_t j = 0; j < k; ++j) m += std::exp(static_cast<double>(lp[j]));
  return m;
}

// Candidate log-probs: ≤ 0 (rounding tolerance) or NaN (unknown / a broken row, counted by the judge).
[[gnu::noinline]] bool logprobs_or_nan_ok(const float* __restrict x, std::int64_t n) {
  int bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad |= x[i] > 1e-3f;
  return bad == 0;
}

[[gnu::noinline]] bool logprobs_ok(const float* __restrict x, std::int64_t n) {
  int bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad |= !(x[i] <= 1e-3f);
  return bad == 0;
}

[[gnu::noinline]] bool ids_ok(const std::int32_t* __restrict x, std::int64_t n, std::uint32_t limit) {
  int bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad |= static_cast<std::uint32_t>(x[i]) >= limit;
  return bad == 0;
}

[[gnu::noinline]] bool bits_clear(const std::uint8_t* __restrict x, std::int64_t n, std::uint8_t mask) {
  int bad = 0;
  for (std::int64_t i = 0; i < n; ++i) bad |= x[i] & mask;
  return bad == 0;
}

// Hashes each array in checksum order and scans every block right after hashing it, while it is in cache
// (one pass over the file instead of two). `scan(b, e)` checks elements [b, e) of array `which`; blocks
// of rows of k elements for the [N, k] arrays. Returns the checksum and whether every scan passed.
template <typename Scan>
std::pair<std::uint64_t, bool> hash_and_scan(std::initializer_list<std::span<const std::uint8_t>> arrays,
                                           std::int64_t n, const Scan& scan) {
  Xxh64 h;
  bool ok = true;
  int which = 0;
  for (auto& bytes : arrays) {
    if (!bytes.empty() && n > 0) {
      const std::int64_t per = static_cast<std::int64_t>(bytes.size()) / n;                // bytes per row
      const std::int64_t rows = std::max<std::int64_t>(1, (std::int64_t{1} << 17) / per);  // ~128 kB blocks
      for (std::int64_t r0 = 0; r0 < n; r0 += rows) {
        const std::int64_t r1 = std::min(n, r0 + rows);
        h.update(bytes.subspan(r0 * per, (r1 - r0) * per));
        ok = scan(which, r0, r1) && ok;
      }
    }
    ++which;
  }
  return {h.digest(), ok};
}

// Parallel validation of per-position invariants; reports the first bad position. all_ok(b, e) is a
// branch-free scan of rows [b, e) (vectorised; most of the cost of opening a file otherwise): only a chunk
// it rejects is walked row by row to find and describe the first bad row.
template <typename Fast, typename Fn>
void check_rows(std::int64_t n, const Fast& all_ok,
                const Fn& bad_row /* returns "" or a message for row i */) {
  const std::size_t chunk = 1 << 16;
  std::vector<std::pair<std::int64_t, std::string>> first(chunk_count(n, chunk), {-1, ""});
  parallel_for(n, chunk, [&](std::size_t c, std::size_t b, std::size_t e) {
    if (all_ok(static_cast<std::int64_t>(b), static_cast<std::int64_t>(e))) return;
    for (std::size_t i = b; i < e; ++i) {
      std::string m = bad_row(static_cast<std::int64_t>(i));
      if (!m.empty()) {
        first[c] = {static_cast<std::int64_t>(i), std::move(m)};
        return;
      }
    }
  });
  for (auto& f : first)
    if (f.first >= 0) throw Error(f.second);
}

// The file's seal over its canonical metadata and the tensors' digest must be the stored checksum.
void check_seal(const std::string& file, const std::string& canonical, std::uint64_t digest,
                const std::string& stored) {
  const std::string sum = seal(canonical, digest);
  if (sum != stored)
    throw_input_error(file, "metadata checksum", sum,
                      stored.empty() ? "nothing"
                                     : stored.substr(0, 40) + " (the data were changed or the file is damaged)");
}

// A reader's deferred verification: scan(which, b, e) checks rows [b, e) of array `which` (checksum
// order) branch-free; walk() names the first bad row (throws) once a scan failed.
template <typename Scan, typename Walk>
class RowCheck final : public DeferredCheck {
 public:
  RowCheck(std::string file, std::string stored, std::string canonical,
           std::vector<std::span<const std::uint8_t>> parts, std::int64_t n, Scan scan, Walk walk,
           std::shared_ptr<const void> keep)
      : file_(std::move(file)),
        stored_(std::move(stored)),
        canonical_(std::move(canonical)),
        parts_(parts.size()),
        empty_(parts.size()),
        hash_(parts, n),
        scan_(std::move(scan)),
        walk_(std::move(walk)),
        keep_(std::move(keep)) {
    n_ = n;
    for (std::size_t w = 0; w < parts.size(); ++w) empty_[w] = parts[w].empty();
  }
  void rows(std::int64_t b, std::int64_t e) override { check(b, e, true); }
  void rows_but_mass(std::int64_t b, std::int64_t e) override { check(b, e, false); }
  void check(std::int64_t b, std::int64_t e, bool mass) {
    KC_ASSERT(!done_ && 0 <= b && b <= e && e <= n_, "DeferredCheck::rows: [{}, {}) of {}", b, e, n_);
    bool ok = true;
    for (std::size_t w = 0; w < parts_; ++w) {
      if (empty_[w]) continue;  // an absent optional array (candidate `covered`)
      // Each ~8 kB is checked right after it was hashed, while it is in L1 (checked after the whole
      // range, the wide arrays came back from L2 at a tenth of the pass's time).
      std::int64_t done = b;
      hash_.add_rows(w, b, e, [&](std::int64_t r) {
        if (r <= done) return;
        ok = scan_(static_cast<int>(w), done, r, mass) && ok;
        done = r;
      });
    }
    if (!ok) ok_ = false;
    seen_ += e - b;
  }
  void finish() override {
    if (done_) return;
    KC_ASSERT(seen_ == n_, "DeferredCheck::finish: {} of {} rows checked", seen_.load(), n_);
    check_seal(file_, canonical_, hash_.digest(), stored_);
    if (!ok_) walk_();
    done_ = true;
  }

 private:
  std::string file_, stored_, canonical_;
  std::size_t parts_;
  std::vector<bool> empty_;
  SplitXxh3 hash_;
  Scan scan_;
  Walk walk_;
  std::shared_ptr<const void> keep_;  // the mapping the spans point into
};

template <typename Scan, typename Walk>
std::shared_ptr<DeferredCheck> make_row_check(std::string file, std::string stored, std::string canonical,
                                              std::vector<std::span<const std::uint8_t>> parts,
                                              std::int64_t n, Scan scan, Walk walk,
                                              std::shared_ptr<const void> keep) {
  return std::make_shared<RowCheck<Scan, Walk>>(std::move(file), std::move(stored), std::move(canonical),
                                                std::move(parts), n, std::move(scan), std::move(walk),
                                                std::move(keep));
}

void put_identity(std::map<std::string, std::string>& md, const Identity& id, const Provenance& p) {
  md["model"] = id.model;
  md["tokenizer"] = id.tokenizer;
  md["corpus"] = id.corpus;
  md["engine"] = p.engine;
  md["variant"] = p.variant;
  md["command_line"] = p.command_line;
}

// Metadata keys with a field of their own in GoldenMeta / CandidateMeta; the rest goes to `extra`.
std::map<std::string, std::string> extra_keys(const std::map<std::string, std::string>& md) {
  static const char* const known[] = {"kerncheck.format", "kerncheck.version", "k", "vocab", "positions",
                                      "position_begin", "model", "tokenizer", "corpus", "engine", "variant",
                                      "command_line", "segments", "golden_checksum", "checksum"};
  std::map<std::string, std::string> out = md;
  for (const char* k : known) out.erase(k);
  return out;
}

void get_identity(const std::map<std::string, std::string>& md, Identity& id, Provenance& p) {
  id.model = get_str(md, "model");
  id.tokenizer = get_str(md, "tokenizer");
  id.corpus = get_str(md, "corpus");
  p.engine = get_str(md, "engine");
  p.variant = get_str(md, "variant");
  p.command_line = get_str(md, "command_line");
}

// The fields golden and candidate headers share (GoldenMeta, CandidateMeta).
template <typename Meta>
void read_header(const std::map<std::string, std::string>& md, const std::string& file, Meta& m) {
  m.k = static_cast<int>(parse_int(md, file, "k", 1, 4096));
  m.vocab = parse_int(md, file, "vocab", m.k, std::int64_t{1} << 31);
  m.n = parse_int(md, file, "positions", 1, std::int64_t{1} << 40);
  get_identity(md, m.identity, m.made_by);
  m.checksum = get_str(md, "checksum");
  m.extra = extra_keys(md);
}

Golden golden_from(const SafetensorsFile& f, std::shared_ptr<const void> owner, bool verify,
                   bool defer = false) {
  const std::string& file = f.path();
  const auto& md = f.metadata();
  check_format(md, file, "golden");
  Golden g;
  g.path = file;
  GoldenMeta& m = g.meta;
  read_header(md, file, m);
  std::string canonical = canonical_metadata(md);
  auto h = std::make_shared<Holder>();
  h->file_owner = std::move(owner);
  const std::int64_t n = m.n, k = m.k;
  GoldenArrays& a = g.a;
  a.top_ids = get_array<std::int32_t>(f, *h, "top_ids", DType::int32, {n, k});
  a.top_logprobs = get_array<float>(f, *h, "top_logprobs", DType::float32, {n, k});
  a.other_logprob = get_array<float>(f, *h, "other_logprob", DType::float32, {n});
  a.token = get_array<std::int32_t>(f, *h, "token", DType::int32, {n});
  a.token_logprob = get_array<float>(f, *h, "token_logprob", DType::float32, {n});
  a.segment = get_array<std::int32_t>(f, *h, "segment", DType::int32, {n});
  a.depth = get_array<std::int32_t>(f, *h, "depth", DType::int32, {n});
  a.phase = get_array<std::uint8_t>(f, *h, "phase", DType::uint8, {n});
  a.flags = get_array<std::uint8_t>(f, *h, "flags", DType::uint8, {n});
  g.owner = h;
  m.segments = segments_from_json(get_str(md, "segments"), file, n);
  const std::int64_t n_seg = static_cast<std::int64_t>(m.segments.size());
  const std::int64_t vocab = m.vocab;
  const std::uint32_t uvocab = static_cast<std::uint32_t>(vocab), nseg = static_cast<std::uint32_t>(n_seg);
  // Checks of rows [b, e) of one array (0..8 in checksum order): the row by row walk below names the
  // first bad row when one fails.
  // mass = false: the caller checks the top-k mass (DeferredCheck::rows_but_mass).
  auto scan = [a, k, uvocab, nseg](int which, std::int64_t b, std::int64_t e, bool mass = true) -> bool {
    switch (which) {
      case 0:
        return ids_rows_ok(a.top_ids.data() + b * k, e - b, k, uvocab) &
               ids_distinct(a.top_ids.data() + b * k, e - b, k);
      case 1:
        return lp_rows_ok(a.top_logprobs.data() + b * k, e - b, k) &
               (!mass || mass_ok(a.top_logprobs.data() + b * k, e - b, k));
      case 2:
        return logprobs_ok(a.other_logprob.data() + b, e - b);
      case 3:
        return ids_ok(a.token.data() + b, e - b, uvocab);
      case 4:
        return logprobs_ok(a.token_logprob.data() + b, e - b);
      case 5:
        return ids_ok(a.segment.data() + b, e - b, nseg);
      case 6:
        return ids_ok(a.depth.data() + b, e - b, 0x80000000u);  // ≥ 0
      case 7:
        return bits_clear(a.phase.data() + b, e - b, 0xfe);  // 0 or 1
      default:
        return bits_clear(a.flags.data() + b, e - b, kFlagsBroken);
    }
  };
  // Names the first bad row (throws); called when a scan failed.
  auto walk = [a, k, n, vocab, n_seg, file, scan] {
    auto all_ok = [&](std::int64_t b, std::int64_t e) {
      for (int w = 0; w < 9; ++w)
        if (!scan(w, b, e)) return false;
      return true;
    };
    check_rows(n, all_ok, [&](std::int64_t i) -> std::string {
      const std::int32_t* ids = a.top_ids.data() + i * k;
      const float* lp = a.top_logprobs.data() + i * k;
      for (std::int64_t j = 0; j < k; ++j) {
        if (ids[j] < 0 || ids[j] >= vocab)
          return fmt::format("{}: top_ids[{}, {}]: expected an id in [0, {}), got {}", file, i, j, vocab,
                             ids[j]);
        if (std::isnan(lp[j]) || lp[j] > 1e-3f)
          return fmt::format("{}: top_logprobs[{}, {}]: expected a log-prob ≤ 0, got {}", file, i, j, lp[j]);
        // Ordered by the logits (ties by lower id); two logits that differ can round to one f32 log-prob, so
        // the stored values are only non-increasing.
        if (j > 0 && (lp[j] > lp[j - 1] || ids[j] == ids[j - 1]))
          return fmt::format("{}: top_logprobs[{}]: expected non-increasing log-probs and distinct ids at {}",
                             file, i, j);
        for (std::int64_t j2 = 0; j2 < j; ++j2)
          if (ids[j2] == ids[j])
            return fmt::format("{}: top_ids[{}]: expected distinct ids, got {} at columns {} and {}", file, i,
                               ids[j], j2, j);
      }
      if (const double mass = row_mass(lp, k); mass > 1.0 + kMassTol)
        return fmt::format("{}: top_logprobs[{}]: expected a top-k probability mass ≤ 1 (+{}), got {:.6g}",
                           file, i, kMassTol, mass);
      if (std::isnan(a.other_logprob[i]) || a.other_logprob[i] > 1e-3f)
        return fmt::format("{}: other_logprob[{}]: expected a log-prob ≤ 0, got {}", file, i,
                           a.other_logprob[i]);
      if (a.token[i] < 0 || a.token[i] >= vocab)
        return fmt::format("{}: token[{}]: expected an id in [0, {}), got {}", file, i, vocab, a.token[i]);
      if (std::isnan(a.token_logprob[i]) || a.token_logprob[i] > 1e-3f)
        return fmt::format("{}: token_logprob[{}]: expected a log-prob ≤ 0, got {}", file, i,
                           a.token_logprob[i]);
      if (a.segment[i] < 0 || a.segment[i] >= n_seg)
        return fmt::format("{}: segment[{}]: expected an index in [0, {}), got {}", file, i, n_seg,
                           a.segment[i]);
      if (a.depth[i] < 0) return fmt::format("{}: depth[{}]: expected ≥ 0, got {}", file, i, a.depth[i]);
      if (a.phase[i] > 1) return fmt::format("{}: phase[{}]: expected 0 or 1, got {}", file, i, a.phase[i]);
      if (a.flags[i] & kFlagsBroken)
        return fmt::format(
            "{}: flags[{}]: the reference row is not finite (flags {}); a golden must be clean", file, i,
            a.flags[i]);
      return {};
    });
  };
  if (defer) {
    g.pending = make_row_check(file, m.checksum, std::move(canonical),
                               {as_bytes(a.top_ids), as_bytes(a.top_logprobs), as_bytes(a.other_logprob),
                                as_bytes(a.token), as_bytes(a.token_logprob), as_bytes(a.segment),
                                as_bytes(a.depth), as_bytes(a.phase), as_bytes(a.flags)},
                               n, scan, walk, h);
    return g;
  }
  bool scanned_ok = false;
  if (verify) {
    h->copies.emplace_back(static_cast<std::size_t>(n) * sizeof(std::int32_t));
    std::int32_t* top1 = reinterpret_cast<std::int32_t*>(h->copies.back().data());
    g.top1 = {top1, static_cast<std::size_t>(n)};
    auto scan_top1 = [&](int which, std::int64_t b, std::int64_t e) {
      if (which == 0)
        for (std::int64_t r = b; r < e; ++r) top1[r] = a.top_ids[r * k];
      return scan(which, b, e);
    };
    auto [digest, ok] = hash_and_scan({as_bytes(a.top_ids), as_bytes(a.top_logprobs),
                                       as_bytes(a.other_logprob), as_bytes(a.token), as_bytes(a.token_logprob),
                                       as_bytes(a.segment), as_bytes(a.depth), as_bytes(a.phase),
                                       as_bytes(a.flags)},
                                      n, scan_top1);
    check_seal(file, canonical, digest, m.checksum);
    scanned_ok = ok;
  }
  if (scanned_ok) return g;
  walk();
  return g;
}

Candidate candidate_from(const SafetensorsFile& f, std::shared_ptr<const void> owner, bool verify,
                         bool defer = false) {
  const std::string& file = f.path();
  const auto& md = f.metadata();
  check_format(md, file, "candidate");
  Candidate c;
  c.path = file;
  CandidateMeta& m = c.meta;
  read_header(md, file, m);
  m.position_begin = parse_int(md, file, "position_begin", 0, std::int64_t{1} << 40);
  m.golden_checksum = get_str(md, "golden_checksum");
  std::string canonical = canonical_metadata(md);
  auto h = std::make_shared<Holder>();
  h->file_owner = std::move(owner);
  const std::int64_t n = m.n, k = m.k;
  CandidateArrays& a = c.a;
  a.logprobs_at_ref = get_array<float>(f, *h, "logprobs_at_ref", DType::float32, {n, k});
  a.other_logprob = get_array<float>(f, *h, "other_logprob", DType::float32, {n});
  a.top1_id = get_array<std::int32_t>(f, *h, "top1_id", DType::int32, {n});
  a.top1_logprob = get_array<float>(f, *h, "top1_logprob", DType::float32, {n});
  a.token_logprob = get_array<float>(f, *h, "token_logprob", DType::float32, {n});
  a.flags = get_array<std::uint8_t>(f, *h, "flags", DType::uint8, {n});
  a.covered = get_array<std::uint8_t>(f, *h, "covered", DType::uint8, {n, k}, true);
  c.owner = h;
  const std::int64_t vocab = m.vocab;
  // Fused with the hash: top1_id in [0, vocab) (a negative id is allowed on broken rows: the walk below
  // decides) and covered ∈ {0, 1}.
  // Log-probs ≤ 0 (NaN allowed: unknown, or a broken row the judge counts); without a coverage mask the
  // log-probs at the golden's ids are a distribution's: mass ≤ 1 + ε (with one they are upper bounds).
  const bool full_cover = a.covered.empty();
  auto scan = [a, k, vocab, full_cover](int which, std::int64_t b, std::int64_t e, bool = true) -> bool {
    switch (which) {
      case 0:
        return logprobs_or_nan_ok(a.logprobs_at_ref.data() + b * k, (e - b) * k) &
               (!full_cover || mass_ok(a.logprobs_at_ref.data() + b * k, e - b, k));
      case 1:
        return logprobs_or_nan_ok(a.other_logprob.data() + b, e - b);
      case 2:
        return ids_ok(a.top1_id.data() + b, e - b, static_cast<std::uint32_t>(vocab));
      case 3:
        return logprobs_or_nan_ok(a.top1_logprob.data() + b, e - b);
      case 4:
        return logprobs_or_nan_ok(a.token_logprob.data() + b, e - b);
      case 6:
        return bits_clear(a.covered.data() + b * k, (e - b) * k, 0xfe);
      default:
        return true;
    }
  };
  // Names the first bad row (throws); called when a scan failed.
  auto walk = [a, k, n, vocab, file, scan] {
    auto all_ok = [&](std::int64_t b, std::int64_t e) {
      bool bad = false;
      for (std::int64_t i = b; i < e; ++i)
        bad |= (int{a.top1_id[i] < 0} & int{(a.flags[i] & kFlagsBroken) == 0}) | int{a.top1_id[i] >= vocab};
      if (!a.covered.empty())
        for (std::int64_t t = b * k; t < e * k; ++t) bad |= a.covered[t] > 1;
      for (int w : {0, 1, 3, 4}) bad |= !scan(w, b, e);
      return !bad;
    };
    check_rows(n, all_ok, [&](std::int64_t i) -> std::string {
      const float* lp = a.logprobs_at_ref.data() + i * k;
      for (std::int64_t j = 0; j < k; ++j)
        if (lp[j] > 1e-3f)
          return fmt::format("{}: logprobs_at_ref[{}, {}]: expected a log-prob ≤ 0 (or NaN), got {}", file, i,
                             j, lp[j]);
      if (a.covered.empty())
        if (const double mass = row_mass(lp, k); mass > 1.0 + kMassTol)
          return fmt::format(
              "{}: logprobs_at_ref[{}]: expected a probability mass ≤ 1 (+{}) over the golden's top-k, got {:.6g}",
              file, i, kMassTol, mass);
      for (auto [name, v] : {std::pair{"other_logprob", a.other_logprob[i]}, std::pair{"top1_logprob", a.top1_logprob[i]},
                             std::pair{"token_logprob", a.token_logprob[i]}})
        if (v > 1e-3f)
          return fmt::format("{}: {}[{}]: expected a log-prob ≤ 0 (or NaN), got {}", file, name, i, v);
      bool broken = a.flags[i] & kFlagsBroken;
      if ((a.top1_id[i] < 0 && !broken) || a.top1_id[i] >= vocab)
        return fmt::format("{}: top1_id[{}]: expected an id in [0, {}), got {}", file, i, vocab,
                           a.top1_id[i]);
      if (!a.covered.empty())
        for (std::int64_t j = 0; j < k; ++j)
          if (a.covered[i * k + j] > 1)
            return fmt::format("{}: covered[{}, {}]: expected 0 or 1, got {}", file, i, j,
                               a.covered[i * k + j]);
      return {};
    });
  };
  if (defer) {
    c.pending = make_row_check(
        file, m.checksum, std::move(canonical),
        {as_bytes(a.logprobs_at_ref), as_bytes(a.other_logprob), as_bytes(a.top1_id),
         as_bytes(a.top1_logprob), as_bytes(a.token_logprob), as_bytes(a.flags), as_bytes(a.covered)},
        n, scan, walk, h);
    return c;
  }
  if (verify) {
    auto [digest, ok] = hash_and_scan(
        {as_bytes(a.logprobs_at_ref), as_bytes(a.other_logprob), as_bytes(a.top1_id),
         as_bytes(a.top1_logprob), as_bytes(a.token_logprob), as_bytes(a.flags), as_bytes(a.covered)},
        n, scan);
    check_seal(file, canonical, digest, m.checksum);
    if (ok) return c;
  }
  walk();
  return c;
}

}  // namespace

// ---- out-of-order XXH3 ------------------------------------------------------------------------------
namespace {

// XXH3's default secret and constants (xxhash.h 0.8: XXH3_kSecret, XXH3_INIT_ACC, XXH_PRIME*); the tests
// compare SplitXxh3 with libxxhash on many lengths and row orders.
alignas(64) constexpr std::uint8_t kXxhSecret[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};
constexpr std::uint64_t kP32_1 = 0x9E3779B1U, kP32_2 = 0x85EBCA77U, kP32_3 = 0xC2B2AE3DU;
constexpr std::uint64_t kP64_1 = 0x9E3779B185EBCA87ULL, kP64_2 = 0xC2B2AE3D27D4EB4FULL,
                        kP64_3 = 0x165667B19E3779F9ULL, kP64_4 = 0x85EBCA77C2B2AE63ULL,
                        kP64_5 = 0x27D4EB2F165667C5ULL;
constexpr std::uint64_t kStripe = 64, kBlockStripes = 16;  // (192 − 64) / 8 stripes per block

inline std::uint64_t read64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian hosts only (x86-64, aarch64)
  return v;
}

// Σ over `count` consecutive stripes at p (the first at index j0 in its block) of XXH3's accumulator
// terms, added to out[8].
inline void stripe_terms(const std::uint8_t* p, std::uint64_t j0, std::uint64_t count, std::uint64_t* out) {
#if defined(__AVX512F__)
  __m512i acc = _mm512_loadu_si512(out);
  for (std::uint64_t j = 0; j < count; ++j) {
    // ~1 kB ahead (libxxhash: 384 B); an address past the data is harmless for a prefetch.
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(p) + j * kStripe + 1024),
                 _MM_HINT_T0);
    const __m512i d = _mm512_loadu_si512(p + j * kStripe);
    const __m512i dk = _mm512_xor_si512(d, _mm512_loadu_si512(kXxhSecret + 8 * (j0 + j)));
    const __m512i prod = _mm512_mul_epu32(dk, _mm512_shuffle_epi32(dk, static_cast<_MM_PERM_ENUM>(0x31)));
    acc = _mm512_add_epi64(acc,
                           _mm512_add_epi64(prod, _mm512_shuffle_epi32(d, static_cast<_MM_PERM_ENUM>(0x4E))));
  }
  _mm512_storeu_si512(out, acc);
#else
  for (std::uint64_t j = 0; j < count; ++j)
    for (int i = 0; i < 8; ++i) {
      const std::uint64_t d = read64(p + j * kStripe + 8 * i);
      const std::uint64_t dk = d ^ read64(kXxhSecret + 8 * (j0 + j) + 8 * i);
      out[i ^ 1] += d;
      out[i] += (dk & 0xFFFFFFFFu) * (dk >> 32);
    }
#endif
}

// The block sums (up to 1/16 of the stream): a lazily mapped area, in huge pages where the kernel has
// them. Pages of blocks chained in order (never stored) are never touched, so cost nothing.
std::uint64_t* alloc_lazy(std::size_t bytes) {
#ifdef __linux__
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  (void)::madvise(p, bytes, MADV_HUGEPAGE);  // best effort
  return static_cast<std::uint64_t*>(p);
#else
  return static_cast<std::uint64_t*>(::operator new(bytes));
#endif
}

void free_lazy(std::uint64_t* p, std::size_t bytes) {
  if (!p) return;
#ifdef __linux__
  ::munmap(p, bytes);
#else
  (void)bytes;
  ::operator delete(p);
#endif
}

// XXH3's per-block step: add the block's stripe terms, scramble.
inline void chain_block(std::uint64_t* acc, const std::uint64_t* d) {
  const std::uint8_t* scr = kXxhSecret + 192 - kStripe;
  for (int i = 0; i < 8; ++i) {
    std::uint64_t a = acc[i] + d[i];
    a ^= a >> 47;
    a ^= read64(scr + 8 * i);
    acc[i] = a * kP32_1;
  }
}

inline std::uint64_t fold128(std::uint64_t a, std::uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
}

}  // namespace

SplitXxh3::SplitXxh3(std::vector<std::span<const std::uint8_t>> parts, std::int64_t rows)
    : parts_(std::move(parts)) {
  for (auto& p : parts_) {
    KC_ASSERT(rows > 0 ? p.size() % static_cast<std::uint64_t>(rows) == 0 : p.empty(),
              "SplitXxh3: a part of {} bytes is not {} rows", p.size(), rows);
    offset_.push_back(len_);
    width_.push_back(rows > 0 ? p.size() / static_cast<std::uint64_t>(rows) : 0);
    len_ += p.size();
  }
  // Streams up to 240 bytes use other formulas (and short ones are cheap to hash twice anyway).
  sequential_ = len_ < (std::uint64_t{1} << 16);
  if (sequential_) return;
  stripes_ = (len_ - 1) / kStripe;
  full_ = (len_ - 1) / (kStripe * kBlockStripes);
  const std::uint64_t init[8] = {kP32_3, kP64_1, kP64_2, kP64_3, kP64_4, kP32_2, kP64_5, kP32_1};
  std::memcpy(acc_, init, sizeof acc_);
  const std::uint64_t blocks = (stripes_ + kBlockStripes - 1) / kBlockStripes;
  delta_bytes_ = std::max<std::size_t>(blocks * 64, 1);
  delta_ = alloc_lazy(delta_bytes_);  // uninitialised: every block is stored or zeroed once
}

SplitXxh3::~SplitXxh3() { free_lazy(delta_, delta_bytes_); }

void SplitXxh3::add_rows(std::size_t part, std::int64_t begin, std::int64_t end,
                         const std::function<void(std::int64_t)>& progress) {
  KC_ASSERT(part < parts_.size() && 0 <= begin && begin <= end, "SplitXxh3::add_rows: bad range");
  if (!sequential_ && begin != end)
    add_range(part, offset_[part] + begin * width_[part], offset_[part] + end * width_[part],
              progress ? &progress : nullptr);
  if (progress) progress(end);
}

void SplitXxh3::copy_stream(std::uint64_t off, std::uint8_t* dst, std::size_t len) const {
  for (std::size_t p = 0; p < parts_.size() && len > 0; ++p) {
    const std::uint64_t b = offset_[p], e = b + parts_[p].size();
    if (off >= e) continue;
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(e - off, len));
    std::memcpy(dst, parts_[p].data() + (off - b), take);
    dst += take, off += take, len -= take;
  }
  KC_ASSERT(len == 0, "SplitXxh3: read past the stream");
}

// Stream bytes [start, end) of one part (contiguous in memory).
void SplitXxh3::add_range(std::size_t p, std::uint64_t start, std::uint64_t end,
                          const std::function<void(std::int64_t)>* progress) {
  auto at = [&](std::uint64_t s) { return parts_[p].data() + (s * kStripe - offset_[p]); };  // stripe s
  std::vector<std::uint64_t> straddle;
  std::vector<std::pair<std::uint64_t, std::array<std::uint64_t, 8>>> partial;
  if (start % kStripe && start / kStripe < stripes_) straddle.push_back(start / kStripe);
  if (end % kStripe && end / kStripe < stripes_) straddle.push_back(end / kStripe);
  const std::uint64_t s0 = (start + kStripe - 1) / kStripe, s1 = std::min(end / kStripe, stripes_);
  // Chaining in place: a range that starts at the chain's next block takes the chain (next_ = kBusy) and
  // scrambles its whole blocks into acc_ in order, storing nothing (rows passed in order, e.g. one thread
  // walking the first array, never write their block sums); it hands the chain back where it stopped.
  bool tried = false, chaining = false;
  std::uint64_t chain_at = 0, reported = s0;
  constexpr std::uint64_t kProgressStripes = 128;  // 8 kB
  for (std::uint64_t s = s0; s < s1;) {
    if (progress && s - reported >= kProgressStripes) {  // rows wholly before stripe s are hashed
      (*progress)(static_cast<std::int64_t>((s * kStripe - offset_[p]) / width_[p]));
      reported = s;
    }
    const std::uint64_t blk = s / kBlockStripes, bs = blk * kBlockStripes;
    const std::uint64_t be = std::min(bs + kBlockStripes, stripes_), se = std::min(be, s1);
    if (s == bs && se == be) {  // the whole block is in this range: its sum is final
      if (!tried) {
        tried = true;
        std::uint64_t expect = blk;
        chaining = blk < full_ && next_.compare_exchange_strong(expect, kBusy, std::memory_order_acquire);
        chain_at = blk;
      }
      if (chaining && blk == chain_at && blk < full_) {
        alignas(64) std::uint64_t d[8] = {};
        stripe_terms(at(s), 0, se - s, d);
        chain_block(acc_, d);
        ++chain_at;
      } else {
        if (chaining) next_.store(chain_at, std::memory_order_release), chaining = false;
        std::uint64_t* d = delta_ + blk * 8;
        std::memset(d, 0, 64);
        stripe_terms(at(s), 0, se - s, d);
      }
    } else {
      if (chaining) next_.store(chain_at, std::memory_order_release), chaining = false;
      std::array<std::uint64_t, 8> d{};
      stripe_terms(at(s), s - bs, se - s, d.data());
      partial.emplace_back(blk, d);
    }
    s = se;
  }
  if (chaining) next_.store(chain_at, std::memory_order_release);
  if (straddle.empty() && partial.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  straddle_.insert(straddle_.end(), straddle.begin(), straddle.end());
  partial_.insert(partial_.end(), partial.begin(), partial.end());
}

std::uint64_t SplitXxh3::digest() {
  if (sequential_) {
    Xxh64 h;
    for (auto& p : parts_) h.update(p);
    return h.digest();
  }
  // Blocks no single range covered: zero them, then add their pieces.
  std::sort(straddle_.begin(), straddle_.end());
  straddle_.erase(std::unique(straddle_.begin(), straddle_.end()), straddle_.end());
  for (auto& [blk, d] : partial_) std::memset(&delta_[blk * 8], 0, 64);
  for (std::uint64_t s : straddle_) std::memset(&delta_[s / kBlockStripes * 8], 0, 64);
  for (auto& [blk, d] : partial_)
    for (int i = 0; i < 8; ++i) delta_[blk * 8 + i] += d[i];
  alignas(64) std::uint8_t buf[kStripe];
  for (std::uint64_t s : straddle_) {
    copy_stream(s * kStripe, buf, kStripe);
    stripe_terms(buf, s % kBlockStripes, 1, &delta_[s / kBlockStripes * 8]);
  }
  // XXH3_hashLong_64b: accumulate each full block, scramble (from where the in-place chain stopped); the
  // last partial block; the last stripe.
  const std::uint64_t next = next_.load(std::memory_order_acquire);
  KC_ASSERT(next != kBusy && next <= full_, "SplitXxh3::digest: the chain is still held");
  std::uint64_t acc[8];
  std::memcpy(acc, acc_, sizeof acc);
  const std::uint64_t full = full_;
  for (std::uint64_t b = next; b < full; ++b) chain_block(acc, delta_ + b * 8);
  if (stripes_ > full * kBlockStripes)
    for (int i = 0; i < 8; ++i) acc[i] += delta_[full * 8 + i];
  copy_stream(len_ - kStripe, buf, kStripe);
  {
    std::uint64_t last[8] = {};
    // The last stripe uses the secret at 192 − 64 − 7 (not a stripe index: compute it directly).
    for (int i = 0; i < 8; ++i) {
      const std::uint64_t d = read64(buf + 8 * i);
      const std::uint64_t dk = d ^ read64(kXxhSecret + 192 - kStripe - 7 + 8 * i);
      last[i ^ 1] += d;
      last[i] += (dk & 0xFFFFFFFFu) * (dk >> 32);
    }
    for (int i = 0; i < 8; ++i) acc[i] += last[i];
  }
  std::uint64_t h = len_ * kP64_1;
  for (int i = 0; i < 4; ++i)
    h += fold128(acc[2 * i] ^ read64(kXxhSecret + 11 + 16 * i),
                 acc[2 * i + 1] ^ read64(kXxhSecret + 11 + 16 * i + 8));
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  h ^= h >> 32;
  return h;
}

// ---- buffers --------------------------------------------------------------------------------------
void CandidateBuffers::push(std::span<const float> lp, float other, std::int32_t top1, float top1_lp,
                            float token_lp, std::uint8_t fl, const std::uint8_t* cov) {
  KC_ASSERT(lp.size() == static_cast<std::size_t>(k), "push: {} log-probs for k = {}", lp.size(), k);
  std::size_t before = size();
  logprobs_at_ref.insert(logprobs_at_ref.end(), lp.begin(), lp.end());
  other_logprob.push_back(other);
  top1_id.push_back(top1);
  top1_logprob.push_back(top1_lp);
  token_logprob.push_back(token_lp);
  flags.push_back(fl);
  if (cov || !covered.empty()) {
    if (covered.empty()) covered.assign(before * k, 1);
    if (cov)
      covered.insert(covered.end(), cov, cov + k);
    else
      covered.insert(covered.end(), k, 1);
  }
}

CandidateArrays CandidateBuffers::view() const {
  return {logprobs_at_ref, other_logprob, top1_id, top1_logprob, token_logprob, flags, covered};
}

GoldenArrays GoldenBuffers::view() const {
  return {top_ids, top_logprobs, other_logprob, token, token_logprob, segment, depth, phase, flags};
}

namespace {
// Maps every page of a file mapping up front (MADV_POPULATE_READ, Linux 5.14): the readers touch every byte
// anyway, and one call maps the page cache's large folios for a fraction of the cost of ~1 fault per 64 kB.
// Best effort: an older kernel (EINVAL) or a failure leaves the pages to be faulted in as before.
// In page-aligned pieces on every thread: one serial call over a 0.5 GB pair of files was ~30 ms of a
// 16-thread `kerncheck test` that otherwise takes ~60 ms.
void populate(std::span<const std::uint8_t> bytes) {
#ifdef __linux__
  constexpr int kPopulateRead = 22;  // MADV_POPULATE_READ, absent from older headers
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const auto a = reinterpret_cast<std::uintptr_t>(bytes.data());
  if (bytes.size() < (std::size_t{1} << 20) || page == 0 || a % page) return;
  const std::size_t piece = std::max<std::size_t>(
      std::size_t{8} << 20, (bytes.size() / (4 * static_cast<std::size_t>(thread_count())) + page - 1) / page * page);
  parallel_for(bytes.size(), piece, [&](std::size_t, std::size_t b, std::size_t e) {
    (void)madvise(reinterpret_cast<void*>(a + b), e - b, kPopulateRead);
  });
#else
  (void)bytes;
#endif
}
}  // namespace

// ---- read / write -----------------------------------------------------------------------------------
Golden read_golden(const std::string& path, bool defer) {
  auto file = MappedFile::open(path);
  populate(file->bytes());
  return golden_from(SafetensorsFile::parse(file->bytes(), path, file), file, true, defer);
}

Candidate read_candidate(const std::string& path, bool defer) {
  auto file = MappedFile::open(path);
  populate(file->bytes());
  return candidate_from(SafetensorsFile::parse(file->bytes(), path, file), file, true, defer);
}

Golden parse_golden(std::span<const std::uint8_t> bytes, const std::string& path, bool verify) {
  return golden_from(SafetensorsFile::parse(bytes, path, nullptr), nullptr, verify);
}

Candidate parse_candidate(std::span<const std::uint8_t> bytes, const std::string& path, bool verify) {
  return candidate_from(SafetensorsFile::parse(bytes, path, nullptr), nullptr, verify);
}

std::string write_golden(const std::string& path, const GoldenMeta& m, const GoldenArrays& a) {
  const std::int64_t n = static_cast<std::int64_t>(a.token.size()), k = m.k;
  KC_ASSERT(
      n == m.n && k >= 1 && a.top_ids.size() == static_cast<std::size_t>(n * k) &&
          a.top_logprobs.size() == a.top_ids.size() &&
          a.other_logprob.size() == static_cast<std::size_t>(n) &&
          a.token_logprob.size() == static_cast<std::size_t>(n) &&
          a.segment.size() == static_cast<std::size_t>(n) && a.depth.size() == static_cast<std::size_t>(n) &&
          a.phase.size() == static_cast<std::size_t>(n) && a.flags.size() == static_cast<std::size_t>(n),
      "write_golden: inconsistent array sizes for {} positions, k = {}", n, k);
  std::map<std::string, std::string> md = m.extra;
  md["kerncheck.format"] = "golden";
  md["kerncheck.version"] = kFormatVersion;
  md["k"] = std::to_string(k);
  md["vocab"] = std::to_string(m.vocab);
  md["positions"] = std::to_string(n);
  put_identity(md, m.identity, m.made_by);
  md["segments"] = segments_to_json(m.segments);
  const std::string sum = metadata_checksum(md, golden_digest(a));
  md["checksum"] = sum;
  // 4-byte tensors first, bytes last: every tensor stays naturally aligned in the file.
  std::vector<NamedTensor> t;
  t.push_back({"top_ids", view_tensor(DType::int32, {n, k}, a.top_ids, "top_ids")});
  t.push_back({"top_logprobs", view_tensor(DType::float32, {n, k}, a.top_logprobs, "top_logprobs")});
  t.push_back({"other_logprob", view_tensor(DType::float32, {n}, a.other_logprob, "other_logprob")});
  t.push_back({"token", view_tensor(DType::int32, {n}, a.token, "token")});
  t.push_back({"token_logprob", view_tensor(DType::float32, {n}, a.token_logprob, "token_logprob")});
  t.push_back({"segment", view_tensor(DType::int32, {n}, a.segment, "segment")});
  t.push_back({"depth", view_tensor(DType::int32, {n}, a.depth, "depth")});
  t.push_back({"phase", view_tensor(DType::uint8, {n}, a.phase, "phase")});
  t.push_back({"flags", view_tensor(DType::uint8, {n}, a.flags, "flags")});
  write_safetensors(path, t, md);
  return sum;
}

std::string write_candidate(const std::string& path, const CandidateMeta& m, const CandidateArrays& a) {
  const std::int64_t n = static_cast<std::int64_t>(a.top1_id.size()), k = m.k;
  const auto un = static_cast<std::size_t>(n);
  KC_ASSERT(n == m.n && a.logprobs_at_ref.size() == un * k && a.other_logprob.size() == un &&
                a.top1_logprob.size() == un && a.token_logprob.size() == un && a.flags.size() == un &&
                (a.covered.empty() || a.covered.size() == un * k),
            "write_candidate: inconsistent array sizes for {} positions, k = {}", n, k);
  std::map<std::string, std::string> md = m.extra;
  md["kerncheck.format"] = "candidate";
  md["kerncheck.version"] = kFormatVersion;
  md["k"] = std::to_string(k);
  md["vocab"] = std::to_string(m.vocab);
  md["positions"] = std::to_string(n);
  md["position_begin"] = std::to_string(m.position_begin);
  md["golden_checksum"] = m.golden_checksum;
  put_identity(md, m.identity, m.made_by);
  const std::string sum = metadata_checksum(md, candidate_digest(a));
  md["checksum"] = sum;
  std::vector<NamedTensor> t;
  t.push_back({"logprobs_at_ref", view_tensor(DType::float32, {n, k}, a.logprobs_at_ref, "logprobs_at_ref")});
  t.push_back({"other_logprob", view_tensor(DType::float32, {n}, a.other_logprob, "other_logprob")});
  t.push_back({"top1_id", view_tensor(DType::int32, {n}, a.top1_id, "top1_id")});
  t.push_back({"top1_logprob", view_tensor(DType::float32, {n}, a.top1_logprob, "top1_logprob")});
  t.push_back({"token_logprob", view_tensor(DType::float32, {n}, a.token_logprob, "token_logprob")});
  t.push_back({"flags", view_tensor(DType::uint8, {n}, a.flags, "flags")});
  if (!a.covered.empty()) t.push_back({"covered", view_tensor(DType::uint8, {n, k}, a.covered, "covered")});
  write_safetensors(path, t, md);
  return sum;
}

CandidateMeta candidate_meta_for(const Golden& g, const Provenance& made_by) {
  CandidateMeta m;
  m.k = g.meta.k;
  m.vocab = g.meta.vocab;
  m.n = g.meta.n;
  m.identity = g.meta.identity;
  m.golden_checksum = g.meta.checksum;
  m.made_by = made_by;
  return m;
}

void check_candidate_matches(const Golden& g, const Candidate& c) {
  const std::string& f = c.path;
  if (c.meta.k != g.meta.k)
    throw_input_error(f, "metadata k", std::to_string(g.meta.k), std::to_string(c.meta.k));
  if (c.meta.vocab != g.meta.vocab)
    throw_input_error(f, "metadata vocab", std::to_string(g.meta.vocab), std::to_string(c.meta.vocab));
  auto same = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b)
      throw_input_error(f, fmt::format("metadata {}", what), fmt::format("\"{}\" (the golden's)", a),
                        fmt::format("\"{}\"", b));
  };
  same("model", g.meta.identity.model, c.meta.identity.model);
  same("tokenizer", g.meta.identity.tokenizer, c.meta.identity.tokenizer);
  same("corpus", g.meta.identity.corpus, c.meta.identity.corpus);
  if (c.meta.position_begin + c.meta.n > g.meta.n)
    throw_input_error(f, "metadata positions",
                      fmt::format("a range within the golden's {} positions", g.meta.n),
                      fmt::format("[{}, {})", c.meta.position_begin, c.meta.position_begin + c.meta.n));
  if (c.meta.golden_checksum != g.meta.checksum)
    fail(
        "{}: metadata golden_checksum: expected {} (the checksum of {}), got {}: the candidate was made for "
        "another "
        "golden",
        f, g.meta.checksum, g.path, c.meta.golden_checksum.empty() ? "nothing" : c.meta.golden_checksum);
}

std::string metadata_checksum(const std::map<std::string, std::string>& md, std::uint64_t data_digest) {
  return seal(canonical_metadata(md), data_digest);
}

std::string corpus_identity_of_tokens(std::span<const std::int32_t> tokens) {
  return "tokens-sha256:" + sha256_hex(as_bytes(tokens));
}

std::string segments_to_json(const std::vector<Segment>& segs) {
  json arr = json::array();
  for (auto& s : segs) {
    json j = {{"name", s.name}, {"domain", s.domain}, {"depth", s.depth}, {"start", s.start}};
    if (!s.text.empty()) j["text"] = s.text;
    if (!s.offsets.empty()) j["offsets"] = s.offsets;
    arr.push_back(std::move(j));
  }
  return arr.dump();
}

std::vector<Segment> segments_from_json(const std::string& text, const std::string& file, std::int64_t n) {
  json arr;
  try {
    arr = json::parse(text);
  } catch (const json::exception& e) {
    throw_input_error(file, "metadata segments", "a JSON list of segments", "invalid JSON");
  }
  if (!arr.is_array() || arr.empty())
    throw_input_error(file, "metadata segments", "a non-empty JSON list", arr.type_name());
  if (arr.size() > (std::size_t{1} << 24))
    throw_input_error(file, "metadata segments", "at most 2^24 segments", std::to_string(arr.size()));
  std::vector<Segment> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const json& j = arr[i];
    std::string where = fmt::format("metadata segments[{}]", i);
    if (!j.is_object()) throw_input_error(file, where, "an object", j.type_name());
    Segment s;
    auto str = [&](const char* key, std::string& dst, bool required) {
      if (!j.contains(key)) {
        if (required) throw_input_error(file, where + "." + key, "a string", "nothing");
        return;
      }
      if (!j[key].is_string()) throw_input_error(file, where + "." + key, "a string", j[key].type_name());
      dst = j[key].get<std::string>();
    };
    auto num = [&](const char* key, std::int64_t& dst, bool required) {
      if (!j.contains(key)) {
        if (required) throw_input_error(file, where + "." + key, "an integer", "nothing");
        return;
      }
      if (!j[key].is_number_integer() || j[key].get<std::int64_t>() < 0)
        throw_input_error(file, where + "." + key, "an integer ≥ 0", j[key].dump().substr(0, 40));
      dst = j[key].get<std::int64_t>();
    };
    str("name", s.name, true);
    str("domain", s.domain, false);
    if (s.domain.empty()) s.domain = "prose";
    num("depth", s.depth, false);
    num("start", s.start, false);
    str("text", s.text, false);
    if (s.start > n)
      throw_input_error(file, where + ".start", fmt::format("≤ {}", n), std::to_string(s.start));
    if (j.contains("offsets")) {
      if (!j["offsets"].is_array())
        throw_input_error(file, where + ".offsets", "a list of integers", j["offsets"].type_name());
      for (auto& o : j["offsets"]) {
        if (!o.is_number_integer() || o.get<std::int64_t>() < 0 ||
            o.get<std::int64_t>() > static_cast<std::int64_t>(s.text.size()))
          throw_input_error(file, where + ".offsets", fmt::format("char offsets in [0, {}]", s.text.size()),
                            o.dump().substr(0, 40));
        s.offsets.push_back(o.get<std::int64_t>());
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kc
