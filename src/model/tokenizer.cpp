#include "model/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/gguf.h"

namespace kc {
namespace {

// ---------------------------------------------------------------------------------------- UTF-8
// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one (overlongs, surrogates and code
// points above U+10FFFF are invalid, as in Unicode's definition).
std::size_t utf8_len(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const std::size_t left = s.size() - i;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && (b(i + 1) & 0xC0) == 0x80 ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3) return 0;
    const unsigned char c1 = b(i + 1);
    const bool ok1 = c == 0xE0   ? (c1 >= 0xA0 && c1 <= 0xBF)
                     : c == 0xED ? (c1 >= 0x80 && c1 <= 0x9F)
                                 : (c1 & 0xC0) == 0x80;
    return ok1 && (b(i + 2) & 0xC0) == 0x80 ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4) return 0;
    const unsigned char c1 = b(i + 1);
    const bool ok1 = c == 0xF0   ? (c1 >= 0x90 && c1 <= 0xBF)
                     : c == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F)
                                 : (c1 & 0xC0) == 0x80;
    return ok1 && (b(i + 2) & 0xC0) == 0x80 && (b(i + 3) & 0xC0) == 0x80 ? 4 : 0;
  }
  return 0;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_len(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::uint32_t utf8_decode(std::string_view s, std::size_t i, std::size_t n) {
  const auto b = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(s[i + k]));
  };
  switch (n) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Bytes → valid UTF-8, each maximal invalid subpart replaced by U+FFFD (Rust's from_utf8_lossy, which
// HF's decode uses).
std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_len(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // Skip the longest prefix that could start a valid sequence (maximal subpart), at least one byte.
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                       : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4
                                                : 1;
    std::size_t k = 1;
    for (; k < need && i + k < s.size(); ++k) {
      const unsigned char ck = static_cast<unsigned char>(s[i + k]);
      bool ok = (ck & 0xC0) == 0x80;
      if (k == 1) {
        if (c == 0xE0) ok = ck >= 0xA0 && ck <= 0xBF;
        if (c == 0xED) ok = ck >= 0x80 && ck <= 0x9F;
        if (c == 0xF0) ok = ck >= 0x90 && ck <= 0xBF;
        if (c == 0xF4) ok = ck >= 0x80 && ck <= 0x8F;
      }
      if (!ok) break;
    }
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

// Unicode White_Space (Rust char::is_whitespace, used by HF for lstrip/rstrip of added tokens).
bool is_white_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// ----------------------------------------------------------------------------- byte-level alphabet
// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes map to
// U+0100.. in byte order, so every byte becomes one visible character.
struct ByteLevel {
  std::array<std::string, 256> enc;   // byte → UTF-8 of its character
  std::array<std::int16_t, 512> dec;  // code point (< 512) → byte, -1 if none
  ByteLevel() {
    dec.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const std::uint32_t cp = keep ? static_cast<std::uint32_t>(b) : static_cast<std::uint32_t>(256 + n++);
      utf8_append(enc[b], cp);
      dec[cp] = static_cast<std::int16_t>(b);
    }
  }
};
const ByteLevel& byte_level() {
  static const ByteLevel t;
  return t;
}

// ------------------------------------------------------------------------------------------ regex
// PCRE2 with UTF + UCP (Unicode \p{..}, \s, \w), JIT-compiled when the platform allows.
class Regex {
 public:
  Regex(const std::string& pattern, bool literal, const std::string& origin, const std::string& field) {
    int err = 0;
    PCRE2_SIZE off = 0;
    const std::uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);  // LITERAL refuses UCP
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &off,
                          nullptr);
    if (!code_) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof buf);
      throw_input_error(origin, field, "a valid regular expression",
                        fmt::format("{:?} ({} at offset {})", pattern, reinterpret_cast<char*>(buf), off));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls fn(start, end) for each successive non-overlapping match in s (s is valid UTF-8).
  template <typename Fn>
  void for_each_match(std::string_view s, Fn&& fn) const {
    thread_local Match m;
    pcre2_match_data* md = m.get(code_);
    std::size_t start = 0;
    std::uint32_t opts = 0;
    while (start <= s.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                                 opts | PCRE2_NO_UTF_CHECK, md, m.context());
      if (rc == PCRE2_ERROR_NOMATCH) {
        if (opts == 0 || start >= s.size()) break;
        start += std::max<std::size_t>(1, utf8_len(s, start));  // after an empty match: step one character
        opts = 0;
        continue;
      }
      if (rc < 0) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(rc, buf, sizeof buf);
        fail("tokenizer: pre-tokenizer regex: expected a match within PCRE2's limits, got \"{}\" on a piece of {} "
             "bytes",
             reinterpret_cast<char*>(buf), s.size());
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      fn(static_cast<std::size_t>(ov[0]), static_cast<std::size_t>(ov[1]));
      opts = ov[1] == ov[0] ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
      start = ov[1];
    }
  }

 private:
  // Per-thread match data and a JIT stack big enough for long whitespace runs (the default 32 KiB is not).
  struct Match {
    pcre2_match_data* md = nullptr;
    std::uint32_t pairs = 0;
    pcre2_match_context* mctx = nullptr;
    pcre2_jit_stack* stack = nullptr;
    ~Match() {
      pcre2_match_data_free(md);
      pcre2_match_context_free(mctx);
      pcre2_jit_stack_free(stack);
    }
    pcre2_match_data* get(const pcre2_code* code) {
      std::uint32_t n = 0;
      pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &n);
      if (!md || n + 1 > pairs) {
        pcre2_match_data_free(md);
        pairs = n + 1;
        md = pcre2_match_data_create(pairs, nullptr);
      }
      return md;
    }
    pcre2_match_context* context() {
      if (!mctx) {
        mctx = pcre2_match_context_create(nullptr);
        stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
        pcre2_jit_stack_assign(mctx, nullptr, stack);
      }
      return mctx;
    }
  };
  pcre2_code* code_ = nullptr;
};

// ------------------------------------------------------------------------------- pre-tokenization
enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct PreStep {
  enum class Kind { split, byte_level } kind = Kind::split;
  std::shared_ptr<const Regex> re;
  Behavior behavior = Behavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level
};

constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// HF's ByteLevel(use_regex=true) adds a final |\s+ (it changes nothing: unmatched gaps stay pieces).
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Splits `piece` per HF's NormalizedString::split: matches and gaps, then the behavior decides.
void split_piece(const PreStep& st, const std::string& piece, std::vector<std::string>& out) {
  struct Span {
    std::size_t b, e;
    bool m;
  };
  std::vector<Span> sp;
  std::size_t prev = 0;
  st.re->for_each_match(piece, [&](std::size_t b, std::size_t e) {
    if (b > prev) sp.push_back({prev, b, false});
    sp.push_back({b, e, true});
    prev = e;
  });
  if (prev < piece.size()) sp.push_back({prev, piece.size(), false});
  if (st.invert)
    for (auto& s : sp) s.m = !s.m;
  std::vector<Span> res;
  bool prev_match = false;
  switch (st.behavior) {
    case Behavior::removed:
      for (const auto& s : sp)
        if (!s.m) res.push_back(s);
      break;
    case Behavior::isolated:
      res = sp;
      break;
    case Behavior::merged_with_previous:
      for (const auto& s : sp) {
        if (s.m && !prev_match && !res.empty())
          res.back().e = s.e;
        else
          res.push_back(s);
        prev_match = s.m;
      }
      break;
    case Behavior::merged_with_next:
      for (auto it = sp.rbegin(); it != sp.rend(); ++it) {
        if (it->m && !prev_match && !res.empty())
          res.back().b = it->b;
        else
          res.push_back(*it);
        prev_match = it->m;
      }
      std::reverse(res.begin(), res.end());
      break;
    case Behavior::contiguous:
      for (std::size_t k = 0; k < sp.size(); ++k) {
        if (k > 0 && sp[k].m == prev_match)
          res.back().e = sp[k].e;
        else
          res.push_back(sp[k]);
        prev_match = sp[k].m;
      }
      break;
  }
  for (const auto& s : res)
    if (s.e > s.b) out.push_back(piece.substr(s.b, s.e - s.b));
}

struct Added {
  std::string content;
  std::int32_t id;
  bool special, lstrip, rstrip, normalized;
};

struct PairHash {
  std::size_t operator()(std::uint64_t k) const {
    return std::hash<std::uint64_t>()(k * 0x9E3779B97F4A7C15ull);
  }
};

}  // namespace

// ------------------------------------------------------------------------------------------- Impl
struct Tokenizer::Impl {
  std::string origin;
  std::string pre_name;
  std::vector<std::string> tokens;  // id → token string (byte-level alphabet; added tokens verbatim)
  std::vector<std::uint8_t> is_added, is_special;
  std::unordered_map<std::string, std::int32_t> vocab;  // base BPE vocabulary
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>, PairHash>
      merges;  // (a,b) → (rank, id)
  std::vector<PreStep> steps;
  std::vector<Added> added;
  std::int32_t unk = -1;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::int32_t bos = -1, eos = -1, pad = -1;
  bool add_bos = false;

  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache;

  void finish();
  void add_merge(std::string_view a, std::string_view b, std::size_t rank, const std::string& field);
  void bpe(const std::string& word_bytes, std::vector<std::int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
};

void Tokenizer::Impl::add_merge(std::string_view a, std::string_view b, std::size_t rank,
                                const std::string& field) {
  auto ia = vocab.find(std::string(a)), ib = vocab.find(std::string(b));
  auto im = vocab.find(std::string(a) + std::string(b));
  if (ia == vocab.end() || ib == vocab.end() || im == vocab.end())
    throw_input_error(origin, field, "a merge of two vocabulary tokens whose concatenation is a token",
                      fmt::format("{:?} + {:?}", std::string(a), std::string(b)));
  const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(ia->second)) << 32) |
                            static_cast<std::uint32_t>(ib->second);
  merges.emplace(key, std::make_pair(static_cast<std::int32_t>(rank), im->second));  // first rank wins
}

void Tokenizer::Impl::finish() {
  is_added.assign(tokens.size(), 0);
  is_special.assign(tokens.size(), 0);
  for (const auto& a : added) {
    is_added[a.id] = 1;
    is_special[a.id] = a.special;
  }
  // Longest first so the first hit at a position is the longest (leftmost-longest like HF's matcher).
  std::stable_sort(added.begin(), added.end(),
                   [](const Added& x, const Added& y) { return x.content.size() > y.content.size(); });
}

// BPE of one pre-tokenized piece (raw bytes) as HF's Word::merge_all: a min-heap of candidate merges by
// (rank, position); stale entries are skipped when popped.
void Tokenizer::Impl::bpe(const std::string& word_bytes, std::vector<std::int32_t>& out) const {
  const ByteLevel& bl = byte_level();
  std::string mapped;
  mapped.reserve(word_bytes.size() * 2);
  for (unsigned char c : word_bytes) mapped += bl.enc[c];
  if (ignore_merges) {
    auto it = vocab.find(mapped);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  struct Sym {
    std::int32_t id;
    std::int32_t prev, next;
    bool alive;
  };
  std::vector<Sym> sym;
  sym.reserve(word_bytes.size());
  std::string ch;
  for (std::size_t i = 0; i < mapped.size();) {
    const std::size_t n = std::max<std::size_t>(1, utf8_len(mapped, i));
    ch.assign(mapped, i, n);
    i += n;
    auto it = vocab.find(ch);
    std::int32_t id;
    if (it != vocab.end()) {
      id = it->second;
    } else if (unk >= 0) {
      if (fuse_unk && !sym.empty() && sym.back().id == unk) continue;
      id = unk;
    } else {
      continue;  // HF drops characters that are neither in the vocabulary nor covered by an unk token
    }
    const auto k = static_cast<std::int32_t>(sym.size());
    sym.push_back({id, k - 1, -1, true});
    if (k > 0) sym[k - 1].next = k;
  }
  struct Cand {
    std::int32_t rank, pos, id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  auto lookup = [&](std::int32_t a, std::int32_t b) -> const std::pair<std::int32_t, std::int32_t>* {
    auto it = merges.find((static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
                          static_cast<std::uint32_t>(b));
    return it == merges.end() ? nullptr : &it->second;
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (std::size_t k = 0; k + 1 < sym.size(); ++k)
    if (auto m = lookup(sym[k].id, sym[k + 1].id))
      heap.push({m->first, static_cast<std::int32_t>(k), m->second});
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    Sym& s = sym[c.pos];
    if (!s.alive || s.next < 0) continue;
    const auto m = lookup(s.id, sym[s.next].id);
    if (!m || m->second != c.id) continue;
    Sym& r = sym[s.next];
    s.id = c.id;
    r.alive = false;
    s.next = r.next;
    if (s.next >= 0) sym[s.next].prev = c.pos;
    if (s.prev >= 0)
      if (auto mp = lookup(sym[s.prev].id, s.id)) heap.push({mp->first, s.prev, mp->second});
    if (s.next >= 0)
      if (auto mn = lookup(s.id, sym[s.next].id)) heap.push({mn->first, c.pos, mn->second});
  }
  for (std::int32_t k = sym.empty() ? -1 : 0; k >= 0; k = sym[k].next) out.push_back(sym[k].id);
}

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  std::vector<std::string> pieces{std::string(text)}, next;
  for (const auto& st : steps) {
    next.clear();
    for (auto& p : pieces) {
      if (st.kind == PreStep::Kind::byte_level && st.add_prefix_space && p.front() != ' ')
        p.insert(p.begin(), ' ');
      if (st.re)
        split_piece(st, p, next);
      else
        next.push_back(std::move(p));
    }
    pieces.swap(next);
  }
  // Pieces repeat a lot (" the", "\n"): BPE results are cached, shared by all threads (bounded size).
  std::vector<std::int32_t> ids;
  for (const auto& p : pieces) {
    {
      std::lock_guard<std::mutex> lk(cache_mu);
      auto it = cache.find(p);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    ids.clear();
    bpe(p, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lk(cache_mu);
    if (cache.size() >= (1u << 18)) cache.clear();
    cache.emplace(p, ids);
  }
}

// ----------------------------------------------------------------------------------- public API
std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  if (auto bad = first_invalid_utf8(text))
    throw_input_error("text to tokenize", fmt::format("byte {}", *bad), "valid UTF-8",
                      fmt::format("0x{:02x}", static_cast<unsigned char>(text[*bad])));
  const Impl& im = *impl_;
  // Segments of the text: (begin, end, added-token id or -1). Two passes like HF: first the added
  // tokens matched on the raw text (normalized=false), then the normalized ones in what is left (there
  // is no normalizer, so both see the same text).
  struct Seg {
    std::size_t b, e;
    std::int32_t id;
  };
  std::vector<Seg> segs{{0, text.size(), -1}};
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<Seg> out;
    for (const Seg& sg : segs) {
      if (sg.id >= 0) {
        out.push_back(sg);
        continue;
      }
      std::size_t start = sg.b;  // start of the pending plain text
      std::size_t i = sg.b;
      while (i < sg.e) {
        const Added* hit = nullptr;
        for (const Added& a : im.added) {
          if (a.normalized != (pass == 1) || (a.special && !parse_special)) continue;
          if (a.content.size() <= sg.e - i && text.compare(i, a.content.size(), a.content) == 0) {
            hit = &a;
            break;
          }
        }
        if (!hit) {
          ++i;
          continue;
        }
        std::size_t b = i, e = i + hit->content.size();
        if (hit->lstrip) {  // absorb whitespace before the token (not before the pending start)
          while (b > start) {
            std::size_t p = b - 1;
            while (p > start && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
            if (!is_white_space(utf8_decode(text, p, b - p))) break;
            b = p;
          }
        }
        if (hit->rstrip) {
          while (e < sg.e) {
            const std::size_t n = utf8_len(text, e);
            if (!is_white_space(utf8_decode(text, e, n))) break;
            e += n;
          }
        }
        if (b > start) out.push_back({start, b, -1});
        out.push_back({b, e, hit->id});
        start = i = e;
      }
      if (sg.e > start) out.push_back({start, sg.e, -1});
    }
    segs.swap(out);
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  for (const Seg& sg : segs) {
    if (sg.id >= 0)
      ids.push_back(sg.id);
    else
      im.encode_plain(text.substr(sg.b, sg.e - sg.b), ids);
  }
  return ids;
}

std::string Tokenizer::decode_bytes(std::span<const std::int32_t> ids, bool skip_special) const {
  const Impl& im = *impl_;
  const ByteLevel& bl = byte_level();
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::int32_t id = ids[k];
    if (id < 0 || static_cast<std::size_t>(id) >= im.tokens.size())
      throw_input_error(im.origin, fmt::format("token id #{}", k),
                        fmt::format("an id in 0..{}", im.tokens.size() - 1), std::to_string(id));
    if (skip_special && im.is_special[id]) continue;
    // HF's ByteLevel decoder, added tokens included: a token whose characters are all in the byte
    // alphabet becomes those bytes; any other token is kept as its UTF-8 text.
    const std::string& t = im.tokens[id];
    const std::size_t mark = out.size();
    bool all_bytes = true;
    for (std::size_t i = 0; i < t.size() && all_bytes;) {
      const std::size_t n = utf8_len(t, i);
      const std::uint32_t cp = n ? utf8_decode(t, i, n) : 0xFFFFFFFF;
      if (cp < bl.dec.size() && bl.dec[cp] >= 0)
        out += static_cast<char>(bl.dec[cp]);
      else
        all_bytes = false;
      i += std::max<std::size_t>(1, n);
    }
    if (!all_bytes) {
      out.resize(mark);
      out += t;
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  return utf8_lossy(decode_bytes(ids, skip_special));
}

std::size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }
std::string_view Tokenizer::token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= impl_->tokens.size())
    throw_input_error(impl_->origin, "token id", fmt::format("an id in 0..{}", impl_->tokens.size() - 1),
                      std::to_string(id));
  return impl_->tokens[id];
}
std::optional<std::int32_t> Tokenizer::token_id(std::string_view t) const {
  for (const auto& a : impl_->added)
    if (a.content == t) return a.id;
  auto it = impl_->vocab.find(std::string(t));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}
bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->tokens.size() && impl_->is_special[id];
}
const std::string& Tokenizer::origin() const { return impl_->origin; }
const std::string& Tokenizer::pre_name() const { return impl_->pre_name; }
std::int32_t Tokenizer::bos_id() const { return impl_->bos; }
std::int32_t Tokenizer::eos_id() const { return impl_->eos; }
std::int32_t Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }

void check_vocab_size(const Tokenizer& tok, std::uint64_t model_vocab, std::string_view model_origin,
                      bool allow_padded_model) {
  const std::uint64_t n = tok.vocab_size();
  if (n == model_vocab || (allow_padded_model && n < model_vocab)) return;
  throw_input_error(tok.origin(), "tokenizer vocabulary size",
                    fmt::format("{}{} (the vocabulary of {})", allow_padded_model ? "at most " : "",
                                model_vocab, model_origin),
                    std::to_string(n));
}

// ---------------------------------------------------------------------------------------- GGUF
namespace {

std::vector<PreStep> regex_steps(std::initializer_list<const char*> patterns, const std::string& origin) {
  std::vector<PreStep> v;
  for (const char* p : patterns) {
    PreStep s;
    s.re = std::make_shared<Regex>(p, false, origin, "tokenizer.ggml.pre");
    v.push_back(std::move(s));
  }
  return v;
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& g) {
  auto im = std::make_shared<Impl>();
  im->origin = g.path();
  const std::string model(g.get_string("tokenizer.ggml.model"));
  if (model != "gpt2")
    throw_input_error(g.path(), "metadata 'tokenizer.ggml.model'",
                      "\"gpt2\" (byte-level BPE; the only kind supported)", fmt::format("{:?}", model));
  const std::string pre(g.find_string("tokenizer.ggml.pre").value_or("default"));
  im->pre_name = pre;
  // The regex lists of llama.cpp (llama-vocab.cpp) for these pre-tokenizer names.
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "codeshell" ||
      pre == "exaone" || pre == "minerva")
    im->steps = regex_steps({R"(\p{N})", kGpt2Regex}, im->origin);
  else if (pre == "gpt2" || pre == "gpt-2" || pre == "mpt" || pre == "olmo" || pre == "jais")
    im->steps = regex_steps({kGpt2Regex}, im->origin);
  else if (pre == "qwen2" || pre == "stablelm2")
    im->steps = regex_steps({kQwen2Regex}, im->origin);
  else if (pre == "llama-bpe" || pre == "llama3")
    im->steps = regex_steps({kLlama3Regex}, im->origin);
  else if (pre == "default")
    im->steps =
        regex_steps({R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}, im->origin);
  else
    throw_input_error(g.path(), "metadata 'tokenizer.ggml.pre'",
                      "one of smollm, gpt2, qwen2, llama-bpe, default (or a name sharing their regexes)",
                      fmt::format("{:?}", pre));

  const auto tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (tokens.empty() || tokens.size() > static_cast<std::size_t>(INT32_MAX))
    throw_input_error(g.path(), "metadata 'tokenizer.ggml.tokens'", "1 to 2^31-1 tokens",
                      std::to_string(tokens.size()));
  std::vector<std::int64_t> types;
  if (g.contains("tokenizer.ggml.token_type")) {
    types = g.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != tokens.size())
      throw_input_error(g.path(), "metadata 'tokenizer.ggml.token_type'",
                        fmt::format("{} entries (one per token)", tokens.size()),
                        std::to_string(types.size()));
  }
  im->tokens.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto id = static_cast<std::int32_t>(i);
    im->tokens.emplace_back(tokens[i]);
    const std::int64_t t = types.empty() ? 1 : types[i];
    // 3 CONTROL: special; 4 USER_DEFINED: matched in text even without parse_special (llama.cpp).
    if ((t == 3 || t == 4) && !tokens[i].empty() && !first_invalid_utf8(tokens[i]))
      im->added.push_back({std::string(tokens[i]), id, t == 3, false, false, false});
    else
      im->vocab.emplace(std::string(tokens[i]), id);  // first id wins for duplicate strings
  }
  // Merges refer to the BPE vocabulary, which for ids of added tokens is still their string.
  for (const auto& a : im->added) im->vocab.emplace(a.content, a.id);
  const auto merges = g.get_string_array("tokenizer.ggml.merges");
  im->merges.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const std::string_view m = merges[r];
    const std::size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos)
      throw_input_error(g.path(), fmt::format("metadata 'tokenizer.ggml.merges'[{}]", r), "\"left right\"",
                        fmt::format("{:?}", std::string(m)));
    im->add_merge(m.substr(0, sp), m.substr(sp + 1), r,
                  fmt::format("metadata 'tokenizer.ggml.merges'[{}]", r));
  }
  auto special = [&](const char* key) -> std::int32_t {
    const auto v = g.find_uint(key);
    if (!v) return -1;
    if (*v >= tokens.size())
      throw_input_error(g.path(), fmt::format("metadata '{}'", key),
                        fmt::format("a token id below {}", tokens.size()), std::to_string(*v));
    return static_cast<std::int32_t>(*v);
  };
  im->bos = special("tokenizer.ggml.bos_token_id");
  im->eos = special("tokenizer.ggml.eos_token_id");
  im->pad = special("tokenizer.ggml.padding_token_id");
  special("tokenizer.ggml.unknown_token_id");  // validated; byte-level BPE never needs it
  im->add_bos = g.find_bool("tokenizer.ggml.add_bos_token").value_or(false);
  im->finish();
  Tokenizer t;
  t.impl_ = std::move(im);
  return t;
}

// ----------------------------------------------------------------------------------- tokenizer.json
namespace {

using json = nlohmann::json;

const json& member(const json& j, const char* key, const std::string& origin, const std::string& field) {
  if (!j.is_object() || !j.contains(key))
    throw_input_error(origin, field + "." + key, "a member of that name", "none");
  return j.at(key);
}

bool opt_bool(const json& j, const char* key, bool dflt, const std::string& origin,
              const std::string& field) {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  if (!j.at(key).is_boolean())
    throw_input_error(origin, field + "." + key, "true or false", j.at(key).dump());
  return j.at(key).get<bool>();
}

std::string type_of(const json& j, const std::string& origin, const std::string& field) {
  const json& t = member(j, "type", origin, field);
  if (!t.is_string()) throw_input_error(origin, field + ".type", "a string", t.dump());
  return t.get<std::string>();
}

void parse_pre(const json& j, const std::string& origin, const std::string& field,
               std::vector<PreStep>& steps) {
  if (j.is_null()) return;
  const std::string type = type_of(j, origin, field);
  if (type == "Sequence") {
    const json& list = member(j, "pretokenizers", origin, field);
    if (!list.is_array()) throw_input_error(origin, field + ".pretokenizers", "an array", list.dump());
    for (std::size_t k = 0; k < list.size(); ++k)
      parse_pre(list[k], origin, fmt::format("{}.pretokenizers[{}]", field, k), steps);
  } else if (type == "ByteLevel") {
    PreStep s;
    s.kind = PreStep::Kind::byte_level;
    s.add_prefix_space = opt_bool(j, "add_prefix_space", true, origin, field);
    if (opt_bool(j, "use_regex", true, origin, field))
      s.re = std::make_shared<Regex>(kByteLevelRegex, false, origin, field);
    steps.push_back(std::move(s));
  } else if (type == "Digits") {
    PreStep s;
    const bool individual = opt_bool(j, "individual_digits", false, origin, field);
    s.re = std::make_shared<Regex>(individual ? R"(\p{N})" : R"(\p{N}+)", false, origin, field);
    steps.push_back(std::move(s));
  } else if (type == "Split") {
    PreStep s;
    const json& pat = member(j, "pattern", origin, field);
    const bool is_regex = pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string();
    const bool is_string = pat.is_object() && pat.contains("String") && pat["String"].is_string();
    if (!is_regex && !is_string)
      throw_input_error(origin, field + ".pattern", "{\"Regex\": …} or {\"String\": …}", pat.dump());
    s.re = std::make_shared<Regex>(pat[is_regex ? "Regex" : "String"].get<std::string>(), is_string, origin,
                                   field + ".pattern");
    const json& beh = member(j, "behavior", origin, field);
    const std::string b = beh.is_string() ? beh.get<std::string>() : "";
    if (b == "Removed")
      s.behavior = Behavior::removed;
    else if (b == "Isolated")
      s.behavior = Behavior::isolated;
    else if (b == "MergedWithPrevious")
      s.behavior = Behavior::merged_with_previous;
    else if (b == "MergedWithNext")
      s.behavior = Behavior::merged_with_next;
    else if (b == "Contiguous")
      s.behavior = Behavior::contiguous;
    else
      throw_input_error(origin, field + ".behavior",
                        "Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous", beh.dump());
    s.invert = opt_bool(j, "invert", false, origin, field);
    steps.push_back(std::move(s));
  } else {
    throw_input_error(origin, field + ".type",
                      "ByteLevel, Split, Digits or Sequence (byte-level BPE pre-tokenizers)",
                      fmt::format("{:?}", type));
  }
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json(const std::string& path) {
  return from_json_text(read_text_file(path, kDataTextCap, "a tokenizer.json"), path);
}

Tokenizer Tokenizer::from_json_text(std::string_view text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw_input_error(origin, "", "a JSON document (tokenizer.json)", e.what());
  }
  if (!j.is_object()) throw_input_error(origin, "", "a JSON object", j.type_name());
  auto im = std::make_shared<Impl>();
  im->origin = origin;
  im->pre_name = "tokenizer.json";

  const json& model = member(j, "model", origin, "");
  const std::string mtype =
      model.is_object() && model.contains("type") ? type_of(model, origin, "model") : "BPE";
  if (mtype != "BPE") throw_input_error(origin, "model.type", "\"BPE\"", fmt::format("{:?}", mtype));
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(k) && !model[k].is_null() &&
        !(model[k].is_string() && model[k].get<std::string>().empty()))
      throw_input_error(origin, fmt::format("model.{}", k), "null (byte-level BPE)", model[k].dump());
  if (opt_bool(model, "byte_fallback", false, origin, "model"))
    throw_input_error(origin, "model.byte_fallback", "false (byte-level BPE)", "true");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    throw_input_error(origin, "model.dropout", "null (deterministic encoding)", model["dropout"].dump());
  im->fuse_unk = opt_bool(model, "fuse_unk", false, origin, "model");
  im->ignore_merges = opt_bool(model, "ignore_merges", false, origin, "model");

  const json& vocab = member(model, "vocab", origin, "model");
  if (!vocab.is_object())
    throw_input_error(origin, "model.vocab", "an object {token: id}", vocab.type_name());
  std::size_t n = 0;
  auto check_id = [&](const json& v, const std::string& field) -> std::int32_t {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= (1 << 24))
      throw_input_error(origin, field, "a token id in 0..2^24-1", v.dump());
    return v.get<std::int32_t>();
  };
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::int32_t id = check_id(it.value(), fmt::format("model.vocab[{:?}]", it.key()));
    im->vocab.emplace(it.key(), id);
    n = std::max(n, static_cast<std::size_t>(id) + 1);
  }
  const json* added =
      j.contains("added_tokens") && !j["added_tokens"].is_null() ? &j["added_tokens"] : nullptr;
  if (added && !added->is_array()) throw_input_error(origin, "added_tokens", "an array", added->type_name());
  if (added) {
    for (std::size_t k = 0; k < added->size(); ++k) {
      const json& a = (*added)[k];
      const std::string field = fmt::format("added_tokens[{}]", k);
      const json& content = member(a, "content", origin, field);
      if (!content.is_string() || content.get<std::string>().empty())
        throw_input_error(origin, field + ".content", "a non-empty string", content.dump());
      const std::int32_t id = check_id(member(a, "id", origin, field), field + ".id");
      if (opt_bool(a, "single_word", false, origin, field))
        throw_input_error(origin, field + ".single_word",
                          "false (single_word added tokens are not supported)", "true");
      const bool special = opt_bool(a, "special", false, origin, field);
      im->added.push_back(
          {content.get<std::string>(), id, special, opt_bool(a, "lstrip", false, origin, field),
           opt_bool(a, "rstrip", false, origin, field), opt_bool(a, "normalized", !special, origin, field)});
      n = std::max(n, static_cast<std::size_t>(id) + 1);
    }
  }
  im->tokens.assign(n, std::string());
  for (const auto& [t, id] : im->vocab) im->tokens[id] = t;
  for (const auto& a : im->added) im->tokens[a.id] = a.content;
  // Added tokens that the model vocabulary already holds decode through the byte-level alphabet in HF
  // only when they are not added; HF's decoder emits added-token content verbatim, as we do.

  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    const std::string u = model["unk_token"].is_string() ? model["unk_token"].get<std::string>() : "";
    auto it = im->vocab.find(u);
    if (it == im->vocab.end())
      throw_input_error(origin, "model.unk_token", "a token of the vocabulary", model["unk_token"].dump());
    im->unk = it->second;
  }

  const json& merges = member(model, "merges", origin, "model");
  if (!merges.is_array()) throw_input_error(origin, "model.merges", "an array", merges.type_name());
  im->merges.reserve(merges.size());
  for (std::size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    const std::string field = fmt::format("model.merges[{}]", r);
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const std::size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw_input_error(origin, field, "\"left right\" (one space)", m.dump());
      im->add_merge(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1), r, field);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      im->add_merge(m[0].get<std::string>(), m[1].get<std::string>(), r, field);
    } else {
      throw_input_error(origin, field, "\"left right\" or [\"left\", \"right\"]", m.dump());
    }
  }

  if (j.contains("normalizer") && !j["normalizer"].is_null())
    throw_input_error(origin, "normalizer", "null (normalizers are not supported)",
                      j["normalizer"].is_object() && j["normalizer"].contains("type")
                          ? j["normalizer"]["type"].dump()
                          : j["normalizer"].dump());
  parse_pre(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), origin, "pre_tokenizer", im->steps);
  const auto bl = std::find_if(im->steps.begin(), im->steps.end(),
                               [](const PreStep& s) { return s.kind == PreStep::Kind::byte_level; });
  if (bl == im->steps.end() || bl + 1 != im->steps.end())
    throw_input_error(origin, "pre_tokenizer",
                      "a ByteLevel pre-tokenizer, last in its Sequence (byte-level BPE)",
                      bl == im->steps.end() ? "none" : "steps after ByteLevel");
  if (j.contains("decoder") && !j["decoder"].is_null()) {
    const std::string d = type_of(j["decoder"], origin, "decoder");
    if (d != "ByteLevel") throw_input_error(origin, "decoder.type", "\"ByteLevel\"", fmt::format("{:?}", d));
  }
  auto find_added = [&](std::initializer_list<const char*> names) -> std::int32_t {
    for (const char* nm : names)
      for (const auto& a : im->added)
        if (a.content == nm) return a.id;
    return -1;
  };
  im->bos = find_added({"<|begin_of_text|>", "<s>", "<|startoftext|>"});
  im->eos = find_added({"<|endoftext|>", "<|end_of_text|>", "</s>", "<|im_end|>"});
  im->pad = find_added({"<|pad|>", "<pad>"});
  im->finish();
  Tokenizer t;
  t.impl_ = std::move(im);
  return t;
}

}  // namespace kc
