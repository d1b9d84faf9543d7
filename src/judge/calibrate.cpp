#include "judge/calibrate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"

namespace kc {

bool preferred_statistic(const std::string& key) {
  const StatDef* d = statistic_of_key(key);
  return d && d->preferred;
}

std::map<std::string, double> calibration_table(const RunSummary& r, const JudgeOptions& o) {
  std::map<std::string, double> t = stat_table(r, o);
  for (const SplitSummary* s : all_splits(r))
    if (s->n < o.min_split_tail)
      for (const StatDef& d : statistics())
        if (d.tail) t.erase(s->id.prefix() + d.name);
  return t;
}

void require_runs(std::size_t good, std::size_t bad) {
  if (good < 2 || bad < 2)
    fail("calibrate: expected at least 2 --good and 2 --bad runs (got {} and {}): with fewer, the limits "
         "rest on single runs and leave-one-out cannot check them",
         good, bad);
}

CalibrationResult calibrate(const std::vector<std::pair<std::string, std::map<std::string, double>>>& good,
                            const std::vector<std::pair<std::string, std::map<std::string, double>>>& bad,
                            bool leave_one_out) {
  if (good.empty() || bad.empty()) fail("calibrate: expected at least one --good and one --bad run");
  CalibrationResult res;
  // Statistics present in every run.
  std::set<std::string> keys;
  for (auto& [k, v] : good[0].second) keys.insert(k);
  auto keep_common = [&](const std::map<std::string, double>& t) {
    for (auto it = keys.begin(); it != keys.end();) it = t.count(*it) ? std::next(it) : keys.erase(it);
  };
  for (auto& g : good) keep_common(g.second);
  for (auto& b : bad) keep_common(b.second);
  for (const StatDef& d : statistics())
    if (d.always_fails) keys.erase(d.name);  // overall: a failure in every mode, needs no threshold
  // The greedy cover fits upper limits: a statistic where lower is worse is left to hand-written limits.
  for (auto it = keys.begin(); it != keys.end();) {
    const StatDef* d = statistic_of_key(*it);
    it = d && !d->higher_is_worse ? keys.erase(it) : std::next(it);
  }
  std::map<std::string, double> gmax;
  for (auto& k : keys) {
    double m = -INFINITY;
    for (auto& g : good) m = std::max(m, g.second.at(k));
    gmax[k] = m;
  }
  auto sep = [](double b, double g) { return g > 0 ? b / g : (b > g ? INFINITY : 0.0); };
  auto depth_of = [](const std::string& k) { return std::count(k.begin(), k.end(), '.'); };  // overall first
  // Best statistic per bad run (report).
  for (auto& [name, t] : bad) {
    StatSeparation best;
    best.separation = -1;
    for (auto& k : keys) {
      double s = sep(t.at(k), gmax[k]);
      if (t.at(k) > gmax[k] &&
          (s > best.separation || (s == best.separation && depth_of(k) < depth_of(best.key)))) {
        best.key = k;
        best.separation = s;
        best.good_max = gmax[k];
        best.bad_min_caught = t.at(k);
      }
    }
    if (best.separation < 0) res.unseparated.push_back(name);
    res.best_per_bad.emplace_back(name, best);
  }
  // Greedy cover.
  std::vector<bool> caught(bad.size(), false);
  for (std::size_t i = 0; i < bad.size(); ++i)
    if (std::find(res.unseparated.begin(), res.unseparated.end(), bad[i].first) != res.unseparated.end())
      caught[i] = true;
  while (std::find(caught.begin(), caught.end(), false) != caught.end()) {
    std::string best_key;
    double best_sep = -1;
    for (int tier = 0; tier < 2 && best_key.empty(); ++tier)  // KL and flip statistics first
      for (auto& k : keys) {
        if (preferred_statistic(k) != (tier == 0)) continue;
        for (std::size_t i = 0; i < bad.size(); ++i) {
          if (caught[i]) continue;
          double b = bad[i].second.at(k);
          if (!(b > gmax[k])) continue;
          double s = sep(b, gmax[k]);
          if (s > best_sep || (s == best_sep && depth_of(k) < depth_of(best_key))) best_sep = s, best_key = k;
        }
      }
    KC_ASSERT(!best_key.empty(), "calibrate: an uncaught bad run without a separating statistic");
    StatSeparation st;
    st.key = best_key;
    st.good_max = gmax[best_key];
    st.bad_min_caught = INFINITY;
    for (std::size_t i = 0; i < bad.size(); ++i) {
      double b = bad[i].second.at(best_key);
      if (b > st.good_max) st.bad_min_caught = std::min(st.bad_min_caught, b);
    }
    st.limit =
        st.good_max > 0 ? std::sqrt(st.good_max * st.bad_min_caught) : (st.good_max + st.bad_min_caught) / 2;
    st.separation = sep(st.bad_min_caught, st.good_max);
    for (std::size_t i = 0; i < bad.size(); ++i)
      if (bad[i].second.at(best_key) > st.limit) {
        caught[i] = true;
        st.catches.push_back(bad[i].first);
      }
    res.thresholds.limits[best_key] = st.limit;
    int above = 0;
    for (auto& b : bad) above += b.second.at(best_key) > st.good_max;
    if (above == 1) res.rests_on_one.push_back(best_key);
    res.chosen.push_back(st);
  }
  if (leave_one_out) {
    auto judged_by = [](const Thresholds& t, const std::map<std::string, double>& run) {
      for (auto& [k, lim] : t.limits) {
        auto it = run.find(k);
        if (it != run.end() && it->second > lim) return k;
      }
      return std::string();
    };
    for (int side = 0; side < 2; ++side) {
      const auto& own = side == 0 ? good : bad;
      if (own.size() < 2) continue;
      for (std::size_t i = 0; i < own.size(); ++i) {
        auto rest = own;
        rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
        CalibrationResult r = side == 0 ? calibrate(rest, bad, false) : calibrate(good, rest, false);
        std::string failed_by = judged_by(r.thresholds, own[i].second);
        res.loo.push_back({own[i].first, side == 0, side == 0 ? failed_by.empty() : !failed_by.empty(), failed_by});
      }
    }
  }
  return res;
}

}  // namespace kc
