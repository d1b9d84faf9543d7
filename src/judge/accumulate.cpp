// The judge's inputs and its one pass over them: a candidate file or full logits opened against the
// golden (open_candidate_input), and every position scored and accumulated (accumulate), with the deferred
// checks of both files in the same pass. The verdict is judge.cpp.
#include "judge/judge.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#include <memory>
#include <numeric>
#include <span>

#include "core/error.h"
#include "core/parallel.h"
#include "model/variant.h"
#include "io/safetensors.h"
#include "numeric/fastmath.h"

// The per-position loops are plain loops that GCC vectorises; it picks 256-bit vectors on this CPU by
// default (-mprefer-vector-width=256), half the lanes AVX-512 has for them.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace kc {

// ---- inputs ------------------------------------------------------------------------------------------
namespace {

bool is_candidate_file(const std::string& path) {
  auto f = MappedFile::open(path);
  auto b = f->bytes();
  if (b.size() < 8) return false;
  std::uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<std::uint64_t>(b[i]) << (8 * i);
  if (hl == 0 || hl > b.size() - 8 || b[8] != '{') return false;
  std::string_view header(reinterpret_cast<const char*>(b.data() + 8), hl);
  return header.find("\"kerncheck.format\"") != std::string_view::npos;
}

Logits slice_rows(const Logits& L, std::int64_t begin, std::int64_t end) {
  Logits s = L;
  std::size_t row_bytes = storage_bytes(L.t.dtype, L.vocab);
  s.t.bytes = L.t.bytes.subspan(begin * row_bytes, (end - begin) * row_bytes);
  s.t.shape = {end - begin, L.vocab};
  s.n = end - begin;
  return s;
}

template <typename T>
std::span<const T> sub(std::span<const T> s, std::int64_t off, std::int64_t n, std::int64_t per) {
  if (s.empty()) return s;
  return s.subspan(off * per, n * per);
}

}  // namespace

CandidateInput open_candidate_input(const std::string& path, const Golden& g,
                                    std::optional<std::pair<std::int64_t, std::int64_t>> range, bool defer) {
  CandidateInput ci;
  ci.path = path;
  const std::int64_t N = g.meta.n;
  if (range && (range->first < 0 || range->second > N || range->first >= range->second))
    fail("--positions: expected a range within [0, {}), got [{}, {})", N, range->first, range->second);
  if (is_candidate_file(path)) {
    ci.cand = read_candidate(path, defer);
    check_candidate_matches(g, ci.cand);
    std::int64_t cb = ci.cand.meta.position_begin, ce = cb + ci.cand.meta.n;
    std::int64_t b = range ? range->first : cb, e = range ? range->second : ce;
    if (b < cb || e > ce)
      throw_input_error(path, "positions",
                        fmt::format("a candidate covering golden positions [{}, {})", b, e),
                        fmt::format("[{}, {})", cb, ce));
    if (!range && (cb != 0 || ce != N))
      throw_input_error(path, "positions",
                        fmt::format("all {} positions of the golden (or pass --positions / --partial)", N),
                        fmt::format("positions [{}, {})", cb, ce));
    const std::int64_t k = g.meta.k, off = b - cb, n = e - b;
    CandidateArrays& a = ci.cand.a;
    a.logprobs_at_ref = sub(a.logprobs_at_ref, off, n, k);
    a.other_logprob = sub(a.other_logprob, off, n, 1);
    a.top1_id = sub(a.top1_id, off, n, 1);
    a.top1_logprob = sub(a.top1_logprob, off, n, 1);
    a.token_logprob = sub(a.token_logprob, off, n, 1);
    a.flags = sub(a.flags, off, n, 1);
    a.covered = sub(a.covered, off, n, k);
    ci.begin = b;
    ci.n = n;
    return ci;
  }
  // Logits are turned into a candidate from the golden's rows here: they must be checked first.
  if (g.pending && !g.pending->done()) g.pending->verify_all();
  Logits L = open_logits(path);
  std::int64_t b = range ? range->first : 0, e = range ? range->second : N;
  if (L.n == N && (b != 0 || e != N))
    L = slice_rows(L, b, e);
  else if (L.n != e - b)
    throw_input_error(
        path, "shape",
        fmt::format("[{}, {}] logits (the golden's positions [{}, {}))", e - b, g.meta.vocab, b, e),
        L.t.shape_str());
  ci.buffers = record_candidate(L, g, b, e);
  ci.in_memory = true;
  ci.logits = L;
  ci.begin = b;
  ci.n = e - b;
  return ci;
}

// ---- accumulation ------------------------------------------------------------------------------------
namespace {

std::vector<std::string> domain_list(const Golden& g, std::vector<std::uint8_t>& seg_domain) {
  const GoldenMeta& m = g.meta;
  std::vector<std::string> doms;
  seg_domain.clear();
  for (auto& s : m.segments) {
    auto it = std::find(doms.begin(), doms.end(), s.domain);
    if (it == doms.end()) {
      if (doms.size() == 255)
        throw_input_error(g.path, "metadata segments", "at most 255 distinct domains", "more");
      doms.push_back(s.domain);
      it = doms.end() - 1;
    }
    seg_domain.push_back(static_cast<std::uint8_t>(it - doms.begin()));
  }
  return doms;
}

WorstPosition worst_detail(const Golden& g, const CandidateArrays& a, std::int64_t gi, std::int64_t i,
                           const PositionRecord& r) {
  const int k = g.meta.k;
  WorstPosition w;
  w.position = gi;
  w.kl = r.nonfinite ? INFINITY : r.score.kl;
  w.margin = r.margin;
  w.flip = r.flip;
  w.segment = r.segment;
  w.token = g.a.token[gi];
  for (int j = 0; j < 3 && j < k; ++j) {
    w.ref_ids[j] = g.a.top_ids[gi * k + j];
    w.ref_logprobs[j] = g.a.top_logprobs[gi * k + j];
  }
  // Candidate top-3 among the reference top-k and the candidate's own top-1.
  std::vector<std::pair<float, std::int32_t>> c;
  c.emplace_back(a.top1_logprob[i], a.top1_id[i]);
  for (int j = 0; j < k; ++j)
    if (a.covered.empty() || a.covered[i * k + j])
      c.emplace_back(a.logprobs_at_ref[i * k + j], g.a.top_ids[gi * k + j]);
  std::sort(c.begin(), c.end(), [](auto& x, auto& y) {
    bool xn = std::isnan(x.first), yn = std::isnan(y.first);
    if (xn != yn) return yn;
    return x.first != y.first ? x.first > y.first : x.second < y.second;
  });
  c.erase(std::unique(c.begin(), c.end(), [](auto& x, auto& y) { return x.second == y.second; }), c.end());
  for (int j = 0; j < 3 && j < static_cast<int>(c.size()); ++j) {
    w.cand_ids[j] = c[j].second;
    w.cand_logprobs[j] = c[j].first;
  }
  return w;
}

// The fast path (every id covered, no full logits): blocks of positions as structure of arrays, the KL
// of 16 rows at a time (score_topk_rows), sums by runs of one cell (JudgeAccumulator::add_block).
// sample_cut: only positions whose hash is below it may enter the plot sample (see accumulate()).
// Deferred checks (gchk: golden rows, cchk: candidate file rows, candidate row i = file row coff + i):
// each group of kCheckRows positions is hashed and checked right before it is scored, while it is in cache;
// the unchecked rows are only read within bounds here (segment and phase are clamped) and nothing is
// reported before the checks finish.
constexpr std::size_t kCheckRows = 2048;  // ~570 kB of both files at k = 20 (279 B a position): stays in L2

// Element j of n rows of k 4-byte elements (row t at p + t·k; here the reference top-1 ids when the golden
// was read without Golden::top1): one AVX-512 gather per 16 rows where the build has it (GCC's cost model
// will not emit gathers for this strided loop, and its scalar loads were a tenth of the per-position work).
template <typename T>
inline void strided_column(const T* p, std::int64_t k, int n, T* out) {
  static_assert(sizeof(T) == 4);
  int t = 0;
#ifdef __AVX512F__
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(k)));  // k ≤ 4096
  for (; t + 16 <= n; t += 16) _mm512_storeu_si512(out + t, _mm512_i32gather_epi32(idx, p + t * k, 4));
#endif
  for (; t < n; ++t) out[t] = p[t * k];
}

// A candidate's token_logprob is its log-prob of the golden's token: where that token is among the golden's
// top-k (column j) and the candidate reported column j (covered, not NaN), the two must agree up to
// rounding, |token_logprob − logprobs_at_ref[j]| ≤ kTokenTol · (1 + |logprobs_at_ref[j]|). NaN (unknown)
// and broken rows are left to the other checks; −inf = −inf agrees.
constexpr float kTokenTol = 1e-3f;

// The golden's column holding the token in row gi, or -1.
inline int token_column(const Golden& g, std::int64_t gi) {
  const int k = g.meta.k;
  const std::int32_t* ids = g.a.top_ids.data() + gi * k;
  const std::int32_t tok = g.a.token[gi];
#ifdef __AVX512F__
  const __m512i t = _mm512_set1_epi32(tok);
  for (int j0 = 0; j0 < k; j0 += 16) {
    const __mmask16 m = static_cast<__mmask16>((1u << std::min(16, k - j0)) - 1);
    if (const __mmask16 hit = _mm512_mask_cmpeq_epi32_mask(m, _mm512_maskz_loadu_epi32(m, ids + j0), t))
      return j0 + std::countr_zero(static_cast<unsigned>(hit));
  }
  return -1;
#else
  for (int j = 0; j < k; ++j)
    if (ids[j] == tok) return j;
  return -1;
#endif
}

// Candidate row i (golden row gi) breaks the rule above.
inline bool token_inconsistent(const Golden& g, const CandidateArrays& a, std::int64_t gi, std::int64_t i) {
  if ((a.flags[i] & (kFlagsBroken | kFlagTokenUnknown)) != 0) return false;
  const int j = token_column(g, gi);
  const int k = g.meta.k;
  if (j < 0 || (!a.covered.empty() && a.covered[i * k + j] == 0)) return false;
  const float tc = a.token_logprob[i], lq = a.logprobs_at_ref[i * k + j];
  return std::fabs(tc - lq) > kTokenTol * (1 + std::fabs(lq));  // false for NaN; −inf − (−inf) is NaN
}

[[noreturn]] void throw_token_inconsistent(const Golden& g, const CandidateInput& ci, std::int64_t gi,
                                           std::int64_t i) {
  const CandidateArrays a = ci.arrays();
  const int k = g.meta.k, j = token_column(g, gi);
  const std::int64_t row = ci.begin - ci.cand.meta.position_begin + i;  // in the candidate file
  throw_input_error(ci.path, fmt::format("token_logprob[{}]", row),
                    fmt::format("{} ± {:.2g} (its own logprobs_at_ref[{}, {}] at the golden's token {})",
                                a.logprobs_at_ref[i * k + j], kTokenTol * (1 + std::fabs(a.logprobs_at_ref[i * k + j])),
                                row, j, g.a.token[gi]),
                    fmt::format("{}", a.token_logprob[i]));
}

void accumulate_blocks(const Golden& g, const CandidateArrays& a, const std::vector<std::uint8_t>& seg_domain,
                       std::int64_t begin, std::size_t b, std::size_t e, std::uint64_t sample_cut,
                       JudgeAccumulator& acc, DeferredCheck* gchk = nullptr, DeferredCheck* cchk = nullptr,
                       std::int64_t coff = 0, std::int64_t* token_bad = nullptr) {
  const int k = g.meta.k;
  const std::uint32_t max_seg = static_cast<std::uint32_t>(seg_domain.size() - 1);
  acc.sample_cut = sample_cut;
  auto blk = std::make_unique<PositionBlock>();  // zeroed: lane loops may read the padding
  PositionBlock& B = *blk;
  const float* glp = g.a.top_logprobs.data();
  const float* clp = a.logprobs_at_ref.data();
  for (std::size_t i0 = b; i0 < e; i0 += PositionBlock::kMax) {
    const int n = static_cast<int>(std::min<std::size_t>(PositionBlock::kMax, e - i0));
    const std::int64_t g0 = begin + static_cast<std::int64_t>(i0);
    if ((gchk || cchk) && (i0 - b) % kCheckRows == 0) {
      const std::size_t i1 = std::min(e, i0 + kCheckRows);
      // The golden's top-k mass is checked below from the scores (they sum it anyway).
      if (gchk) gchk->rows_but_mass(g0, begin + static_cast<std::int64_t>(i1));
      if (cchk) cchk->rows(coff + static_cast<std::int64_t>(i0), coff + static_cast<std::int64_t>(i1));
    }
    B.n = n;
    B.position0 = g0;
    RowScores rs;
    bool mass_over = false;  // a golden row's top-k mass > 1 + kTopkMassTol (gchk's check)
    alignas(64) std::int32_t ref1[PositionBlock::kMax];  // golden top-1 ids when g.top1 is empty
    for (int r0 = 0; r0 < n; r0 += kScoreRows) {
      const int rows = std::min(kScoreRows, n - r0);
      // The gathers of score_topk_rows wait for 16 rows at once: fetch the rows two groups ahead.
      if (const std::size_t ahead = i0 + r0 + 2 * kScoreRows; ahead + kScoreRows <= e) {
        for (int off = 0; off < kScoreRows * k; off += 16) {
          __builtin_prefetch(glp + (begin + static_cast<std::int64_t>(ahead)) * k + off);
          __builtin_prefetch(clp + ahead * k + off);
        }
        if (g.top1.empty())  // the reference top-1 ids (the flips below)
          for (int r = 0; r < kScoreRows; ++r)
            __builtin_prefetch(g.a.top_ids.data() + (begin + static_cast<std::int64_t>(ahead) + r) * k);
      }
      if (g.top1.empty()) strided_column(g.a.top_ids.data() + (g0 + r0) * k, k, rows, ref1 + r0);
      score_topk_rows(glp + (g0 + r0) * k, &g.a.other_logprob[g0 + r0], clp + (i0 + r0) * k,
                      &a.other_logprob[i0 + r0], k, rows, rs);
      for (int r = 0; r < rows; ++r) {
        B.kl[r0 + r] = rs.kl[r];
        B.sigma2[r0 + r] = rs.sigma2[r];
        B.mass[r0 + r] = rs.mass[r];
        mass_over |= static_cast<float>(rs.mass[r]) > 1.0f + kTopkMassTol;  // an f32 sum: exact
        B.clamped[r0 + r] = rs.q_other_clamped[r];
        // k = 1 has no second log-prob: the margin is unknown (NaN counts as a tie).
        B.margin[r0 + r] = k >= 2 ? static_cast<double>(rs.lp0[r]) - static_cast<double>(rs.lp1[r])
                                  : static_cast<double>(NAN);
      }
    }
    if (mass_over && gchk) gchk->refuse();
    if (token_bad && *token_bad < 0)  // the first row of the chunk that breaks token_inconsistent's rule
      for (int t = 0; t < n; ++t)
        if (token_inconsistent(g, a, g0 + t, static_cast<std::int64_t>(i0) + t)) {
          *token_bad = static_cast<std::int64_t>(i0) + t;
          break;
        }
    // Per-position fields in plain loops (each one vectorised).
    const std::int32_t* seg = g.a.segment.data() + g0;
    const std::uint8_t* ph = g.a.phase.data() + g0;
    const std::int32_t* dep = g.a.depth.data() + g0;
    const std::uint8_t* fl = a.flags.data() + i0;
    const std::int32_t* c1 = a.top1_id.data() + i0;
    std::memcpy(B.segment, seg, n * sizeof(std::int32_t));
    std::memcpy(B.depth, dep, n * sizeof(std::int32_t));
    std::memcpy(B.phase, ph, n);
    // Clamped: the identity on checked rows, within bounds on rows a deferred check will refuse.
    for (int t = 0; t < n; ++t)
      B.domain[t] = seg_domain[std::min(static_cast<std::uint32_t>(seg[t]), max_seg)];
    for (int t = 0; t < n; ++t) {
      const std::int32_t d = dep[t];  // depth_bucket of a 32-bit depth (≤ 32 < kDepthBuckets)
      const std::int32_t bucket = d > 0 ? 32 - std::countl_zero(static_cast<std::uint32_t>(d)) : 0;
      B.cell[t] = (B.domain[t] * kDepthBuckets + bucket) * kPhases + (ph[t] & 1);
    }
    for (int t = 0; t < n; ++t) B.finite[t] = !(fl[t] & kFlagsBroken) & (B.kl[t] - B.kl[t] == 0);
    if (!g.top1.empty()) {
      const std::int32_t* r1 = g.top1.data() + g0;
      for (int t = 0; t < n; ++t) B.flip[t] = c1[t] != r1[t];
    } else {
      for (int t = 0; t < n; ++t) B.flip[t] = c1[t] != ref1[t];
    }
    // Tie flips: the candidate's log-prob of its own top-1 equals its log-prob of the reference's (column 0).
    alignas(64) float lq0[PositionBlock::kMax];
    strided_column(clp + i0 * k, k, n, lq0);
    const float* c1lp = a.top1_logprob.data() + i0;
    for (int t = 0; t < n; ++t) B.tie[t] = B.flip[t] & (c1lp[t] == lq0[t]);
    // Token log-probs: the two f64 exps in plain loops (vectorised), then the selection.
    const float* tcp = a.token_logprob.data() + i0;
    const float* trp = g.a.token_logprob.data() + g0;
    for (int t = 0; t < n; ++t) B.nll_cand[t] = fastmath::exp_f64(static_cast<double>(tcp[t]));
    for (int t = 0; t < n; ++t) B.nll_ref[t] = fastmath::exp_f64(static_cast<double>(trp[t]));
    for (int t = 0; t < n; ++t) {
      const double tc = tcp[t], tr = trp[t];
      const bool known = (fl[t] & kFlagTokenUnknown) == 0;
      const double dp = B.nll_cand[t] - B.nll_ref[t];
      // NaN or ±inf anywhere (an unknown token log-prob is NaN) leaves the position out of the token
      // statistics; a known one that is ±inf (p = 0 for the corpus token: infinite perplexity) makes the
      // position non-finite, counted like a NaN row, never just dropped.
      const bool ok = known & (dp - dp == 0) & (tc - tc == 0) & (tr - tr == 0);
      B.finite[t] &= !(known & (tc == tc) & (tr == tr) & !ok);
      B.token[t] = ok;
      B.delta_p[t] = ok ? dp : 0.0;
      B.nll_cand[t] = ok ? -tc : 0.0;
      B.nll_ref[t] = ok ? -tr : 0.0;
    }
    acc.add_block(B);
    // Worst positions: a full list only takes KL ≥ its last entry's (a cheap test per position).
    double worst_min = acc.worst.size() < acc.worst_cap ? -INFINITY : acc.worst.back().kl;
    // Most blocks hold no candidate once the list is full: test the whole block first (a vector loop).
    bool any = worst_min == -INFINITY;
    for (int t = 0; t < n; ++t) any |= !B.finite[t] | (B.kl[t] >= worst_min);
    for (int t = 0; any && t < n; ++t) {
      const std::int64_t gi = g0 + t;
      const double wkl = B.finite[t] ? B.kl[t] : INFINITY;
      if (!(wkl >= worst_min) || !acc.wants_worst(wkl, gi)) continue;
      PositionRecord r;
      r.position = gi;
      r.segment = B.segment[t];
      r.nonfinite = !B.finite[t];
      r.score.kl = B.kl[t];
      r.flip = B.flip[t];
      r.margin = B.margin[t];
      acc.offer_worst(worst_detail(g, a, gi, static_cast<std::int64_t>(i0) + t, r));
      worst_min = acc.worst.size() < acc.worst_cap ? -INFINITY : acc.worst.back().kl;
    }
  }
  acc.finish_blocks();
}

// The plot sample keeps the kSample smallest position hashes of the n positions judged. The hashes are
// uniform, so about kSample · 2^64 / n bounds them: a cut with a margin of over 20 standard deviations lets
// the chunks collect ~10 % more points than needed instead of a moving cut's ~3.5× (and its trims).
// accumulate() checks the result and runs again without the cut in the (never seen) case it was too tight.
std::uint64_t sample_prefilter(std::int64_t n) {
  const double want = 1.1 * JudgeAccumulator::kSample + 1000;
  if (n <= 0 || 2 * want >= static_cast<double>(n)) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(want / static_cast<double>(n) * 0x1p64);
}

}  // namespace

JudgeAccumulator accumulate(const Golden& g, const CandidateInput& ci, const Logits* ref, std::size_t worst) {
  if (worst < 1 || worst > JudgeAccumulator::kWorstMax)
    fail("--worst: expected a count of worst positions in 1 … {}, got {}", JudgeAccumulator::kWorstMax, worst);
  std::vector<std::uint8_t> seg_domain;
  std::vector<std::string> doms = domain_list(g, seg_domain);
  const int k = g.meta.k;
  const int n_seg = static_cast<int>(g.meta.segments.size());
  const CandidateArrays a = ci.arrays();
  const std::int64_t begin = ci.begin, n = ci.n;
  const bool full = ref && ci.logits;
  if (ref && ref->n != g.meta.n)
    throw_input_error(ref->t.origin, "shape",
                      fmt::format("[{}, {}] (every golden position)", g.meta.n, g.meta.vocab),
                      ref->t.shape_str());
  if (ref && ref->vocab != g.meta.vocab)
    throw_input_error(ref->t.origin, "shape", fmt::format("[{}, {}]", g.meta.n, g.meta.vocab),
                      ref->t.shape_str());
  // Fixed chunks (the same answer for any thread count) of 2^16 positions: 31 for the 2 M-position bench,
  // so 16 threads have work (2^18 left 8 chunks: no gain past 8 threads). Each chunk's plot sample is kept
  // small by the prefilter cut, which scales with n, not with the chunk.
  const std::size_t chunk = std::size_t{1} << 16;
  const bool blocks = !full && a.covered.empty();
  // Files read with deferred verification: checked during the fast path's pass (one read of each file),
  // else up front. Golden before candidate, as the readers would.
  DeferredCheck* gchk = g.pending && !g.pending->done() ? g.pending.get() : nullptr;
  DeferredCheck* cchk =
      !ci.in_memory && ci.cand.pending && !ci.cand.pending->done() ? ci.cand.pending.get() : nullptr;
  if (!blocks || n == 0) {
    if (gchk) gchk->verify_all();
    if (cchk) cchk->verify_all();
    gchk = cchk = nullptr;
  }
  const std::int64_t coff = ci.in_memory ? 0 : ci.begin - ci.cand.meta.position_begin;
  std::vector<JudgeAccumulator> parts(chunk_count(n, chunk));
  // Per chunk: its first candidate row whose token_logprob contradicts its logprobs_at_ref (candidate files).
  std::vector<std::int64_t> token_bad(parts.size(), -1);
  std::uint64_t cut = blocks ? sample_prefilter(n) : ~std::uint64_t{0};
  for (;;) {
    parallel_for(n, chunk, [&](std::size_t ci_, std::size_t b, std::size_t e) {
      JudgeAccumulator& acc = parts[ci_];
      std::int64_t* tbad = ci.in_memory ? nullptr : &token_bad[ci_];
      acc = JudgeAccumulator{};
      acc.init(k, doms, n_seg);
      acc.worst_cap = worst;
      acc.add_range(begin + b, begin + e);
      if (blocks) {
        accumulate_blocks(g, a, seg_domain, begin, b, e, cut, acc, gchk, cchk, coff, tbad);
        return;
      }
      std::vector<float> rrow, crow;
      if (full) rrow.resize(g.meta.vocab), crow.resize(g.meta.vocab);
      for (std::size_t i = b; i < e; ++i) {
        const std::int64_t gi = begin + static_cast<std::int64_t>(i);
        const float* lp = &g.a.top_logprobs[gi * k];
        if (tbad && *tbad < 0 && token_inconsistent(g, a, gi, static_cast<std::int64_t>(i)))
          *tbad = static_cast<std::int64_t>(i);
        PositionRecord r;
        r.position = gi;
        r.segment = g.a.segment[gi];
        r.depth = g.a.depth[gi];
        r.phase = g.a.phase[gi];
        r.domain = seg_domain[r.segment];
        r.cell = cell_index(r.domain, depth_bucket(r.depth), r.phase);
        r.score = score_topk(lp, g.a.other_logprob[gi], &a.logprobs_at_ref[i * k], a.other_logprob[i],
                             a.covered.empty() ? nullptr : &a.covered[i * k], k);
        r.nonfinite = (a.flags[i] & kFlagsBroken) || !std::isfinite(r.score.kl);
        r.flip = a.top1_id[i] != g.a.top_ids[gi * k];
        r.tie = r.flip && (a.covered.empty() || a.covered[i * k]) &&
                a.top1_logprob[i] == a.logprobs_at_ref[i * k];
        r.margin = k >= 2 ? static_cast<double>(lp[0]) - static_cast<double>(lp[1]) : NAN;
        float tc = a.token_logprob[i];
        if (!(a.flags[i] & kFlagTokenUnknown) && !std::isnan(tc)) {
          // ±inf: non-finite (as in the block path), never silently left out of the perplexity.
          if (!std::isfinite(tc) || !std::isfinite(g.a.token_logprob[gi])) r.nonfinite = true;
          r.nll_cand = -static_cast<double>(tc);
          r.nll_ref = -static_cast<double>(g.a.token_logprob[gi]);
          r.delta_p = fastmath::exp_f64(tc) - fastmath::exp_f64(g.a.token_logprob[gi]);
        }
        if (full) {
          ref->row(gi, rrow.data());
          ci.logits->row(i, crow.data());
          r.full_kl = full_vocab_kl(rrow.data(), crow.data(), g.meta.vocab);
        }
        acc.add(r);
        double wkl = r.nonfinite ? INFINITY : r.score.kl;
        if (acc.wants_worst(wkl, gi)) acc.offer_worst(worst_detail(g, a, gi, i, r));
      }
    });
    // The rows outside the judged range, then the verdicts of the checks (before anything is reported).
    if (gchk) {
      gchk->rows(0, begin);
      gchk->rows(begin + n, g.meta.n);
      gchk->finish();
      gchk = nullptr;
    }
    if (cchk) {
      cchk->rows(0, coff);
      cchk->rows(coff + n, ci.cand.meta.n);
      cchk->finish();
      cchk = nullptr;
    }
    for (std::int64_t i : token_bad)  // the first in file order, after the files' own checks
      if (i >= 0) throw_token_inconsistent(g, ci, begin + i, i);
    if (cut != ~std::uint64_t{0}) {
      std::size_t collected = 0;
      for (auto& p : parts) collected += p.sample.size();
      if (collected < JudgeAccumulator::kSample) {  // the cut was too tight: judge again without it
        cut = ~std::uint64_t{0};
        continue;
      }
    }
    break;
  }
  // The merged value arrays are sized once (the first part is moved into the total, the others appended).
  if (parts.size() > 1)
    for (std::size_t c = 0; c < parts[0].cells.size(); ++c) {
      std::size_t kv = 0, fv = 0;
      for (auto& p : parts) kv += p.cells[c].kl_values.size(), fv += p.cells[c].full_kl_values.size();
      parts[0].cells[c].kl_values.reserve(kv);
      parts[0].cells[c].full_kl_values.reserve(fv);
    }
  JudgeAccumulator total;
  for (auto& p : parts) total.merge(std::move(p));  // in chunk order: deterministic
  if (n == 0) total.init(k, doms, n_seg), total.worst_cap = worst;
  return total;
}

}  // namespace kc
