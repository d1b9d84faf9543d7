// `kerncheck test --html`: one self-contained page (inline CSS and SVG, no script, no external resource).
#include "judge/judge_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>  // before judge.h, whose headers use NAN
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "judge/svg_plot.h"
#include "judge/words.h"

namespace kc {

namespace {

using svg::escape;

// KL of 0 (identical rows) cannot sit on a log axis: drawn at this floor, and said so in the caption.
constexpr double kKlPlotFloor = 1e-10;
// Points of the scatter: every flip of the sample, and at most this many positions without a flip.
constexpr std::size_t kMaxPlainPoints = 8000;

std::string num(double v) {
  if (std::isnan(v)) return "–";
  if (std::isinf(v)) return v > 0 ? "∞" : "−∞";
  return fmt::format("{:.4g}", v);
}
std::string pct(double v) { return std::isnan(v) ? "–" : fmt::format("{:.3g}%", 100 * v); }

const char* verdict_color(Verdict v) {
  switch (v) {
    case Verdict::pass:
      return "#1a7f37";
    case Verdict::fail:
      return "#cf222e";
    default:
      return "#9a6700";
  }
}

std::string domain_name(const JudgeReport& r, std::uint8_t d) {
  return d < r.domains.size() ? r.domains[d] : fmt::format("domain {}", d);
}

// ---- plots -------------------------------------------------------------------------------------------

std::string plot_kl_cdf(const JudgeReport& r) {
  svg::Plot p;
  p.id = "kl-cdf";
  p.title = "Per-position KL, cumulative distribution by domain";
  p.x = {"KL(P‖Q) over top-k + other (log scale)", svg::Scale::log10};
  p.y = {"fraction of positions ≤ KL", svg::Scale::linear, 0, 1};
  std::vector<std::vector<double>> by_domain(std::max<std::size_t>(r.domains.size(), 1));
  for (const SamplePoint& s : r.sample) {
    if (s.domain >= by_domain.size()) by_domain.resize(s.domain + 1);
    if (std::isfinite(s.kl)) by_domain[s.domain].push_back(std::max<double>(s.kl, kKlPlotFloor));
  }
  for (std::size_t d = 0; d < by_domain.size(); ++d) {
    auto& v = by_domain[d];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    svg::Series se;
    se.name = fmt::format("{} (n={})", domain_name(r, static_cast<std::uint8_t>(d)), v.size());
    se.mark = svg::Mark::step;
    se.css_class = "cdf";
    // At most ~400 vertices per curve: the quantiles at evenly spaced fractions.
    std::size_t steps = std::min<std::size_t>(v.size(), 400);
    se.x.push_back(v.front());
    se.y.push_back(0);
    for (std::size_t i = 1; i <= steps; ++i) {
      std::size_t idx = (i * v.size()) / steps - 1;
      se.x.push_back(v[idx]);
      se.y.push_back(static_cast<double>(idx + 1) / static_cast<double>(v.size()));
    }
    p.series.push_back(std::move(se));
  }
  return svg::render(p);
}

std::string plot_kl_margin(const JudgeReport& r, std::size_t& n_flips_drawn, std::size_t& n_plain_drawn) {
  svg::Plot p;
  p.id = "kl-margin";
  p.title = "KL vs reference margin (top-1 − top-2 log-prob); flips in orange";
  p.x = {"margin (linear to 1, log above on grey)", svg::Scale::margin};
  p.y = {"KL (log scale)", svg::Scale::log10};
  p.width = 620;
  p.height = 380;
  svg::Series plain, flips;
  plain.mark = flips.mark = svg::Mark::points;
  plain.name = "no flip";
  plain.color = "#0072B2";
  plain.css_class = "point";
  plain.radius = 1.6;
  flips.name = "flip";
  flips.color = "#E69F00";
  flips.css_class = "flip";
  flips.radius = 3.0;
  for (const SamplePoint& s : r.sample) {  // the sample is in hash order: a uniform random subset
    double kl = std::isfinite(s.kl) ? std::max<double>(s.kl, kKlPlotFloor) : NAN;
    if (s.flip) {
      flips.x.push_back(s.margin);
      flips.y.push_back(std::isfinite(kl) ? kl : kKlPlotFloor);
      flips.titles.push_back(
          fmt::format("position {} depth {} margin {} KL {}", s.position, s.depth, num(s.margin), num(s.kl)));
    } else if (plain.x.size() < kMaxPlainPoints && std::isfinite(kl)) {
      plain.x.push_back(s.margin);
      plain.y.push_back(kl);
    }
  }
  n_flips_drawn = flips.x.size();
  n_plain_drawn = plain.x.size();
  p.series.push_back(std::move(plain));
  p.series.push_back(std::move(flips));
  return svg::render(p);
}

std::string plot_flip_bins(const JudgeReport& r) {
  svg::Plot p;
  p.id = "flip-bins";
  p.title = "Flip rate by margin bin (95 % Wilson intervals)";
  p.x = {"reference margin bin", svg::Scale::linear};
  p.y = {"flip rate", svg::Scale::linear};
  p.width = 620;
  svg::Series cand, floor;
  cand.name = "candidate";
  cand.mark = svg::Mark::bars;
  cand.color = "#0072B2";
  cand.css_class = "bin-cand";
  cand.bar_offset = r.has_floor ? -0.5 : 0;
  floor.name = "noise floor";
  floor.mark = svg::Mark::bars;
  floor.color = "#999999";
  floor.css_class = "bin-floor";
  floor.bar_offset = 0.5;
  for (std::size_t b = 0; b < r.bins.size(); ++b) {
    const BinReport& br = r.bins[b];
    p.x_categories.push_back(br.label + (br.rejected ? " *" : ""));
    auto put = [&](svg::Series& s, const BinCount& c) {
      s.x.push_back(static_cast<double>(b));
      s.y.push_back(c.n ? c.rate : NAN);
      s.y_lo.push_back(c.n ? c.ci_lo : NAN);
      s.y_hi.push_back(c.n ? c.ci_hi : NAN);
      s.titles.push_back(fmt::format("{}: {} flips of {}", br.label, c.flips, c.n));
    };
    put(cand, br.cand);
    put(floor, br.floor);
  }
  p.series.push_back(std::move(cand));
  if (r.has_floor) p.series.push_back(std::move(floor));
  return svg::render(p);
}

std::string plot_kl_depth(const JudgeReport& r) {
  svg::Plot p;
  p.id = "kl-depth";
  p.title = "KL by context depth (median and p99)";
  p.x = {"context depth (tokens, bucket lower edge, log scale)", svg::Scale::log10};
  p.y = {"KL (log scale)", svg::Scale::log10};
  auto depth_x = [](const SplitSummary& s) {
    const double x = static_cast<double>(depth_bucket_lower(s.id.index));
    return x <= 0 ? 1.0 : x;  // depth bucket 0 on the log axis
  };
  // The floor band: per depth bucket, the noise runs' KL medians from the lowest to the highest (one run:
  // no spread to draw, only its line).
  if (r.noise.size() >= 2) {
    svg::Series band;
    band.name = fmt::format("floor runs' median, min–max ({} runs)", r.noise.size());
    band.mark = svg::Mark::band;
    band.color = "#777777";
    band.css_class = "floor-band";
    for (const SplitSummary& s : r.noise.front().by_depth) {
      double lo = INFINITY, hi = -INFINITY;
      for (const RunSummary& run : r.noise)
        for (const SplitSummary& t : run.by_depth)
          if (t.id == s.id && std::isfinite(t.kl.median)) {
            lo = std::min(lo, std::max(t.kl.median, kKlPlotFloor));
            hi = std::max(hi, std::max(t.kl.median, kKlPlotFloor));
          }
      band.x.push_back(depth_x(s));
      band.y_lo.push_back(std::isfinite(lo) ? lo : NAN);
      band.y_hi.push_back(std::isfinite(hi) ? hi : NAN);
    }
    if (!band.x.empty()) p.series.push_back(std::move(band));
  }
  // Four lines in two colours: the dash tells median from p99, and the floor's from the candidate's.
  auto add = [&](const std::vector<SplitSummary>& splits, const std::string& who, const std::string& med_dash,
                 const std::string& p99_dash, const std::string& color) {
    svg::Series med, p99;
    med.name = who + " median";
    p99.name = who + " p99";
    med.color = p99.color = color;
    med.dasharray = med_dash;
    p99.dasharray = p99_dash;
    med.css_class = p99.css_class = "depth-line";
    for (const SplitSummary& s : splits) {
      double x = depth_x(s);
      med.x.push_back(x);
      med.y.push_back(std::max(s.kl.median, kKlPlotFloor));
      p99.x.push_back(x);
      p99.y.push_back(std::max(s.kl.p99, kKlPlotFloor));
    }
    if (!med.x.empty()) {
      p.series.push_back(std::move(med));
      p.series.push_back(std::move(p99));
    }
  };
  add(r.cand.by_depth, "candidate", "", "6,3", "#0072B2");
  if (!r.noise.empty()) add(r.noise.front().by_depth, "floor", "2,3", "8,3,2,3", "#777777");
  return svg::render(p);
}

// The depth profile: the candidate's KL mean over the floor's per fine depth bucket, the floor runs' own
// spread on the same scale (min … max over the floor mean), the buckets outside the spread, and the onset.
// Without noise runs: the candidate's KL mean.
std::string plot_depth_profile(const JudgeReport& r) {
  const DepthProfile& P = r.depth_profile;
  svg::Plot p;
  p.id = "depth-profile";
  const bool floor = r.has_floor;
  p.title = floor ? "Depth profile: KL mean over the floor's" : "Depth profile: KL mean";
  p.x = {"context depth (tokens, log scale; a bucket at its geometric middle)", svg::Scale::log10};
  p.y = {floor ? "KL mean ÷ floor mean (log scale)" : "KL mean (log scale)", svg::Scale::log10};
  auto x_of = [](const DepthBucket& b) {
    return std::sqrt(std::max(1.0, static_cast<double>(b.lo)) * static_cast<double>(std::max<std::int64_t>(b.hi - 1, 1)));
  };
  if (floor) {
    svg::Series band;
    band.name = fmt::format("floor runs, min–max ({} runs)", r.noise.size());
    band.mark = svg::Mark::band;
    band.color = "#777777";
    band.css_class = "floor-band";
    for (const DepthBucket& b : P.buckets)
      if (b.floor_mean > 0) {
        band.x.push_back(x_of(b));
        band.y_lo.push_back(b.floor_lo / b.floor_mean);
        band.y_hi.push_back(b.floor_hi / b.floor_mean);
      }
    if (r.noise.size() >= 2 && !band.x.empty()) p.series.push_back(std::move(band));
  }
  svg::Series line, out;
  line.name = floor ? "candidate ÷ floor" : "candidate";
  line.color = "#0072B2";
  line.css_class = "profile-line";
  out.name = fmt::format("outside the floor's spread (t > {:.3g})", P.onset.t_critical);
  out.mark = svg::Mark::points;
  out.color = "#D55E00";
  out.css_class = "outside";
  out.radius = 3;
  double lo = INFINITY, hi = -INFINITY;
  for (const DepthBucket& b : P.buckets) {
    const double y = floor ? b.ratio() : b.cand;
    if (!(y > 0)) continue;
    line.x.push_back(x_of(b));
    line.y.push_back(y);
    line.titles.push_back(fmt::format("depths {}: KL mean {} (floor {}), t {}", words::depth_range(b.lo, b.hi),
                                      num(b.cand), num(b.floor_mean), num(b.t)));
    lo = std::min(lo, y), hi = std::max(hi, y);
    if (b.outside) out.x.push_back(x_of(b)), out.y.push_back(y);
  }
  if (floor)
    for (const DepthBucket& b : P.buckets)
      if (b.floor_mean > 0) lo = std::min(lo, b.floor_lo / b.floor_mean), hi = std::max(hi, b.floor_hi / b.floor_mean);
  p.series.push_back(std::move(line));
  if (P.onset.tested) p.series.push_back(std::move(out));
  if (P.onset.found && lo < hi) {
    svg::Series at;
    at.name = fmt::format("onset: depth {}", P.onset.depth);
    at.color = "#D55E00";
    at.dasharray = "4,3";
    at.css_class = "onset";
    at.x = {static_cast<double>(P.onset.depth), static_cast<double>(P.onset.depth)};
    at.y = {lo, hi};
    p.series.push_back(std::move(at));
  }
  return svg::render(p);
}

// The profile's rows (the text report's --explain table), behind a disclosure.
std::string depth_profile_table(const JudgeReport& r) {
  if (r.depth_profile.buckets.empty()) return "";
  std::string s = fmt::format("<details class=\"depth-profile\"><summary>Depth profile: {} buckets</summary>\n",
                              r.depth_profile.buckets.size());
  s += "<div class=\"scroll\"><table class=\"depth-profile\">\n<tr>";
  for (const std::string& c : depth_profile_header()) s += "<th>" + escape(c) + "</th>";
  s += "</tr>\n";
  const auto rows = depth_profile_rows(r);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    s += fmt::format("<tr class=\"{}\">", r.depth_profile.buckets[i].outside ? "failed" : "ok");
    for (const std::string& c : rows[i]) s += "<td>" + escape(c) + "</td>";
    s += "</tr>\n";
  }
  return s + "</table></div></details>\n";
}

// ---- tables ------------------------------------------------------------------------------------------

std::string row(std::initializer_list<std::string> cells, bool head = false) {
  std::string s = "<tr>";
  for (auto& c : cells) s += fmt::format("<{0}>{1}</{0}>", head ? "th" : "td", c);
  return s + "</tr>\n";
}

// The floor column is what the ratio divides by: the mean of the noise runs' values (floor_stats).
std::string summary_table(const JudgeReport& r) {
  const SplitSummary& o = r.cand.overall;
  auto floor_cell = [&](const StatDef& d) {
    auto it = r.floor_stats.find(d.name);
    return it == r.floor_stats.end() ? std::string("–") : d.share ? pct(it->second) : num(it->second);
  };
  auto ratio = [&](const std::string& key) {
    auto it = r.noise_ratio.find(key);
    return it == r.noise_ratio.end() ? std::string("–") : num(it->second) + "×";
  };
  std::string s = "<table class=\"summary\">\n";
  s += row({"statistic", "candidate",
            r.has_floor ? fmt::format("noise floor (mean of {} run{})", r.noise.size(),
                                      r.noise.size() == 1 ? "" : "s")
                        : "",
            r.has_floor ? "ratio to floor" : ""},
           true);
  const NumberFormat nf{num, pct};
  for (const StatDef& d : statistics())
    s += row(
        {escape(d.label), d.show(o, nf), r.has_floor ? floor_cell(d) : "", r.has_floor ? ratio(d.name) : ""});
  s += "</table>\n";
  s += "<table class=\"extra\">\n";
  s += row({"Pinsker bound |ΔAcc| ≤ √(½ Σ KL)",
            fmt::format("{} (T = {} steps per segment; loose, not a threshold)", num(r.cand.pinsker_bound),
                        num(r.cand.pinsker_steps))});
  s += row({"high-KL positions without a flip",
            fmt::format("{} of {} ({}), KL > {}", r.cand.high_kl_no_flip, r.cand.high_kl,
                        pct(r.cand.high_kl_no_flip_share), num(r.cand.high_kl_threshold))});
  if (!std::isnan(o.coverage_ids) && o.coverage_ids < 1)
    s += row({"coverage (engine top-K')",
              fmt::format("ids {}, probability mass {}, {} positions partial; KL in [{}, {}]",
                          pct(o.coverage_ids), pct(o.coverage_mass), o.positions_partial, num(o.kl.mean),
                          std::isnan(o.kl_upper_mean) ? std::string("∞") : num(o.kl_upper_mean))});
  if (o.full_kl.n)
    s += row({"full-vocabulary KL mean / p99", num(o.full_kl.mean) + " / " + num(o.full_kl.p99)});
  s += "</table>\n";
  return s;
}

std::string finding_row(const Finding& f) {
  return fmt::format("<tr class=\"{}\">", f.failed ? "failed" : "ok") +
         fmt::format(
             "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
             "td><td>{}</td>",
             f.failed ? "✗" : "✓", rule_name(f.rule), escape(f.where()), f.statistic(), num(f.value),
             num(f.limit), num(f.floor), num(f.ratio), escape(f.detail)) +
         "</tr>\n";
}

// One row per (rule, statistic) that failed somewhere: how many splits failed, and the strongest of them.
// Findings are sorted failing first, the strongest first, so the first of a group is its strongest.
std::string failing_summary(const JudgeReport& r) {
  struct Group {
    const Finding* worst;
    int failed = 0, checked = 0;
  };
  std::vector<std::pair<std::pair<Rule, const StatDef*>, Group>>
      groups;  // in order of their strongest finding
  for (const Finding& f : r.findings) {
    const std::pair<Rule, const StatDef*> key{f.rule, f.stat};
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, Group{&f}});
      it = groups.end() - 1;
    }
    it->second.checked++;
    it->second.failed += f.failed;
  }
  std::string s = "<table class=\"failing-summary\">\n";
  s += row({"rule", "statistic", "splits failed", "strongest", "value", "limit", "ratio", "in words"}, true);
  int n = 0;
  for (auto& [key, g] : groups) {
    if (!g.failed) continue;
    const Finding& f = *g.worst;
    ++n;
    s += fmt::format(
        "<tr class=\"failed\"><td>{}</td><td>{}</td><td>{} of "
        "{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td><td>{}</td></tr>\n",
        rule_name(f.rule), f.statistic(), g.failed, g.checked, escape(f.where()), num(f.value), num(f.limit),
        num(f.ratio), escape(words::sentence(f)));
  }
  if (n == 0) return "<p class=\"failing-summary none\">No check failed.</p>\n";
  return s + "</table>\n";
}

// Every check made, one row per split, behind a disclosure: the summary above says what failed.
std::string findings_table(const JudgeReport& r) {
  std::size_t failed = std::count_if(r.findings.begin(), r.findings.end(), [](auto& f) { return f.failed; });
  std::string s = fmt::format("<details class=\"all-checks\"><summary>All {} checks ({} failed)</summary>\n",
                              r.findings.size(), failed);
  s += "<div class=\"scroll\"><table class=\"findings\">\n";
  s += row({"", "rule", "split", "statistic", "value", "limit", "floor", "ratio", "detail"}, true);
  for (const Finding& f : r.findings) s += finding_row(f);
  return s + "</table></div></details>\n";
}

std::string bins_table(const JudgeReport& r) {
  std::string s = "<table class=\"bins\">\n";
  s +=
      row({"margin bin", "positions", "flips", "of which ties", "rate [95 % CI]", "floor rate [95 % CI]",
           "floor ties", "p (Fisher, one-sided)", "significant (Holm)", "expected flips (Gaussian, floor σ)"},
          true);
  auto rate = [](const BinCount& c) {
    return c.n ? fmt::format("{} [{}, {}]", pct(c.rate), pct(c.ci_lo), pct(c.ci_hi)) : std::string("–");
  };
  for (const BinReport& b : r.bins)
    s += row({escape(b.label), std::to_string(b.cand.n), std::to_string(b.cand.flips),
              std::to_string(b.cand.tie_flips), rate(b.cand), r.has_floor ? rate(b.floor) : "–",
              r.has_floor ? std::to_string(b.floor.tie_flips) : "–", num(b.p_value),
              b.rejected ? "yes" : "no", num(b.expected_flips)});
  return s + "</table>\n";
}

// The floor test per split: the text report's rows (floor_test_rows), one source for both.
std::string floor_test_table(const JudgeReport& r) {
  if (r.floor_tests.empty()) return "";
  std::string s = fmt::format(
      "<h2>Floor test</h2>\n<p class=\"floor-test-note\">KL mean paired over segments against the {} noise "
      "runs (Holm, family of {} at α = {}; MDE ×: the increase found with {:.0f} % power; * a split that must "
      "detect {}×).</p>\n<table class=\"floor-test\">\n<tr>",
      r.noise.size(), r.family_size, r.options.alpha, 100 * r.options.power, r.options.mde_target);
  for (const std::string& c : floor_test_header()) s += "<th>" + escape(c) + "</th>";
  s += "</tr>\n";
  for (const FloorTestRow& t : floor_test_rows(r)) {
    s += fmt::format("<tr class=\"{}\">", t.significant ? "failed" : "ok");
    for (std::size_t i = 0; i < t.cells.size(); ++i)
      s += "<td>" + escape(t.cells[i]) + (i == 0 && t.matters ? " *" : "") + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string splits_table(const JudgeReport& r) {
  std::string s = "<table class=\"splits\">\n";
  s += row({"split", "positions", "KL mean", "median", "p99", "max", "flips", "flip rate (0,1]"}, true);
  auto add = [&](const std::vector<SplitSummary>& v) {
    for (const SplitSummary& x : v)
      s += row({escape(x.id.label()), std::to_string(x.n), num(x.kl.mean), num(x.kl.median), num(x.kl.p99),
                num(x.kl.max), std::to_string(x.flips), pct(x.flip_rate_uncertain)});
  };
  add(r.cand.by_domain);
  add(r.cand.by_phase);
  add(r.cand.by_depth);
  return s + "</table>\n";
}

// Token text by id, from what the golden quotes: each worst position's next token (the golden holds the
// segments' text, not the tokenizer's vocabulary, so other ids stay numbers).
std::map<std::int32_t, std::string> known_token_text(const JudgeReport& r) {
  std::map<std::int32_t, std::string> m;
  for (const WorstDetail& w : r.worst)
    if (w.w.token >= 0 && !w.next_text.empty()) m.emplace(w.w.token, w.next_text);
  return m;
}

std::string worst_table(const JudgeReport& r) {
  if (r.worst.empty()) return "";
  const auto text = known_token_text(r);
  std::string s = "<h2>Worst positions</h2>\n<table class=\"worst\">\n";
  s += row({"position", "segment", "KL", "margin", "flip", "next token", "reference top-3 (token: log p)",
            "candidate top-3", "context → next"},
           true);
  auto token = [&](std::int32_t id) {
    auto it = text.find(id);
    return it == text.end()
               ? fmt::format("<span class=\"tok-id\">{}</span>", id)
               : fmt::format("<code class=\"tok\" title=\"id {}\">{}</code>", id, escape(it->second));
  };
  // The page shows the first 20; a longer list (`--worst N`, for `kerncheck locate`) is in the JSON report.
  const std::size_t shown = std::min(r.worst.size(), JudgeAccumulator::kWorst);
  for (std::size_t wi = 0; wi < shown; ++wi) {
    const WorstDetail& w = r.worst[wi];
    auto top3 = [&](const std::array<std::int32_t, 3>& ids, const std::array<float, 3>& lp) {
      std::string t;
      for (int i = 0; i < 3; ++i)
        if (ids[i] >= 0) t += fmt::format("{}{}: {}", t.empty() ? "" : ", ", token(ids[i]), num(lp[i]));
      return t;
    };
    std::string ctx =
        w.context.empty() ? "" : "…" + escape(w.context) + " <b>→ " + escape(w.next_text) + "</b>";
    s += row({std::to_string(w.w.position), escape(w.segment_name + " +" + std::to_string(w.offset)),
              num(w.w.kl), num(w.w.margin), w.w.flip ? "yes" : "", w.w.token >= 0 ? token(w.w.token) : "",
              top3(w.w.ref_ids, w.w.ref_logprobs), top3(w.w.cand_ids, w.w.cand_logprobs),
              "<code>" + ctx + "</code>"});
  }
  s += "</table>\n";
  if (shown < r.worst.size())
    s += fmt::format("<p class=\"meta\">{} more worst positions in the JSON report (<code>--json</code>).</p>\n",
                     r.worst.size() - shown);
  return s;
}

const char* kCss = R"(
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1320px;color:#1f2328;
font-size:14px;line-height:1.4;padding:0 12px;overflow-wrap:anywhere}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #d0d7de}
.verdict{display:inline-block;padding:2px 12px;border-radius:6px;color:#fff;font-weight:bold}
.meta{color:#57606a;font-size:12px}.decided{font-size:15px;margin:10px 0;padding:8px 12px;background:#f6f8fa;
border-left:4px solid #888}
table{border-collapse:collapse;margin:6px 0;font-size:13px;display:block;max-width:100%;overflow-x:auto;
overflow-wrap:normal}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:right;vertical-align:top}th{background:#f6f8fa}td:first-child,th:first-child{text-align:left}
tr.failed td{background:#ffebe9}.plots{display:flex;flex-wrap:wrap;gap:14px}
.plots figure{margin:0;border:1px solid #d0d7de;padding:6px;max-width:100%;box-sizing:border-box}
figcaption{font-size:12px;color:#57606a;max-width:620px}svg.plot{max-width:100%;height:auto;display:block}
code{font-size:12px;white-space:pre-wrap}details summary{cursor:pointer;color:#57606a}
.notes .mismatch{color:#cf222e}.caveats{color:#57606a}
.failing-summary td:last-child,.findings td:last-child,.worst td:last-child{text-align:left}
)";

// The verdict in words (the headline; under a FAIL the deciding finding's numbers), the notes (a floor
// mismatch first, said loudly), and the INCONCLUSIVE reasons, which under a FAIL are caveats.
std::string verdict_section(const JudgeReport& r) {
  const char* verb = r.verdict == Verdict::fail   ? "Failed"
                     : r.verdict == Verdict::pass ? "Passed"
                                                  : "Inconclusive";
  std::string h =
      fmt::format("<div class=\"decided\" id=\"decided-by\"><b>{}</b>: {}", verb, escape(r.headline));
  if (r.verdict == Verdict::fail && !r.findings.front().detail.empty())
    h += "<br><span class=\"meta\">" + escape(r.findings.front().detail) + "</span>";
  h += "</div>\n";
  if (!r.notes.empty()) {
    h += "<ul class=\"notes\">";
    for (const std::string& n : r.notes)
      h += n.rfind("FLOOR MISMATCH", 0) == 0 ? "<li class=\"mismatch\"><b>" + escape(n) + "</b></li>"
                                             : "<li>" + escape(n) + "</li>";
    h += "</ul>\n";
  }
  if (r.depth_profile.onset.tested)
    h += "<p class=\"onset\" id=\"onset\">Depth onset: " + escape(words::onset(r.depth_profile, r.options.onset_alpha)) +
         "</p>\n";
  if (!r.inconclusive_reasons.empty()) {
    const bool fail = r.verdict == Verdict::fail;
    h += fail ? "<div class=\"caveats\"><b>" + escape(words::caveats_title()) + "</b><ul>"
              : "<ul class=\"inconclusive\">";
    for (auto& s : r.inconclusive_reasons) h += "<li>" + escape(s) + "</li>";
    h += fail ? "</ul></div>\n" : "</ul>\n";
  }
  return h;
}

std::string locate_section(const JudgeReport& r, const LocateLink& l) {
  std::string h = fmt::format(
      "<h2>Locate</h2>\n<div class=\"locate\" id=\"locate\"><code>kerncheck locate</code> of {}: the first op "
      "whose error against the f32 reference leaves the noise runs' spread.<ul>",
      escape(l.variant));
  for (const auto& p : l.phases) h += "<li>" + escape(p) + "</li>";
  h += "</ul>";
  if (r.verdict == Verdict::pass && l.departs)
    h += "<p><b>The model-level judge PASSes this candidate, but a site leaves the floor: the model absorbs an "
         "error its kernels do not normally make.</b></p>";
  h += fmt::format("<a href=\"{}\">locate report</a></div>\n", escape(l.href));
  return h;
}

}  // namespace

LocateLink read_locate_link(const std::string& json_path, const std::string& judge_html_path) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  json j;
  try {
    j = json::parse(read_text_file(json_path, kConfigTextCap, "a locate report"));
  } catch (const json::exception& e) {
    throw_input_error(json_path, "JSON", "a `kerncheck locate --json` report", e.what());
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != "kerncheck.locate")
    throw_input_error(json_path, "format", "\"kerncheck.locate\" (a `kerncheck locate --json` report)",
                      j.is_object() && j.contains("format") ? j["format"].dump() : "absent");
  auto need = [&](const char* key, bool ok, const char* what) {
    if (!ok) throw_input_error(json_path, key, what, j.contains(key) ? j[key].dump() : "absent");
  };
  need("variant", j.contains("variant") && j["variant"].is_string(), "a string");
  need("first", j.contains("first") && j["first"].is_object(), "an object {prefill, decode}");
  need("positions", j.contains("positions") && j["positions"].is_object(), "an object {prefill, decode}");
  LocateLink l;
  l.variant = j["variant"].get<std::string>();
  for (const char* phase : {"prefill", "decode"}) {
    const json& n = j["positions"].value(phase, json(0));
    if (!n.is_number_integer() || n.get<std::int64_t>() <= 0) continue;
    const json& f = j["first"].value(phase, json(nullptr));
    if (f.is_null()) {
      l.phases.push_back(fmt::format("{}: no site leaves the floor", phase));
      continue;
    }
    if (!f.is_object() || !f.contains("layer") || !f["layer"].is_number_integer() || !f.contains("name") ||
        !f["name"].is_string())
      throw_input_error(json_path, fmt::format("first.{}", phase), "null or {layer, name, ratio}", f.dump());
    const int layer = f["layer"].get<int>();
    const json& ratio = f.value("ratio", json(nullptr));
    l.phases.push_back(fmt::format("{}: first site outside the floor: layer {} {}{}", phase,
                                   layer < 0 ? std::string("-") : std::to_string(layer),
                                   f["name"].get<std::string>(),
                                   ratio.is_number() ? fmt::format(" ({:.3g} × the floor's error)", ratio.get<double>())
                                                     : std::string()));
    l.departs = true;
  }
  // Paths as the pages see them: the locate page (or JSON) relative to the judge page's folder.
  const fs::path jp = fs::absolute(json_path).lexically_normal();
  fs::path target = jp;
  if (j.contains("html") && j["html"].is_string()) target = (jp.parent_path() / j["html"].get<std::string>()).lexically_normal();
  const fs::path from = fs::absolute(judge_html_path).lexically_normal().parent_path();
  l.href = target.lexically_relative(from).generic_string();
  if (l.href.empty()) l.href = target.generic_string();
  return l;
}

std::string render_judge_html(const JudgeReport& r, const LocateLink* locate) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += fmt::format("<title>kerncheck test: {} — {}</title>\n", verdict_name(r.verdict),
                   escape(r.candidate_path));
  h += fmt::format("<style>{}</style></head><body>\n", kCss);
  h += fmt::format("<h1>kerncheck test <span class=\"verdict\" style=\"background:{}\">{}</span></h1>\n",
                   verdict_color(r.verdict), verdict_name(r.verdict));
  h += fmt::format(
      "<div class=\"meta\">candidate {} · golden {} (k = {}, vocab {}, {} positions, checksum {}) · "
      "{} positions judged · mode {}{}</div>\n",
      escape(r.candidate_path), escape(r.golden_path), r.golden.k, r.golden.vocab, r.golden.n,
      escape(r.golden.checksum), r.positions_judged, mode_name(r.mode),
      r.noise_paths.empty() ? ""
                            : " · noise runs: " + escape(fmt::format("{}", fmt::join(r.noise_paths, ", "))));
  h += verdict_section(r);
  if (locate) h += locate_section(r, *locate);
  h += "<h2>Failing checks</h2>\n" + failing_summary(r);
  h += "<h2>Summary</h2>\n" + summary_table(r);
  h += floor_test_table(r);
  std::size_t n_flips = 0, n_plain = 0;
  std::string scatter = plot_kl_margin(r, n_flips, n_plain);
  h += "<h2>Plots</h2>\n<div class=\"plots\">\n";
  h +=
      "<figure>" + plot_kl_cdf(r) +
      fmt::format(
          "<figcaption>From a uniform sample of {} positions. KL = 0 is drawn at {}.</figcaption></figure>\n",
          r.sample.size(), num(kKlPlotFloor));
  h += "<figure>" + scatter +
       fmt::format(
           "<figcaption>{} flipped positions (all flips of the sample) and {} positions without a flip. A "
           "flip "
           "above margin 1 is unlikely under noise (P ≤ exp(−m²/4σ²)).</figcaption></figure>\n",
           n_flips, n_plain);
  h += "<figure>" + plot_flip_bins(r) +
       "<figcaption>* = flip rate above the noise floor's (one-sided Fisher exact test, Holm-corrected over "
       "the "
       "bins). Margin 0 is a tie: its flips are only how the tie was broken.</figcaption></figure>\n";
  h += "<figure>" + plot_kl_depth(r) +
       "<figcaption>Error that grows with context (attention) rises to the right. Grey: the noise floor "
       "(first noise run's lines; the shaded band spans the noise runs' medians when there are two or more)."
       "</figcaption></figure>\n";
  if (!r.depth_profile.buckets.empty())
    h += "<figure>" + plot_depth_profile(r) + "<figcaption class=\"onset\">" +
         escape("Depth onset: " + words::onset(r.depth_profile, r.options.onset_alpha)) +
         ". Fine depth buckets (16 per octave, merged until each holds " +
         std::to_string(r.options.min_split_center) + " positions); each point's paired test is the floor test's." +
         "</figcaption></figure>\n";
  h += "</div>\n";
  h += depth_profile_table(r);
  h += "<h2>Flip rate by margin</h2>\n" + bins_table(r);
  h += "<h2>Checks</h2>\n" + findings_table(r);
  h += "<h2>Splits</h2>\n" + splits_table(r);
  h += worst_table(r);
  h += "<p class=\"meta\">Made by kerncheck. KL is over the reference's top-k plus one \"other\" bucket "
       "(docs/judge.md); "
       "perplexity is shown as a contrast, it cannot rank precision variants.</p>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace kc
