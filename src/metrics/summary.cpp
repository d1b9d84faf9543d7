#include "metrics/summary.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>

#include "core/parallel.h"
#include "metrics/stats.h"

// The quantile selection's loops are plain loops that GCC vectorises; it picks 256-bit vectors on this CPU
// by default (-mprefer-vector-width=256), half the lanes AVX-512 has for them.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace kc {

const char* phase_name(int phase) { return phase == 1 ? "decode" : "prefill"; }

SplitId SplitId::depth(int bucket) {
  return {SplitKind::depth, bucket, std::to_string(depth_bucket_lower(bucket))};
}

const char* SplitId::kind_name() const {
  switch (kind) {
    case SplitKind::domain:
      return "domain";
    case SplitKind::phase:
      return "phase";
    case SplitKind::depth:
      return "depth";
    default:
      return "overall";
  }
}

std::string SplitId::label() const {
  return kind == SplitKind::overall ? "overall" : std::string(kind_name()) + " " + name;
}

std::string SplitId::prefix() const {
  return kind == SplitKind::overall ? "" : std::string(kind_name()) + "." + name + ".";
}

bool SplitId::holds(int cell) const {
  switch (kind) {
    case SplitKind::domain:
      return cell / kCellsPerDomain == index;
    case SplitKind::phase:
      return cell % kPhases == index;
    case SplitKind::depth:
      return (cell / kPhases) % kDepthBuckets == index;
    default:
      return true;
  }
}

std::vector<const SplitSummary*> all_splits(const RunSummary& r) {
  std::vector<const SplitSummary*> v{&r.overall};
  for (auto& s : r.by_domain) v.push_back(&s);
  for (auto& s : r.by_phase) v.push_back(&s);
  for (auto& s : r.by_depth) v.push_back(&s);
  return v;
}

namespace {

constexpr int kKeyBins = 1 << 16;  // histogram of the top 16 bits of the order-preserving key

// A split's values: the arrays of its cells, each with its key histogram when summarize made one.
struct Parts {
  std::vector<std::span<const float>> spans;
  std::vector<const std::uint32_t*> hists;  // per span: kKeyBins counts, or nullptr
  void push_back(std::span<const float> s, const std::uint32_t* h = nullptr) {
    spans.push_back(s);
    hists.push_back(h);
  }
  auto begin() const { return spans.begin(); }
  auto end() const { return spans.end(); }
};

// Order-preserving key of a finite f32 (−0 counts as +0).
inline std::uint32_t f32_key(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
inline float key_f32(std::uint32_t k) {
  return std::bit_cast<float>((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Quantiles of the values in `parts` at increasing qs, numpy "linear" interpolation. Exact order
// statistics in linear time without copying: a histogram of the top 16 key bits, then only the values in
// the bins holding the wanted ranks are gathered and selected.
std::vector<double> quantiles(const Parts& parts, std::initializer_list<double> qs) {
  std::size_t n = 0;
  for (auto& p : parts) n += p.size();
  std::vector<double> out;
  if (n == 0) {
    out.assign(qs.size(), NAN);
    return out;
  }
  std::vector<std::size_t> ranks;  // lo and lo + 1 of each q
  for (double q : qs) {
    std::size_t lo = static_cast<std::size_t>(std::floor(q * static_cast<double>(n - 1)));
    ranks.push_back(lo);
    ranks.push_back(std::min(lo + 1, n - 1));
  }
  constexpr int kBins = kKeyBins;
  std::vector<std::uint64_t> hist(kBins, 0);
  for (std::size_t i = 0; i < parts.spans.size(); ++i) {
    if (parts.spans[i].empty()) continue;
    if (const std::uint32_t* h = parts.hists[i]) {  // the cell's histogram, made once for all its splits
      for (int b = 0; b < kBins; ++b) hist[b] += h[b];
    } else {
      for (float x : parts.spans[i]) ++hist[f32_key(x) >> 16];
    }
  }
  // Bin of each rank and the number of values below that bin.
  std::vector<std::int32_t> slot(kBins, -1);
  std::vector<std::size_t> bin_below;
  std::vector<int> rank_slot(ranks.size());
  {
    std::size_t below = 0, r = 0;
    std::vector<std::pair<std::size_t, int>> order(ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) order[i] = {ranks[i], static_cast<int>(i)};
    std::sort(order.begin(), order.end());
    for (int bin = 0; bin < kBins && r < order.size(); ++bin) {
      while (r < order.size() && order[r].first < below + hist[bin]) {
        if (slot[bin] < 0) {
          slot[bin] = static_cast<std::int32_t>(bin_below.size());
          bin_below.push_back(below);
        }
        rank_slot[order[r].second] = slot[bin];
        ++r;
      }
      below += hist[bin];
    }
  }
  std::vector<std::vector<std::uint32_t>> bins(bin_below.size());
  // The wanted bins are few (≤ 2 per quantile): a vectorised pass flags the values in any of them by
  // comparing against each (no table lookup per value), and only the flagged ones are read again.
  constexpr int kWant = 8;
  if (bin_below.size() <= static_cast<std::size_t>(kWant)) {
    std::uint32_t want[kWant];
    int nw = 0;
    for (int bin = 0; bin < kBins; ++bin)
      if (slot[bin] >= 0) want[nw++] = static_cast<std::uint32_t>(bin);
    for (int w = nw; w < kWant; ++w) want[w] = want[0];
    constexpr std::size_t kChunk = 2048;
    alignas(64) std::uint8_t hit[kChunk];
    for (auto& p : parts)
      for (std::size_t c0 = 0; c0 < p.size(); c0 += kChunk) {
        const std::size_t len = std::min(kChunk, p.size() - c0);
        const float* x = p.data() + c0;
        for (std::size_t j = 0; j < len; ++j) {
          const std::uint32_t kb = f32_key(x[j]) >> 16;
          std::uint8_t h = 0;
          for (int w = 0; w < kWant; ++w) h |= kb == want[w];
          hit[j] = h;
        }
        for (std::size_t j = 0; j < len; j += 8) {
          std::uint64_t word = 0;
          std::memcpy(&word, hit + j, std::min<std::size_t>(8, len - j));
          for (; word; word &= word - 1) {
            const std::size_t t = j + static_cast<std::size_t>(std::countr_zero(word)) / 8;
            const std::uint32_t key = f32_key(x[t]);
            bins[slot[key >> 16]].push_back(key);
          }
        }
      }
  } else {
    for (auto& p : parts)
      for (float x : p) {
        std::uint32_t key = f32_key(x);
        if (std::int32_t sl = slot[key >> 16]; sl >= 0) bins[sl].push_back(key);
      }
  }
  for (auto& b : bins) std::sort(b.begin(), b.end());  // small unless the values pile up in one bin
  auto at = [&](std::size_t i) -> double {
    int sl = rank_slot[i];
    return key_f32(bins[sl][ranks[i] - bin_below[sl]]);
  };
  std::size_t i = 0;
  for (double q : qs) {
    double h = q * static_cast<double>(n - 1);
    double a = at(2 * i), b = at(2 * i + 1);
    out.push_back(a + (h - static_cast<double>(ranks[2 * i])) * (b - a));
    ++i;
  }
  return out;
}

KlStats kl_stats(const Parts& values, const ExactSum& sum, const ExactSum& sq, double max) {
  KlStats s;
  for (auto& p : values) s.n += static_cast<std::int64_t>(p.size());
  if (s.n == 0) return s;
  const double n = static_cast<double>(s.n);
  s.mean = sum.value() / n;
  if (s.n > 1) s.stderr_ = std::sqrt(std::max(0.0, (sq.value() - n * s.mean * s.mean) / (n - 1)) / n);
  auto q = quantiles(values, {0.5, 0.9, 0.99, 0.999});
  s.median = q[0];
  s.p90 = q[1];
  s.p99 = q[2];
  s.p999 = q[3];
  s.max = max;
  return s;
}

// c: the split's merged scalars (CellStats::merge without values); kl, full: its cells' value arrays.
SplitSummary split_summary(const CellStats& c, const Parts& kl, const Parts& full, SplitId id) {
  SplitSummary s;
  s.id = std::move(id);
  s.n = static_cast<std::int64_t>(c.n);
  s.nonfinite = static_cast<std::int64_t>(c.nonfinite);
  s.q_other_clamped = static_cast<std::int64_t>(c.q_other_clamped);
  s.kl = kl_stats(kl, c.kl, c.kl_sq, c.kl_max);
  std::uint64_t fu = 0;  // flips at margin in (0, 1]
  for (int b = 0; b < kMarginBins; ++b) {
    BinCount& bc = s.bins[b];
    bc.n = c.bin_n[b];
    bc.flips = c.bin_flips[b];
    bc.tie_flips = c.bin_tie_flips[b];
    s.tie_flips += bc.tie_flips;
    bc.rate = bc.n ? static_cast<double>(bc.flips) / static_cast<double>(bc.n) : NAN;
    auto [lo, hi] = wilson_interval(bc.flips, bc.n);
    bc.ci_lo = lo;
    bc.ci_hi = hi;
    s.flips += bc.flips;
    if (uncertain_bin(b)) s.n_uncertain += bc.n, fu += bc.flips;
    if (b >= kHighMarginBin) s.high_margin_flips += bc.flips;
  }
  s.flip_rate = s.n ? static_cast<double>(s.flips) / static_cast<double>(s.n) : NAN;
  s.flip_rate_uncertain = s.n_uncertain ? static_cast<double>(fu) / static_cast<double>(s.n_uncertain) : NAN;
  s.n_token = static_cast<std::int64_t>(c.n_token);
  if (c.n_token) {
    const double nt = static_cast<double>(c.n_token);
    s.delta_p_mean = c.delta_p.value() / nt;
    s.delta_p_rms = std::sqrt(c.delta_p_sq.value() / nt);
    s.ppl_ref = std::exp(c.nll_ref.value() / nt);
    s.ppl_cand = std::exp(c.nll_cand.value() / nt);
    s.ln_ppl_ratio = c.nll_diff.value() / nt;
    if (c.n_token > 1) {
      s.delta_p_stderr = std::sqrt(
          std::max(0.0, (c.delta_p_sq.value() - nt * s.delta_p_mean * s.delta_p_mean) / (nt - 1)) / nt);
      s.ln_ppl_ratio_stderr = std::sqrt(
          std::max(0.0, (c.nll_diff_sq.value() - nt * s.ln_ppl_ratio * s.ln_ppl_ratio) / (nt - 1)) / nt);
    }
  }
  if (c.n_sigma) s.sigma = std::sqrt(c.sigma2.value() / static_cast<double>(c.n_sigma));
  s.coverage_ids = c.ids_total ? static_cast<double>(c.ids_covered) / static_cast<double>(c.ids_total) : NAN;
  double mass = c.mass.value();
  s.coverage_mass = mass > 0 ? 1.0 - c.mass_missing.value() / mass : NAN;
  s.positions_partial = c.positions_partial;
  s.upper_infinite = c.upper_infinite;
  std::uint64_t finite_n = static_cast<std::uint64_t>(s.kl.n);
  s.kl_upper_mean = (c.upper_infinite == 0 && finite_n)
                        ? (c.kl.value() + c.kl_upper_excess.value()) / static_cast<double>(finite_n)
                        : NAN;
  s.full_kl = kl_stats(full, c.full_kl, c.full_kl_sq, c.full_kl_max);
  if (c.n_full == 0) s.full_kl.max = NAN;
  return s;
}

}  // namespace

RunSummary summarize(const JudgeAccumulator& acc, const std::string& path, double high_kl_threshold) {
  RunSummary r;
  r.path = path;
  const int nd = static_cast<int>(acc.domains.size());
  CellStats all;
  std::vector<CellStats> dom(nd), phase(kPhases), depth(kDepthBuckets);
  Parts all_kl, all_full;
  std::vector<Parts> dom_kl(nd), dom_full(nd), phase_kl(kPhases), phase_full(kPhases),
      depth_kl(kDepthBuckets), depth_full(kDepthBuckets);
  // Each cell's KL values are histogrammed once (in parallel over cells); its four splits (overall,
  // domain, phase, depth) add the histograms up instead of reading the values again.
  std::vector<std::vector<std::uint32_t>> hists(acc.cells.size());
  parallel_for(acc.cells.size(), 1, [&](std::size_t, std::size_t b, std::size_t) {
    const std::vector<float>& kv = acc.cells[b].kl_values;
    if (!acc.cells[b].n || kv.empty() || kv.size() >= (std::size_t{1} << 32)) return;
    hists[b].assign(kKeyBins, 0);
    for (float x : kv) ++hists[b][f32_key(x) >> 16];
  });
  for (int d = 0; d < nd; ++d)
    for (int b = 0; b < kDepthBuckets; ++b)
      for (int p = 0; p < kPhases; ++p) {
        const std::size_t ci = cell_index(d, b, p);
        const CellStats& c = acc.cells[ci];
        if (!c.n) continue;
        for (CellStats* m : {&all, &dom[d], &phase[p], &depth[b]}) m->merge(c, /*values=*/false);
        const std::span<const float> kv(c.kl_values), fv(c.full_kl_values);
        const std::uint32_t* h = hists[ci].empty() ? nullptr : hists[ci].data();
        for (Parts* m : {&all_kl, &dom_kl[d], &phase_kl[p], &depth_kl[b]}) m->push_back(kv, h);
        for (Parts* m : {&all_full, &dom_full[d], &phase_full[p], &depth_full[b]}) m->push_back(fv);
      }
  // Every split's summary is independent of the others: one task each, in parallel, kept in this order.
  struct Task {
    const CellStats* c;
    const Parts *kl, *full;
    SplitId id;
    std::vector<SplitSummary>* out;  // nullptr: r.overall
  };
  std::vector<Task> tasks = {{&all, &all_kl, &all_full, SplitId::overall(), nullptr}};
  for (int d = 0; d < nd; ++d)
    if (dom[d].n)
      tasks.push_back({&dom[d], &dom_kl[d], &dom_full[d], SplitId::domain(d, acc.domains[d]), &r.by_domain});
  for (int p = 0; p < kPhases; ++p)
    if (phase[p].n)
      tasks.push_back({&phase[p], &phase_kl[p], &phase_full[p], SplitId::phase(p), &r.by_phase});
  for (int b = 0; b < kDepthBuckets; ++b)
    if (depth[b].n)
      tasks.push_back({&depth[b], &depth_kl[b], &depth_full[b], SplitId::depth(b), &r.by_depth});
  std::vector<SplitSummary> done(tasks.size());
  parallel_for(tasks.size(), 1, [&](std::size_t i, std::size_t, std::size_t) {
    done[i] = split_summary(*tasks[i].c, *tasks[i].kl, *tasks[i].full, tasks[i].id);
  });
  r.overall = std::move(done[0]);
  for (std::size_t i = 1; i < tasks.size(); ++i) tasks[i].out->push_back(std::move(done[i]));
  // High-KL positions that did not flip; by default "high" is above the overall p99.
  double t = std::isnan(high_kl_threshold) ? r.overall.kl.p99 : high_kl_threshold;
  r.high_kl_threshold = t;
  if (!std::isnan(t)) {
    for (auto& p : all_kl)
      for (float x : p) r.high_kl += x > t;
    std::uint64_t flipped = 0;
    for (float x : all.flipped_kl) flipped += x > t;
    r.high_kl_no_flip = r.high_kl - flipped;
    r.high_kl_no_flip_share =
        r.high_kl ? static_cast<double>(r.high_kl_no_flip) / static_cast<double>(r.high_kl) : NAN;
  }
  // Pinsker: each segment is one "answer" of T steps; the bound uses the mean over answers (Jensen).
  double sum = 0, steps = 0, mx = 0;
  int segs = 0;
  for (int s = 0; s < acc.n_segments; ++s) {
    if (!acc.segment_n[s]) continue;
    double kls = std::max(0.0, acc.segment_kl[s].value());
    sum += kls;
    steps += static_cast<double>(acc.segment_n[s]);
    mx = std::max(mx, std::sqrt(0.5 * kls));
    ++segs;
  }
  if (segs) {
    r.pinsker_bound = std::sqrt(0.5 * sum / segs);
    r.pinsker_steps = steps / segs;
    r.pinsker_max_segment = mx;
  }
  return r;
}

double domain_median(const RunSummary& s, const std::string& name) {
  for (const auto& d : s.by_domain)
    if (d.id.name == name) return d.kl.median;
  return NAN;
}

}  // namespace kc
