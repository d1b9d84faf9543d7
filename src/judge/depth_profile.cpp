// The depth profile and its onset (docs/judge.md, "Depth profile and onset"): the candidate's KL mean against
// the floor's in fine depth buckets, each bucket's paired test (the floor test's, on the bucket's positions),
// and the depth from which the candidate stays outside the floor's spread.
#include <algorithm>
#include <cmath>
#include <random>

#include "judge/evidence.h"

namespace kc::evidence {

namespace {

constexpr int kOnsetResamples = 200;               // segment bootstrap of the onset
constexpr std::uint64_t kOnsetSeed = 0x6f6e736574;  // fixed: the same report for the same inputs

// Fine depth buckets (profile_bucket) merged from the shallow end until each group holds ≥ min positions of
// the candidate; what is left at the deep end (fewer than min) joins the deepest group. group_of[fine] =
// its group, or -1 where the candidate has no finite position.
struct Groups {
  std::vector<int> group_of;
  std::vector<std::pair<int, int>> fine;  // first and last fine bucket of each group
};
Groups make_groups(const JudgeAccumulator& cand, std::int64_t min_positions) {
  std::vector<std::uint64_t> n;
  for (const auto& seg : cand.segment_depths)
    for (const SegmentDepthSum& d : seg) {
      if (static_cast<std::size_t>(d.bucket) >= n.size()) n.resize(d.bucket + 1, 0);
      n[d.bucket] += d.n;
    }
  Groups g;
  g.group_of.assign(n.size(), -1);
  std::uint64_t have = 0;
  int first = -1;
  for (int f = 0; f < static_cast<int>(n.size()); ++f) {
    if (!n[f]) continue;
    if (first < 0) first = f;
    have += n[f];
    if (have >= static_cast<std::uint64_t>(min_positions)) {
      g.fine.emplace_back(first, f);
      first = -1, have = 0;
    }
  }
  if (first >= 0 && !g.fine.empty()) g.fine.back().second = static_cast<int>(n.size()) - 1;
  for (int b = 0; b < static_cast<int>(g.fine.size()); ++b)
    for (int f = g.fine[b].first; f <= g.fine[b].second; ++f) g.group_of[f] = b;
  return g;
}

// sums[group][segment]: one run's Σ KL and count per segment in each group.
using GroupSums = std::vector<std::vector<SegmentSum>>;
GroupSums group_sums(const JudgeAccumulator& a, const Groups& g) {
  GroupSums s(g.fine.size(), std::vector<SegmentSum>(a.n_segments));
  for (int j = 0; j < a.n_segments; ++j)
    for (const SegmentDepthSum& d : a.segment_depths[j]) {
      const int b = static_cast<std::size_t>(d.bucket) < g.group_of.size() ? g.group_of[d.bucket] : -1;
      if (b < 0) continue;  // a depth the candidate has no finite position at
      s[b][j].kl.merge(d.kl);
      s[b][j].n += d.n;
    }
  return s;
}

// The paired test of group b over every segment.
Paired bucket_test(const GroupSums& cand, const std::vector<GroupSums>& floor, int b) {
  const std::vector<double> xc = contributions(cand[b], nullptr, nullptr);
  std::vector<std::vector<double>> xf;
  for (const GroupSums& f : floor) xf.push_back(contributions(f[b], nullptr, nullptr));
  std::vector<const std::vector<double>*> fp;
  for (auto& x : xf) fp.push_back(&x);
  return paired_test(xc, fp);
}

// The segment bootstrap's view of one group: per run (candidate first, then the floor runs) and segment,
// Σ KL as a double and the count; a resample's contributions are x_j = Σ KL of its j-th drawn segment / the
// drawn segments' count (contributions' definition on the drawn segments, without re-summing).
struct Resampler {
  std::vector<std::vector<std::vector<double>>> sum;       // [group][run][segment]
  std::vector<std::vector<std::vector<std::uint64_t>>> n;  // [group][run][segment]
  std::vector<std::vector<double>> x;                      // [run][draw]: scratch
  Resampler(const GroupSums& cand, const std::vector<GroupSums>& floor) {
    sum.resize(cand.size()), n.resize(cand.size());
    for (std::size_t b = 0; b < cand.size(); ++b) {
      auto add = [&](const GroupSums& run) {
        sum[b].emplace_back(), n[b].emplace_back();
        for (const SegmentSum& s : run[b]) sum[b].back().push_back(s.kl.value()), n[b].back().push_back(s.n);
      };
      add(cand);
      for (const GroupSums& f : floor) add(f);
    }
    x.resize(1 + floor.size());
  }
  double t(std::size_t b, const std::vector<int>& pick) {
    for (std::size_t q = 0; q < x.size(); ++q) {
      x[q].resize(pick.size());
      std::uint64_t total = 0;
      for (std::size_t i = 0; i < pick.size(); ++i) x[q][i] = sum[b][q][pick[i]], total += n[b][q][pick[i]];
      if (total)
        for (double& v : x[q]) v /= static_cast<double>(total);
    }
    std::vector<const std::vector<double>*> fp;
    for (std::size_t q = 1; q < x.size(); ++q) fp.push_back(&x[q]);
    return paired_test(x[0], fp).t;
  }
};

// The onset rule (docs/judge.md, "Depth profile and onset"), on the buckets' paired t in depth order and
// the critical value c: none unless the deepest bucket is outside (t > c), which alone sets the false-alarm
// rate; then the start of the deep run of buckets that maximises Σ (min(t, 2c) − c) from it to the deepest —
// the cumulative-sum change point, the maximum-likelihood start of a shift of 2c in t: every bucket it adds
// at the shallow end is outside on balance, and one bucket that dips under c deeper down does not move it
// (a bucket without spread counts as t = 0). The cap keeps one extreme bucket from pulling it shallower.
// Returns the bucket index or -1.
int onset_of(const std::vector<double>& t, double c) {
  if (t.empty() || !(t.back() > c)) return -1;
  double run = 0, best = -INFINITY;
  int at = -1;
  for (int b = static_cast<int>(t.size()) - 1; b >= 0; --b) {
    run += (std::isfinite(t[b]) ? std::min(t[b], 2 * c) : 0.0) - c;
    if (run > best) best = run, at = b;  // ties keep the deeper start
  }
  return at;
}

void find_onset(DepthProfile& P, const GroupSums& cand, const std::vector<GroupSums>& floor, double alpha,
                int n_segments) {
  DepthOnset& on = P.onset;
  std::vector<double> t;
  bool spread = false;
  for (const DepthBucket& b : P.buckets) {
    t.push_back(b.t);
    spread |= std::isfinite(b.t);
  }
  if (!spread) return;
  on.tested = true;
  on.df = static_cast<double>(floor.size()) - 1;
  on.t_critical = student_t_quantile(1 - alpha, on.df);
  for (std::size_t b = 0; b < P.buckets.size(); ++b) P.buckets[b].outside = t[b] > on.t_critical;
  on.bucket = onset_of(t, on.t_critical);
  on.found = on.bucket >= 0;
  if (!on.found) return;
  on.depth = P.buckets[on.bucket].lo;
  double c = 0, f = 0;  // the KL means from the onset on, weighted by the buckets' positions
  for (std::size_t b = on.bucket; b < P.buckets.size(); ++b) {
    c += P.buckets[b].cand * static_cast<double>(P.buckets[b].n);
    f += P.buckets[b].floor_mean * static_cast<double>(P.buckets[b].n);
  }
  on.ratio_after = f > 0 ? c / f : NAN;
  // Its uncertainty over the corpus: the same rule on the segments resampled with replacement.
  std::vector<int> segs;
  for (int j = 0; j < n_segments; ++j)
    for (const auto& g : cand)
      if (g[j].n) {
        segs.push_back(j);
        break;
      }
  std::mt19937_64 rng(kOnsetSeed);
  Resampler rs(cand, floor);
  std::vector<std::int64_t> found;
  std::vector<int> pick(segs.size());
  std::vector<double> tr(P.buckets.size());
  for (int r = 0; r < kOnsetResamples; ++r) {
    for (int& j : pick) j = segs[rng() % segs.size()];
    for (std::size_t b = 0; b < P.buckets.size(); ++b) tr[b] = rs.t(b, pick);
    const int o = onset_of(tr, on.t_critical);
    if (o >= 0) found.push_back(P.buckets[o].lo);
  }
  on.resamples = kOnsetResamples;
  on.found_share = static_cast<double>(found.size()) / kOnsetResamples;
  if (!found.empty()) {
    std::sort(found.begin(), found.end());
    const double last = static_cast<double>(found.size() - 1);
    on.lo = found[static_cast<std::size_t>(std::floor(0.05 * last))];
    on.hi = found[static_cast<std::size_t>(std::ceil(0.95 * last))];
  }
}

}  // namespace

void depth_profile(JudgeReport& R, const JudgeAccumulator& cand, const std::vector<JudgeAccumulator>& noise) {
  DepthProfile& P = R.depth_profile;
  P.kept = cand.has_segment_depths &&
           std::all_of(noise.begin(), noise.end(), [](const JudgeAccumulator& a) { return a.has_segment_depths; });
  if (!P.kept) return;
  const Groups g = make_groups(cand, R.options.min_split_center);
  const GroupSums cs = group_sums(cand, g);
  std::vector<GroupSums> fs;
  for (const JudgeAccumulator& a : noise) fs.push_back(group_sums(a, g));
  for (int b = 0; b < static_cast<int>(g.fine.size()); ++b) {
    DepthBucket db;
    db.lo = profile_bucket_lower(g.fine[b].first);
    db.hi = profile_bucket_lower(g.fine[b].second + 1);
    if (cand.depth_max >= 0) db.hi = std::min<std::int64_t>(db.hi, cand.depth_max + std::int64_t{1});
    const std::vector<double> xc = contributions(cs[b], &db.n, &db.segments);
    db.cand = 0;
    for (double x : xc) db.cand += x;
    if (!fs.empty()) {
      double sum = 0, lo = INFINITY, hi = -INFINITY;
      for (const GroupSums& f : fs) {
        double m = 0;
        for (double x : contributions(f[b], nullptr, nullptr)) m += x;
        sum += m, lo = std::min(lo, m), hi = std::max(hi, m);
      }
      db.floor_mean = sum / static_cast<double>(fs.size()), db.floor_lo = lo, db.floor_hi = hi;
    }
    if (fs.size() >= 2) {
      const Paired p = bucket_test(cs, fs, b);
      db.floor_mean = p.floor_mean;  // the floor test's mean (exact for identical runs)
      db.df = p.df;
      if (std::isfinite(p.t)) db.t = p.t, db.p_value = student_t_cdf(-p.t, p.df);
    }
    P.buckets.push_back(db);
  }
  if (fs.size() >= 2 && !P.buckets.empty()) find_onset(P, cs, fs, R.options.onset_alpha, cand.n_segments);
}

}  // namespace kc::evidence
