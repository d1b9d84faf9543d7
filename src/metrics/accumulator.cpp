#include "metrics/accumulator.h"

// No fused multiply-add: TwoSum (ExactSum, LaneSum) needs the product it adds rounded first, or its error
// term is wrong (GCC contracts `hi + x * x` into an FMA by default; clang within a statement).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <algorithm>
#include <tuple>
#include <bit>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

// The per-position loops are plain loops that GCC vectorises; it picks 256-bit vectors on this CPU by
// default (-mprefer-vector-width=256), half the lanes AVX-512 has for them.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace kc {

std::int64_t depth_bucket_lower(int b) { return b == 0 ? 0 : (std::int64_t{1} << (b - 1)); }

std::int64_t profile_bucket_lower(int b) {
  if (b < 32) return b;
  const int e = b / kProfilePerOctave + 3;
  return static_cast<std::int64_t>(b % kProfilePerOctave + 16) << (e - 4);
}

namespace {
// Inline in the per-position loops of this file.
inline int fine_bin(double m) {
  if (!(m > 0)) return 0;
  if (m < 0x1p-20) return 1;
  if (m >= 0x1p10) return kFineMarginBins - 1;
  // 32 bins per octave from the exponent and the top 5 mantissa bits: no log, ≤ 2.2 % wide.
  std::uint64_t bits = std::bit_cast<std::uint64_t>(m);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;  // in [-20, 9]
  int sub = static_cast<int>((bits >> 47) & 31);
  return 2 + (e + 20) * 32 + sub;
}

inline std::uint64_t hash_of(std::int64_t position) {  // splitmix64
  std::uint64_t z = static_cast<std::uint64_t>(position) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

// The same bin without branches, for the vector loop of add_block.
inline std::int32_t fine_bin_nb(double m) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(m);
  const std::int32_t e = static_cast<std::int32_t>((bits >> 52) & 0x7ff) - 1023;
  const std::int32_t sub = static_cast<std::int32_t>((bits >> 47) & 31);
  std::int32_t r = 2 + (e + 20) * 32 + sub;
  r = m >= 0x1p10 ? kFineMarginBins - 1 : r;
  r = m < 0x1p-20 ? 1 : r;
  return m > 0 ? r : 0;
}

int fine_margin_bin(double m) { return fine_bin(m); }
std::uint64_t position_hash(std::int64_t position) { return hash_of(position); }

void CellStats::add(const PositionRecord& r) {
  ++n;
  const double kl_v = r.score.kl;
  bool finite = std::isfinite(kl_v) && !r.nonfinite;
  if (!finite) {
    ++nonfinite;
  } else {
    kl.add(kl_v);
    kl_sq.add(kl_v * kl_v);
    kl_max = std::max(kl_max, kl_v);
    kl_values.push_back(static_cast<float>(kl_v));
    if (r.flip) flipped_kl.push_back(static_cast<float>(kl_v));
  }
  int b = margin_bin(r.margin);
  ++bin_n[b];
  bin_flips[b] += r.flip;
  bin_tie_flips[b] += r.flip && r.tie;
  if (std::isfinite(r.delta_p) && std::isfinite(r.nll_cand) && std::isfinite(r.nll_ref)) {
    ++n_token;
    delta_p.add(r.delta_p);
    delta_p_sq.add(r.delta_p * r.delta_p);
    nll_ref.add(r.nll_ref);
    nll_cand.add(r.nll_cand);
    double d = r.nll_cand - r.nll_ref;
    nll_diff.add(d);
    nll_diff_sq.add(d * d);
  }
  if (std::isfinite(r.score.sigma2)) {
    ++n_sigma;
    sigma2.add(r.score.sigma2);
  }
  q_other_clamped += r.score.q_other_clamped;
  if (finite) {
    mass.add(r.score.mass);
    if (r.score.mass_covered != r.score.mass) mass_missing.add(r.score.mass - r.score.mass_covered);
  }
  if (std::isfinite(r.score.kl_upper) && finite) {
    if (r.score.kl_upper != kl_v) kl_upper_excess.add(r.score.kl_upper - kl_v);
  } else {
    ++upper_infinite;
  }
  if (std::isfinite(r.full_kl)) {
    ++n_full;
    full_kl.add(r.full_kl);
    full_kl_sq.add(r.full_kl * r.full_kl);
    full_kl_max = std::max(full_kl_max, r.full_kl);
    full_kl_values.push_back(static_cast<float>(r.full_kl));
  }
}

namespace {
// Every scalar field of CellStats once, with its shard-file key: merge and the shard JSON walk this list,
// so a new field is merged, written and read by adding one line here. How a field merges follows its type:
// counts and bins add, ExactSum merges exactly, double (the maxima) takes the larger.
constexpr auto kCellFields = std::make_tuple(
    std::pair{"n", &CellStats::n}, std::pair{"nonfinite", &CellStats::nonfinite},
    std::pair{"q_other_clamped", &CellStats::q_other_clamped}, std::pair{"kl", &CellStats::kl},
    std::pair{"kl_sq", &CellStats::kl_sq}, std::pair{"kl_max", &CellStats::kl_max},
    std::pair{"bin_n", &CellStats::bin_n}, std::pair{"bin_flips", &CellStats::bin_flips},
    std::pair{"bin_tie_flips", &CellStats::bin_tie_flips}, std::pair{"n_token", &CellStats::n_token},
    std::pair{"delta_p", &CellStats::delta_p}, std::pair{"delta_p_sq", &CellStats::delta_p_sq},
    std::pair{"nll_ref", &CellStats::nll_ref}, std::pair{"nll_cand", &CellStats::nll_cand},
    std::pair{"nll_diff", &CellStats::nll_diff}, std::pair{"nll_diff_sq", &CellStats::nll_diff_sq},
    std::pair{"n_sigma", &CellStats::n_sigma}, std::pair{"sigma2", &CellStats::sigma2},
    std::pair{"ids_total", &CellStats::ids_total}, std::pair{"ids_covered", &CellStats::ids_covered},
    std::pair{"positions_partial", &CellStats::positions_partial},
    std::pair{"upper_infinite", &CellStats::upper_infinite}, std::pair{"mass", &CellStats::mass},
    std::pair{"mass_missing", &CellStats::mass_missing},
    std::pair{"kl_upper_excess", &CellStats::kl_upper_excess}, std::pair{"n_full", &CellStats::n_full},
    std::pair{"full_kl", &CellStats::full_kl}, std::pair{"full_kl_sq", &CellStats::full_kl_sq},
    std::pair{"full_kl_max", &CellStats::full_kl_max});

template <typename F>
void for_each_cell_field(F&& f) {
  std::apply([&](const auto&... field) { (f(field.first, field.second), ...); }, kCellFields);
}

void merge_field(std::uint64_t& a, std::uint64_t b) { a += b; }
void merge_field(ExactSum& a, const ExactSum& b) { a.merge(b); }
void merge_field(double& a, double b) { a = std::max(a, b); }
void merge_field(std::array<std::uint64_t, kMarginBins>& a, const std::array<std::uint64_t, kMarginBins>& b) {
  for (int i = 0; i < kMarginBins; ++i) a[i] += b[i];
}
}  // namespace

void CellStats::merge(const CellStats& o, bool values) {
  for_each_cell_field([&](const char*, auto member) { merge_field(this->*member, o.*member); });
  if (values) kl_values.insert(kl_values.end(), o.kl_values.begin(), o.kl_values.end());
  flipped_kl.insert(flipped_kl.end(), o.flipped_kl.begin(), o.flipped_kl.end());
  if (values) full_kl_values.insert(full_kl_values.end(), o.full_kl_values.begin(), o.full_kl_values.end());
}

void JudgeAccumulator::init(int k_, std::vector<std::string> doms, int n_seg) {
  k = k_;
  domains = std::move(doms);
  n_segments = n_seg;
  cells.assign(domains.size() * kCellsPerDomain, CellStats{});
  segment_kl.assign(n_seg, ExactSum{});
  segment_n.assign(n_seg, 0);
  segment_cells.assign(n_seg, {});
  segment_depths.assign(n_seg, {});
}

void JudgeAccumulator::add_segment_cell(int segment, int cell, std::uint64_t n, const ExactSum& kl) {
  auto& v = segment_cells[segment];
  auto it = std::lower_bound(v.begin(), v.end(), cell, [](const SegmentCellSum& a, int c) { return a.cell < c; });
  if (it == v.end() || it->cell != cell) it = v.insert(it, SegmentCellSum{cell, 0, {}});
  it->n += n;
  it->kl.merge(kl);
}

void JudgeAccumulator::add_segment_depth(int segment, int bucket, std::uint64_t n, const ExactSum& kl) {
  auto& v = segment_depths[segment];
  auto it = std::lower_bound(v.begin(), v.end(), bucket,
                             [](const SegmentDepthSum& a, int b) { return a.bucket < b; });
  if (it == v.end() || it->bucket != bucket) it = v.insert(it, SegmentDepthSum{bucket, 0, {}});
  it->n += n;
  it->kl.merge(kl);
}

void JudgeAccumulator::add_range(std::int64_t b, std::int64_t e, std::string_view file) {
  if (b >= e) return;
  ranges.emplace_back(b, e);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (auto& r : ranges) {
    if (!out.empty() && r.first < out.back().second)
      throw_input_error(file.empty() ? "judged positions" : file, "ranges", "ranges that do not overlap",
                        fmt::format("[{}, {}) and [{}, {})", out.back().first, out.back().second, r.first, r.second));
    if (!out.empty() && r.first == out.back().second)
      out.back().second = r.second;
    else
      out.push_back(r);
  }
  ranges = std::move(out);
}

std::int64_t JudgeAccumulator::positions_judged() const {
  std::int64_t n = 0;
  for (auto& r : ranges) n += r.second - r.first;
  return n;
}

namespace {

// Sample point: keep the kSample smallest hashes (a max-heap while filling).
inline void offer_sample(std::vector<SamplePoint>& sample, std::int64_t position, double kl, double margin,
                         bool flip, std::uint8_t domain, std::uint8_t phase, std::int32_t depth) {
  constexpr std::size_t kSample = JudgeAccumulator::kSample;
  const std::uint64_t h = position_hash(position);
  if (sample.size() == kSample && h >= sample.front().hash) return;
  auto by_hash = [](const SamplePoint& a, const SamplePoint& b) { return a.hash < b.hash; };
  SamplePoint p{h, position, static_cast<float>(kl), static_cast<float>(margin), flip, domain, phase, depth};
  if (sample.size() == kSample) {
    std::pop_heap(sample.begin(), sample.end(), by_hash);
    sample.back() = p;
  } else {
    sample.push_back(p);
  }
  std::push_heap(sample.begin(), sample.end(), by_hash);
}

// Eight double-double lane sums (TwoSum per lane, GCC vector extensions), folded into an ExactSum at the
// end: the same value as adding every term to the ExactSum one by one, up to ~1e-32 relative.
typedef double V8d __attribute__((vector_size(64)));
typedef std::int64_t V8l __attribute__((vector_size(64)));
typedef std::uint8_t V8b __attribute__((vector_size(8)));

struct LaneSum {
  V8d hi{}, lo{};
  inline void add(V8d x) {
    const V8d s = hi + x;
    const V8d bp = s - hi;
    lo += (hi - (s - bp)) + (x - bp);
    hi = s;
  }
  void fold_into(ExactSum& e) const {
    for (int l = 0; l < 8; ++l) e.add(hi[l]);
    for (int l = 0; l < 8; ++l) e.add(lo[l]);
  }
};

// Eight entries from i of array x; entries at or past e read as 0 (the last group of a run).
template <typename V, typename T>
inline V load8(const T* x, int i, int e) {
  V v{};
  if (i + 8 <= e) {
    __builtin_memcpy(&v, x + i, sizeof(v));
  } else {
    for (int l = 0; l < 8 && i + l < e; ++l) v[l] = x[i + l];
  }
  return v;
}

inline V8l mask_of(V8b b) { return __builtin_convertvector(b, V8l) != 0; }

// Sums of the run [s, e) of one cell.
void add_cell_run(CellStats& c, const PositionBlock& b, int s, int e, int k) {
  LaneSum kl, kl_sq, dp, dp_sq, nr, nc, nd, nd_sq, sg, ms;
  V8l n_fin{}, n_tok{}, n_sig{}, n_clamp{}, n_flip{};
  // Margin bins without a scattered update: gt[t] counts margins above kMarginUpper[t] (t = 0..6; NaN is
  // above none, so it lands in the tie bin like margin_bin's), the bin counts are their differences.
  V8l gt[kMarginBins - 1] = {}, gt_flip[kMarginBins - 1] = {};
  V8d mx{};
  for (int i = s; i < e; i += 8) {
    const V8d mg = load8<V8d>(b.margin, i, e);  // padding reads 0: above no threshold
    const V8l fl = mask_of(load8<V8b>(b.flip, i, e));
    n_flip -= fl;
    for (int t = 0; t < kMarginBins - 1; ++t) {
      const V8l above = mg > kMarginUpper[t];
      gt[t] -= above;
      gt_flip[t] -= above & fl;
    }
    const V8l fin = mask_of(load8<V8b>(b.finite, i, e));
    const V8l tok = mask_of(load8<V8b>(b.token, i, e));
    const V8l clamp = mask_of(load8<V8b>(b.clamped, i, e));
    const V8d x = fin ? load8<V8d>(b.kl, i, e) : V8d{};
    kl.add(x);
    kl_sq.add(x * x);
    ms.add(fin ? load8<V8d>(b.mass, i, e) : V8d{});
    mx = x > mx ? x : mx;
    // delta_p, nll_ref, nll_cand are 0 where token is 0.
    const V8d d = load8<V8d>(b.delta_p, i, e), r = load8<V8d>(b.nll_ref, i, e),
              q = load8<V8d>(b.nll_cand, i, e);
    dp.add(d);
    dp_sq.add(d * d);
    nr.add(r);
    nc.add(q);
    nd.add(q - r);
    nd_sq.add((q - r) * (q - r));
    const V8d sv = load8<V8d>(b.sigma2, i, e);
    const V8l sf = (sv - sv) == 0;  // finite (padding: 0, but it is not counted below)
    const V8l in = (V8l{0, 1, 2, 3, 4, 5, 6, 7} + i) < e;
    sg.add(sf ? sv : V8d{});
    n_fin -= fin;
    n_tok -= tok;
    n_sig -= sf & in;
    n_clamp -= clamp;
  }
  std::uint64_t nf = 0, nt = 0, ns = 0, ncl = 0, nfl = 0, g[kMarginBins - 1] = {}, gf[kMarginBins - 1] = {};
  double m_max = c.kl_max;
  for (int l = 0; l < 8; ++l) {
    nfl += n_flip[l];
    for (int t = 0; t < kMarginBins - 1; ++t) {
      g[t] += gt[t][l];
      gf[t] += gt_flip[t][l];
    }
    nf += n_fin[l];
    nt += n_tok[l];
    ns += n_sig[l];
    ncl += n_clamp[l];
    m_max = mx[l] > m_max ? mx[l] : m_max;
  }
  const std::uint64_t m = static_cast<std::uint64_t>(e - s);
  c.bin_n[0] += m - g[0];
  c.bin_flips[0] += nfl - gf[0];
  for (int t = 1; t < kMarginBins - 1; ++t) {
    c.bin_n[t] += g[t - 1] - g[t];
    c.bin_flips[t] += gf[t - 1] - gf[t];
  }
  c.bin_n[kMarginBins - 1] += g[kMarginBins - 2];
  c.bin_flips[kMarginBins - 1] += gf[kMarginBins - 2];
  c.n += m;
  c.nonfinite += m - nf;
  c.upper_infinite += m - nf;
  c.q_other_clamped += ncl;
  c.n_token += nt;
  c.n_sigma += ns;
  c.ids_total += m * static_cast<std::uint64_t>(k);
  c.ids_covered += m * static_cast<std::uint64_t>(k);
  c.kl_max = m_max;
  kl.fold_into(c.kl);
  kl_sq.fold_into(c.kl_sq);
  ms.fold_into(c.mass);
  dp.fold_into(c.delta_p);
  dp_sq.fold_into(c.delta_p_sq);
  nr.fold_into(c.nll_ref);
  nc.fold_into(c.nll_cand);
  nd.fold_into(c.nll_diff);
  nd_sq.fold_into(c.nll_diff_sq);
  sg.fold_into(c.sigma2);
  if (nf == m) {  // the common case: every KL finite
    const std::size_t at = c.kl_values.size();
    c.kl_values.resize(at + m);
    float* out = c.kl_values.data() + at;
    for (int i = s; i < e; ++i) out[i - s] = static_cast<float>(b.kl[i]);
  } else {
    for (int i = s; i < e; ++i)
      if (b.finite[i]) c.kl_values.push_back(static_cast<float>(b.kl[i]));
  }
  if (nfl) {  // branch-free: every value is written, the count advances on the flipped ones
    const std::size_t at = c.flipped_kl.size();
    c.flipped_kl.resize(at + (e - s));
    float* out = c.flipped_kl.data() + at;
    std::size_t w = 0;
    for (int i = s; i < e; ++i) {
      out[w] = static_cast<float>(b.kl[i]);
      w += b.flip[i] & b.finite[i];
    }
    c.flipped_kl.resize(at + w);
  }
}

}  // namespace

namespace {
// Keeps the kSample smallest hashes as a heap; returns the largest kept hash (the cut for new points).
std::uint64_t trim_sample(std::vector<SamplePoint>& sample) {
  constexpr std::size_t kSample = JudgeAccumulator::kSample;
  auto by_hash = [](const SamplePoint& a, const SamplePoint& b) { return a.hash < b.hash; };
  if (sample.size() > kSample) {
    std::nth_element(sample.begin(), sample.begin() + (kSample - 1), sample.end(), by_hash);
    sample.resize(kSample);
  }
  std::make_heap(sample.begin(), sample.end(), by_hash);
  return sample.size() == kSample ? sample.front().hash : ~std::uint64_t{0};
}
}  // namespace

namespace {
// Fine bin f in 2 … kFineMarginBins − 2 holds margins in [2^e, 2^(e+1)) with e = (f − 2) / 32 − 20: each is
// its 53-bit significand times 2^(e − 52), so their sum is an integer times that (exact while fewer than
// 2^53 margins fall in one bin). Its two-double form: the integer rounded to a double and the remainder
// (< 2^52 for sums < 2^106, so exact), both scaled exactly.
inline bool fine_bin_fixed(int f) { return f >= 2 && f <= kFineMarginBins - 2; }
inline std::uint64_t significand(double m) {
  return (std::bit_cast<std::uint64_t>(m) & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
}
void fold_fixed(unsigned __int128 sum, int f, ExactSum& out) {
  const int e = (f - 2) / 32 - 20;
  const double hi = static_cast<double>(sum);                                         // rounded to nearest
  const auto rest = static_cast<__int128>(sum - static_cast<unsigned __int128>(hi));  // |rest| ≤ 2^52
  out.add(std::ldexp(hi, e - 52));
  out.add(std::ldexp(static_cast<double>(rest), e - 52));
}
}  // namespace

void JudgeAccumulator::finish_blocks() {
  sample_cut = trim_sample(sample);
  for (int f = 0; f < static_cast<int>(fine_margin_fixed.size()); ++f)
    if (fine_margin_fixed[f]) fold_fixed(fine_margin_fixed[f], f, fine_margin_sum[f]);
  fine_margin_fixed.clear();
}

namespace {
// End of the run of equal values starting at s (the first i > s with x[i] ≠ x[s], or n): 16 at a time.
inline int run_end(const std::int32_t* x, int s, int n) {
  const std::int32_t v = x[s];
  int i = s + 1;
  for (; i + 16 <= n; i += 16) {
    std::uint32_t m = 0;
    for (int l = 0; l < 16; ++l) m |= static_cast<std::uint32_t>(x[i + l] != v) << l;
    if (m) return i + std::countr_zero(m);
  }
  while (i < n && x[i] == v) ++i;
  return i;
}
// Σ KL of the finite positions s … e-1 of the block into `out` (eight double-double lanes); returns their count.
std::uint64_t finite_kl_sum(const PositionBlock& b, int s, int e, ExactSum& out) {
  LaneSum sum;
  V8l cnt{};
  for (int i = s; i < e; i += 8) {
    const V8l fin = mask_of(load8<V8b>(b.finite, i, e));
    sum.add(fin ? load8<V8d>(b.kl, i, e) : V8d{});
    cnt -= fin;
  }
  sum.fold_into(out);
  std::uint64_t n = 0;
  for (int l = 0; l < 8; ++l) n += static_cast<std::uint64_t>(cnt[l]);
  return n;
}
}  // namespace

void JudgeAccumulator::add_block(const PositionBlock& b) {
  if (sample.size() >= kSample && sample_cut == ~std::uint64_t{0}) sample_cut = trim_sample(sample);
  if (sample.capacity() < 4 * kSample) sample.reserve(4 * kSample);  // no reallocation while collecting
  for (int s = 0; s < b.n;) {                                        // runs of one cell
    const int e = run_end(b.cell, s, b.n);
    add_cell_run(cells[b.cell[s]], b, s, e, k);
    s = e;
  }
  for (int s = 0; s < b.n;) {  // runs of one segment and one cell: Σ KL per segment and per segment × cell
    const int e = std::min(run_end(b.segment, s, b.n), run_end(b.cell, s, b.n));
    const int seg = b.segment[s];
    if (seg >= 0 && seg < n_segments) {
      ExactSum run;
      const std::uint64_t nr = finite_kl_sum(b, s, e, run);
      segment_kl[seg].merge(run);
      segment_n[seg] += nr;
      if (nr) add_segment_cell(seg, b.cell[s], nr, run);
    }
    s = e;
  }
  alignas(64) std::int32_t pb[PositionBlock::kPad];  // fine depth bucket of each position
  std::int32_t deepest = depth_max;
  for (int i = 0; i < b.n; ++i) pb[i] = profile_bucket(b.depth[i]), deepest = std::max(deepest, b.depth[i]);
  depth_max = deepest;
  for (int s = 0; s < b.n;) {  // runs of one segment and one fine depth bucket: the depth profile's sums
    const int e = std::min(run_end(b.segment, s, b.n), run_end(pb, s, b.n));
    const int seg = b.segment[s];
    if (seg >= 0 && seg < n_segments) {
      ExactSum run;
      if (const std::uint64_t nr = finite_kl_sum(b, s, e, run)) add_segment_depth(seg, pb[s], nr, run);
    }
    s = e;
  }
  // Fine margin bins and plot-sample hashes in vector loops, then only the scattered updates per position.
  alignas(64) std::int32_t fb[PositionBlock::kPad];
  alignas(64) std::uint64_t hs[PositionBlock::kPad], sig[PositionBlock::kPad];
  for (int i = 0; i < b.n; ++i) fb[i] = fine_bin_nb(b.margin[i]);
  for (int i = 0; i < b.n; ++i) sig[i] = significand(b.margin[i]);
  for (int i = 0; i < b.n; ++i) hs[i] = hash_of(b.position0 + i);
  if (fine_margin_fixed.empty()) fine_margin_fixed.assign(kFineMarginBins, 0);
  unsigned __int128* fixed = fine_margin_fixed.data();
  for (int i = 0; i < b.n; ++i) {
    const int f = fb[i];
    ++fine_n[f];
    fine_flips[f] += b.flip[i];
    if (fine_bin_fixed(f)) {
      fixed[f] += sig[i];
    } else {
      const double m = b.margin[i];
      if (m - m == 0) fine_margin_sum[f].add(m);
    }
  }
  bool high =
      false;  // any flip above the backstop's margin in the block (a vector loop; such flips are rare)
  if (high_margin_flips.size() < kHighMarginList)
    for (int i = 0; i < b.n; ++i) high |= (b.flip[i] != 0) & (b.margin[i] > kBackstopMargin);
  if (high)
    for (int i = 0; i < b.n; ++i)
      if (b.flip[i] && b.margin[i] > kBackstopMargin && high_margin_flips.size() < kHighMarginList)
        high_margin_flips.emplace_back(b.position0 + i, b.margin[i]);
  bool ties = false;  // tie flips are rarer still: one vector test per block
  for (int i = 0; i < b.n; ++i) ties |= (b.flip[i] & b.tie[i]) != 0;
  if (ties)
    for (int i = 0; i < b.n; ++i)
      if (b.flip[i] && b.tie[i]) ++cells[b.cell[i]].bin_tie_flips[margin_bin(b.margin[i])];
  for (int i = 0; i < b.n; ++i) {
    if (hs[i] >= sample_cut) continue;
    sample.push_back({hs[i], b.position0 + i, static_cast<float>(b.finite[i] ? b.kl[i] : INFINITY),
                      static_cast<float>(b.margin[i]), b.flip[i] != 0, b.domain[i], b.phase[i], b.depth[i]});
    if (sample.size() >= 4 * kSample) sample_cut = trim_sample(sample);
  }
}

void JudgeAccumulator::add(const PositionRecord& r) {
  CellStats& c = cells[r.cell];
  c.add(r);
  c.ids_total += k;
  c.ids_covered += r.score.covered;
  c.positions_partial += r.score.covered < k;
  int fb = fine_margin_bin(r.margin);
  ++fine_n[fb];
  fine_flips[fb] += r.flip;
  if (std::isfinite(r.margin)) fine_margin_sum[fb].add(r.margin);
  bool finite = std::isfinite(r.score.kl) && !r.nonfinite;
  if (finite && r.segment >= 0 && r.segment < n_segments) {
    segment_kl[r.segment].add(r.score.kl);
    ++segment_n[r.segment];
    ExactSum one;
    one.add(r.score.kl);
    add_segment_cell(r.segment, r.cell, 1, one);
    add_segment_depth(r.segment, profile_bucket(r.depth), 1, one);
  }
  depth_max = std::max(depth_max, r.depth);
  if (r.flip && r.margin > kBackstopMargin && high_margin_flips.size() < kHighMarginList)
    high_margin_flips.emplace_back(r.position, r.margin);
  offer_sample(sample, r.position, finite ? r.score.kl : INFINITY, r.margin, r.flip, r.domain, r.phase,
               r.depth);
}

namespace {
// Worst order: non-finite first (kl = +inf), then KL desc, then position asc.
bool worse(double kl_a, std::int64_t pos_a, double kl_b, std::int64_t pos_b) {
  if (kl_a != kl_b) return kl_a > kl_b;
  return pos_a < pos_b;
}
}  // namespace

bool JudgeAccumulator::wants_worst(double kl, std::int64_t position) const {
  if (worst.size() < worst_cap) return true;
  const auto& last = worst.back();
  return worse(kl, position, last.kl, last.position);
}

void JudgeAccumulator::offer_worst(const WorstPosition& w) {
  auto it =
      std::lower_bound(worst.begin(), worst.end(), w, [](const WorstPosition& a, const WorstPosition& b) {
        return worse(a.kl, a.position, b.kl, b.position);
      });
  worst.insert(it, w);
  while (worst.size() > worst_cap) worst.pop_back();
}

void JudgeAccumulator::merge(JudgeAccumulator&& o) {
  if (cells.empty()) {
    *this = std::move(o);
    std::make_heap(sample.begin(), sample.end(), [](auto& a, auto& b) { return a.hash < b.hash; });
    return;
  }
  merge(static_cast<const JudgeAccumulator&>(o));
}

void JudgeAccumulator::merge(const JudgeAccumulator& o) {
  if (cells.empty()) {  // an empty (default) accumulator takes the shape of the first merged one
    *this = o;
    std::sort(sample.begin(), sample.end(), [](auto& a, auto& b) { return a.hash < b.hash; });
    std::make_heap(sample.begin(), sample.end(), [](auto& a, auto& b) { return a.hash < b.hash; });
    return;
  }
  if (o.cells.empty()) return;
  // Callers check the shape first (merge_partials names the shard): a mismatch here is a bug.
  KC_ASSERT(o.k == k && o.domains == domains && o.n_segments == n_segments,
            "merge of accumulators of different shapes: k {} vs {}, {} vs {} segments", k, o.k, n_segments,
            o.n_segments);
  for (auto& r : o.ranges) add_range(r.first, r.second);
  for (std::size_t c = 0; c < cells.size(); ++c) cells[c].merge(o.cells[c]);
  for (int b = 0; b < kFineMarginBins; ++b) {
    fine_n[b] += o.fine_n[b];
    fine_flips[b] += o.fine_flips[b];
    fine_margin_sum[b].merge(o.fine_margin_sum[b]);
  }
  for (int s = 0; s < n_segments; ++s) {
    segment_kl[s].merge(o.segment_kl[s]);
    segment_n[s] += o.segment_n[s];
    for (const auto& c : o.segment_cells[s]) add_segment_cell(s, c.cell, c.n, c.kl);
    for (const auto& d : o.segment_depths[s]) add_segment_depth(s, d.bucket, d.n, d.kl);
  }
  has_segment_depths = has_segment_depths && o.has_segment_depths;
  depth_max = std::max(depth_max, o.depth_max);
  worst_cap = std::max(worst_cap, o.worst_cap);
  for (auto& w : o.worst)
    if (wants_worst(w.kl, w.position)) offer_worst(w);
  high_margin_flips.insert(high_margin_flips.end(), o.high_margin_flips.begin(), o.high_margin_flips.end());
  std::sort(high_margin_flips.begin(), high_margin_flips.end());
  if (high_margin_flips.size() > kHighMarginList) high_margin_flips.resize(kHighMarginList);
  auto by_hash = [](const SamplePoint& a, const SamplePoint& b) { return a.hash < b.hash; };
  std::vector<SamplePoint> all = sample;
  all.insert(all.end(), o.sample.begin(), o.sample.end());
  if (all.size() > kSample) {  // the kSample smallest hashes (distinct: position_hash is a bijection)
    std::nth_element(all.begin(), all.begin() + (kSample - 1), all.end(), by_hash);
    all.resize(kSample);
  }
  sample = std::move(all);
  std::make_heap(sample.begin(), sample.end(), by_hash);
  sample_cut = ~std::uint64_t{0};
}

// ---- serialisation --------------------------------------------------------------------------------
namespace {
using nlohmann::json;

json sum_json(const ExactSum& s) { return json::array({s.hi, s.lo}); }
ExactSum sum_from(const json& j) {
  ExactSum s;
  s.hi = j.at(0).get<double>();
  s.lo = j.at(1).get<double>();
  return s;
}

json field_json(std::uint64_t v) { return v; }
json field_json(double v) { return v; }
json field_json(const ExactSum& s) { return sum_json(s); }
json field_json(const std::array<std::uint64_t, kMarginBins>& v) { return v; }
void field_from(const json& j, std::uint64_t& v) { v = j; }
void field_from(const json& j, double& v) { v = j; }
void field_from(const json& j, ExactSum& s) { s = sum_from(j); }
void field_from(const json& j, std::array<std::uint64_t, kMarginBins>& v) { v = j; }

json cell_json(const CellStats& c) {
  json j;
  for_each_cell_field([&](const char* key, auto member) { j[key] = field_json(c.*member); });
  j["n_values"] = c.kl_values.size();
  j["flipped_kl"] = c.flipped_kl;
  return j;
}

CellStats cell_from(const json& j) {
  CellStats c;
  for_each_cell_field([&](const char* key, auto member) { field_from(j.at(key), c.*member); });
  c.kl_values.resize(j.at("n_values").get<std::size_t>());
  c.flipped_kl = j.at("flipped_kl").get<std::vector<float>>();
  if (j.at("n_values").get<std::uint64_t>() > c.n || c.n_full > c.n || c.flipped_kl.size() > c.n)
    throw std::logic_error("n_values, n_full, flipped_kl: expected counts ≤ n, got more");
  c.full_kl_values.resize(c.n_full);
  return c;
}
}  // namespace

json JudgeAccumulator::to_json() const {
  json j;
  j["k"] = k;
  j["domains"] = domains;
  j["n_segments"] = n_segments;
  j["ranges"] = ranges;
  json cs = json::object();
  for (std::size_t c = 0; c < cells.size(); ++c)
    if (cells[c].n) cs[std::to_string(c)] = cell_json(cells[c]);
  j["cells"] = cs;
  j["fine_n"] = fine_n;
  j["fine_flips"] = fine_flips;
  json fms = json::array();
  for (auto& x : fine_margin_sum) fms.push_back(sum_json(x));
  j["fine_margin_sum"] = fms;
  json seg = json::array();
  for (int s = 0; s < n_segments; ++s) seg.push_back({segment_kl[s].hi, segment_kl[s].lo, segment_n[s]});
  j["segments"] = seg;
  json sc = json::array();  // per segment: [[cell, Σ KL hi, lo, n], …]
  for (int s = 0; s < n_segments; ++s) {
    json cs = json::array();
    for (auto& c : segment_cells[s]) cs.push_back({c.cell, c.kl.hi, c.kl.lo, c.n});
    sc.push_back(cs);
  }
  j["segment_cells"] = sc;
  if (has_segment_depths) {
    json sd = json::array();  // per segment: [[fine depth bucket, Σ KL hi, lo, n], …]
    for (int s = 0; s < n_segments; ++s) {
      json ds = json::array();
      for (auto& d : segment_depths[s]) ds.push_back({d.bucket, d.kl.hi, d.kl.lo, d.n});
      sd.push_back(ds);
    }
    j["segment_depths"] = sd;
  }
  j["depth_max"] = depth_max;
  json w = json::array();
  for (auto& x : worst)
    w.push_back({{"position", x.position},
                 {"kl", x.kl},
                 {"margin", x.margin},
                 {"flip", x.flip},
                 {"segment", x.segment},
                 {"token", x.token},
                 {"ref_ids", x.ref_ids},
                 {"cand_ids", x.cand_ids},
                 {"ref_logprobs", x.ref_logprobs},
                 {"cand_logprobs", x.cand_logprobs}});
  j["worst"] = w;
  j["worst_cap"] = worst_cap;
  json sp = json::array();
  for (auto& p : sample)
    sp.push_back({p.hash, p.position, p.kl, p.margin, p.flip, p.domain, p.phase, p.depth});
  j["sample"] = sp;
  j["high_margin_flips"] = high_margin_flips;
  return j;
}

JudgeAccumulator JudgeAccumulator::from_json(const json& j, const std::string& file) {
  try {
    JudgeAccumulator a;
    a.init(j.at("k"), j.at("domains").get<std::vector<std::string>>(), j.at("n_segments"));
    if (a.k < 1 || a.domains.size() > 255 || a.n_segments < 0)
      throw_input_error(file, "accumulator k, domains, n_segments", "k ≥ 1, at most 255 domains, n_segments ≥ 0",
                        fmt::format("k = {}, {} domains, n_segments = {}", a.k, a.domains.size(), a.n_segments));
    for (auto& r : j.at("ranges")) a.add_range(r.at(0), r.at(1), file);
    for (auto& [key, v] : j.at("cells").items()) {
      std::size_t c = std::stoul(key);
      if (c >= a.cells.size())
        throw_input_error(file, "accumulator cells", fmt::format("cell indices < {}", a.cells.size()), key);
      a.cells[c] = cell_from(v);
    }
    a.fine_n = j.at("fine_n");
    a.fine_flips = j.at("fine_flips");
    const json& fms = j.at("fine_margin_sum");
    if (fms.size() != kFineMarginBins)
      throw_input_error(file, "accumulator fine_margin_sum", fmt::format("{} bins", kFineMarginBins),
                        fmt::format("{}", fms.size()));
    for (int b = 0; b < kFineMarginBins; ++b) a.fine_margin_sum[b] = sum_from(fms[b]);
    const json& seg = j.at("segments");
    if (seg.size() != static_cast<std::size_t>(a.n_segments))
      throw_input_error(file, "accumulator segments", fmt::format("{} entries (n_segments)", a.n_segments),
                        fmt::format("{}", seg.size()));
    for (int s = 0; s < a.n_segments; ++s) {
      a.segment_kl[s].hi = seg[s].at(0);
      a.segment_kl[s].lo = seg[s].at(1);
      a.segment_n[s] = seg[s].at(2);
    }
    const json& sc = j.at("segment_cells");
    if (sc.size() != static_cast<std::size_t>(a.n_segments))
      throw_input_error(file, "accumulator segment_cells", fmt::format("{} entries (n_segments)", a.n_segments),
                        fmt::format("{}", sc.size()));
    for (int s = 0; s < a.n_segments; ++s)
      for (auto& c : sc[s]) {
        const int cell = c.at(0);
        if (cell < 0 || static_cast<std::size_t>(cell) >= a.cells.size())
          throw_input_error(file, "accumulator segment_cells", fmt::format("cell indices < {}", a.cells.size()),
                            fmt::format("{}", cell));
        ExactSum e;
        e.hi = c.at(1);
        e.lo = c.at(2);
        a.add_segment_cell(s, cell, c.at(3).get<std::uint64_t>(), e);
      }
    // Shards written before the depth profile have no segment_depths: their report has no profile.
    a.has_segment_depths = j.contains("segment_depths");
    a.depth_max = j.value("depth_max", std::int32_t{-1});
    if (a.has_segment_depths) {
      const json& sd = j.at("segment_depths");
      if (sd.size() != static_cast<std::size_t>(a.n_segments))
        throw_input_error(file, "accumulator segment_depths", fmt::format("{} entries (n_segments)", a.n_segments),
                          fmt::format("{}", sd.size()));
      for (int s = 0; s < a.n_segments; ++s)
        for (auto& d : sd[s]) {
          const int bucket = d.at(0);
          if (bucket < 0 || bucket > profile_bucket(std::numeric_limits<std::int32_t>::max()))
            throw_input_error(file, "accumulator segment_depths",
                              fmt::format("depth buckets 0 … {}", profile_bucket(std::numeric_limits<std::int32_t>::max())),
                              fmt::format("{}", bucket));
          ExactSum e;
          e.hi = d.at(1);
          e.lo = d.at(2);
          a.add_segment_depth(s, bucket, d.at(3).get<std::uint64_t>(), e);
        }
    }
    // Shards written before `--worst` have no worst_cap: the fixed 20 then.
    a.worst_cap = j.value("worst_cap", kWorst);
    if (a.worst_cap < 1 || a.worst_cap > kWorstMax || j.at("worst").size() > a.worst_cap)
      throw_input_error(file, "accumulator worst_cap",
                        fmt::format("1 … {} and at least the worst list's length", kWorstMax),
                        fmt::format("{} ({} worst entries)", a.worst_cap, j.at("worst").size()));
    for (auto& x : j.at("worst")) {
      WorstPosition w;
      w.position = x.at("position");
      w.kl = x.at("kl").is_null() ? INFINITY : x.at("kl").get<double>();
      w.margin = x.at("margin");
      w.flip = x.at("flip");
      w.segment = x.at("segment");
      w.token = x.at("token");
      w.ref_ids = x.at("ref_ids");
      w.cand_ids = x.at("cand_ids");
      for (int i = 0; i < 3; ++i) {
        w.ref_logprobs[i] = x.at("ref_logprobs")[i].is_null() ? NAN : x.at("ref_logprobs")[i].get<float>();
        w.cand_logprobs[i] = x.at("cand_logprobs")[i].is_null() ? NAN : x.at("cand_logprobs")[i].get<float>();
      }
      a.worst.push_back(w);
    }
    for (auto& p : j.at("sample")) {
      SamplePoint s;
      s.hash = p.at(0);
      s.position = p.at(1);
      s.kl = p.at(2).is_null() ? INFINITY : p.at(2).get<float>();
      s.margin = p.at(3);
      s.flip = p.at(4);
      s.domain = p.at(5);
      s.phase = p.at(6);
      s.depth = p.at(7);
      a.sample.push_back(s);
    }
    std::make_heap(a.sample.begin(), a.sample.end(), [](auto& x, auto& y) { return x.hash < y.hash; });
    a.high_margin_flips = j.at("high_margin_flips").get<std::vector<std::pair<std::int64_t, double>>>();
    return a;
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(file, "accumulator", "the JSON of a shard's accumulator", e.what());
  } catch (const std::logic_error& e) {
    throw_input_error(file, "accumulator", "the JSON of a shard's accumulator", e.what());
  }
}

std::vector<float> JudgeAccumulator::all_values(int which) const {
  std::vector<float> v;
  for (auto& c : cells) {
    auto& src = which == 0 ? c.kl_values : c.full_kl_values;
    v.insert(v.end(), src.begin(), src.end());
  }
  return v;
}

void JudgeAccumulator::set_values(int which, const std::vector<float>& values, const std::string& file) {
  std::size_t off = 0;
  for (auto& c : cells) {
    auto& dst = which == 0 ? c.kl_values : c.full_kl_values;
    if (off + dst.size() > values.size())
      throw_input_error(file, "accumulator values", fmt::format("at least {} values", off + dst.size()),
                        fmt::format("{}", values.size()));
    std::copy(values.begin() + off, values.begin() + off + dst.size(), dst.begin());
    off += dst.size();
  }
  if (off != values.size())
    throw_input_error(file, "accumulator values", fmt::format("{} values", off), fmt::format("{}", values.size()));
}

}  // namespace kc
