#include "lab/sweep.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "judge/report_format.h"
#include "judge/svg_plot.h"
#include "judge/words.h"
#include "lab/record_model.h"
#include "model/variant.h"
#include "io/safetensors.h"
#include "core/text_safe.h"

namespace kc {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::vector<int> parse_bit_widths(std::string_view spec, std::string_view field) {
  auto bad = [&](std::string_view why) -> std::vector<int> {
    fail("{}: \"{}\": {}; expected widths 0…23 as a range \"23..2\" or a list \"23,16,12,8..2\"", field, spec,
         why);
  };
  auto num = [&](std::string_view t) {
    int v = -1;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || p != t.data() + t.size())
      bad(fmt::format("'{}' is not a number", t));
    if (v < 0 || v > 23) bad(fmt::format("{} is outside 0…23", v));
    return v;
  };
  std::set<int, std::greater<>> out;
  std::size_t i = 0;
  if (spec.empty()) bad("empty");
  while (i <= spec.size()) {
    std::size_t j = spec.find(',', i);
    if (j == std::string_view::npos) j = spec.size();
    std::string_view t = spec.substr(i, j - i);
    std::size_t dots = t.find("..");
    if (dots == std::string_view::npos) {
      out.insert(num(t));
    } else {
      int a = num(t.substr(0, dots)), b = num(t.substr(dots + 2));
      for (int v = std::min(a, b); v <= std::max(a, b); ++v) out.insert(v);
    }
    i = j + 1;
  }
  return {out.begin(), out.end()};
}

std::string canonical_variant(const std::string& spec, std::string_view field) {
  return to_string(parse_variant(spec, field));
}

namespace {

using report::g3;
using report::g5;
using report::num;

// What a candidate file says about itself, without the cost of verifying more than the reader does.
bool candidate_matches(const CachedRecord& r, const std::string& golden_checksum,
                       const std::string& variant) {
  std::error_code ec;
  if (!fs::exists(r.out, ec)) return false;
  try {
    Candidate c = read_candidate(r.out);
    forget_input(r.out);
    if (c.meta.golden_checksum != golden_checksum || c.meta.position_begin != 0) return false;
    if (canonical_variant(c.meta.made_by.variant, r.out) != variant) return false;
    // Read only to decide whether to record it again: not an input that an output must spare.
    forget_input(r.out);
    auto it = c.meta.extra.find("kerncheck.prefill_block");
    std::string block = it == c.meta.extra.end() ? "0" : it->second;
    return block == std::to_string(r.prefill_block);
  } catch (const Error&) {
    forget_input(r.out);
    return false;  // unreadable or foreign: record it again
  }
}

void default_log(const std::string& s) {
  print_safe(stderr, s + "\n");
  std::fflush(stderr);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string tensor_file_stem(const std::string& tensor) {
  std::string s;
  for (char c : tensor) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_') ? c : '-';
  return s;
}

}  // namespace

bool record_candidate_cached(const CachedRecord& r) {
  Golden g = read_golden(r.golden);
  const std::string variant = canonical_variant(r.variant);
  if (candidate_matches(r, g.meta.checksum, variant)) return true;
  RecordModelOptions o;
  o.model = r.model;
  o.tokenizer = r.tokenizer;
  o.golden = r.golden;
  o.out = r.out;
  o.variant = variant;
  o.prefill_block = r.prefill_block;
  o.command_line =
      fmt::format("kerncheck record --model {} --golden {} --variant {}{} -o {}", r.model, r.golden, variant,
                  r.prefill_block ? fmt::format(" --prefill-block {}", r.prefill_block) : "", r.out);
  record_candidate_with_model(o);
  return false;
}

SweepResult run_sweep(const SweepOptions& o) {
  auto log = o.log ? o.log : default_log;
  if (o.bits.empty()) fail("--bits: expected at least one width, got none");
  if (o.noise.empty() && o.thresholds.empty())
    fail(
        "sweep: expected a noise floor (--noise RUN…) or calibrated limits (--thresholds FILE), got neither; "
        "without one no width can be said to leave the floor");
  // Validate the variant of every width before the slow part (a bad tensor name or base fails here).
  std::vector<std::string> variants;
  for (int b : o.bits)
    variants.push_back(
        canonical_variant(fmt::format("{}+round:{}={}", o.base, o.tensor, b), "--tensor/--base"));

  Golden golden = read_golden(o.golden);
  SweepResult R;
  R.model = o.model;
  R.golden = o.golden;
  R.golden_checksum = golden.meta.checksum;
  R.tensor = o.tensor;
  R.base = canonical_variant(o.base, "--base");
  R.noise = o.noise;
  R.thresholds = o.thresholds;
  R.judge = o.judge;

  std::vector<JudgeAccumulator> noise;
  std::vector<Provenance> noise_made_by;
  for (const auto& p : o.noise) {
    CandidateInput ni = open_candidate_input(p, golden);
    noise_made_by.push_back(ni.in_memory ? Provenance{} : ni.cand.meta.made_by);
    if (ni.begin != 0 || ni.n != golden.meta.n)
      throw_input_error(p, "positions", fmt::format("every golden position [0, {})", golden.meta.n),
                        fmt::format("[{}, {})", ni.begin, ni.begin + ni.n));
    noise.push_back(accumulate(golden, ni, nullptr));
  }
  std::optional<Thresholds> th;
  if (!o.thresholds.empty()) th = read_thresholds(o.thresholds);

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw_input_error(o.out_dir, "--out-dir", "a folder that can be created", ec.message());

  for (std::size_t i = 0; i < o.bits.size(); ++i) {
    SweepRow row;
    row.bits = o.bits[i];
    row.variant = variants[i];
    row.candidate =
        (fs::path(o.out_dir) / fmt::format("sweep-{}-b{:02d}.kcc", tensor_file_stem(o.tensor), row.bits))
            .string();
    auto t0 = std::chrono::steady_clock::now();
    log(fmt::format("sweep: {} bits: recording {} …", row.bits, row.variant));
    row.reused = record_candidate_cached(
        {o.model, o.golden, row.candidate, row.variant, o.tokenizer, o.prefill_block});
    row.record_seconds = seconds_since(t0);
    CandidateInput ci = open_candidate_input(row.candidate, golden);
    std::vector<std::string> mismatches;  // the floor check of `kerncheck test`, for each width's candidate
    for (std::size_t r = 0; r < o.noise.size(); ++r)
      if (std::string m = check_floor_provenance(o.noise[r], row.candidate, ci.cand.meta.made_by, o.noise[r],
                                                 noise_made_by[r], o.judge.allow_floor_mismatch);
          !m.empty())
        mismatches.push_back(m);
    JudgeAccumulator acc = accumulate(golden, ci, nullptr);
    JudgeReport rep =
        judge(golden.meta, o.golden, acc, row.candidate, noise, o.noise, th ? &*th : nullptr, o.judge);
    set_floor_provenance(rep, ci.cand.meta.made_by, noise_made_by, mismatches);
    row.verdict = rep.verdict;
    row.leaves_floor = rep.verdict == Verdict::fail;
    const SplitSummary& s = rep.cand.overall;
    row.n = s.n;
    row.kl_mean = s.kl.mean, row.kl_median = s.kl.median, row.kl_p99 = s.kl.p99, row.kl_max = s.kl.max;
    row.kl_median_prose = domain_median(rep.cand, "prose");
    row.kl_median_code = domain_median(rep.cand, "code");
    row.flips = s.flips, row.flip_rate = s.flip_rate;
    row.flip_rate_uncertain = s.flip_rate_uncertain, row.n_uncertain = s.n_uncertain;
    row.high_margin_flips = s.high_margin_flips;
    row.ppl = s.ppl_cand;
    for (const Finding& f : rep.findings)
      if (f.failed) row.failed.push_back(f);
    row.inconclusive_reasons = rep.inconclusive_reasons;
    if (i == 0) {
      R.mode = mode_name(rep.mode);
      R.ppl_ref = s.ppl_ref;
      R.floor_kl_median = stat_or_nan(rep.floor_stats, "kl_median");
      R.floor_kl_p99 = stat_or_nan(rep.floor_stats, "kl_p99");
      R.floor_flip_rate_uncertain = stat_or_nan(rep.floor_stats, "flip_rate_uncertain");
      if (th) {
        R.kl_median_limit = stat_or_nan(th->limits, "kl_median");
      } else if (!std::isnan(R.floor_kl_median)) {
        R.kl_median_limit = std::max(o.judge.kl_factor * R.floor_kl_median, o.judge.kl_abs_min);
      }
    }
    log(fmt::format("sweep: {} bits: {} ({} in {:.1f} s), KL median {}", row.bits, verdict_name(row.verdict),
                    row.reused ? "reused" : "recorded", row.record_seconds, g3(row.kl_median)));
    R.rows.push_back(std::move(row));
  }
  // Knee: the widest width from which every narrower one leaves the floor.
  std::size_t first = R.rows.size();
  while (first > 0 && R.rows[first - 1].leaves_floor) --first;
  if (first < R.rows.size()) R.knee = R.rows[first].bits;
  for (std::size_t i = 0; i < first; ++i)
    if (R.rows[i].leaves_floor) R.isolated.push_back(R.rows[i].bits);
  return R;
}

namespace {

const SweepRow* knee_row(const SweepResult& r) {
  if (!r.knee) return nullptr;
  for (const auto& row : r.rows)
    if (row.bits == *r.knee) return &row;
  return nullptr;
}

std::string knee_sentence(const SweepResult& r) {
  const SweepRow* k = knee_row(r);
  if (!k) {
    if (r.rows.empty()) return "no widths";
    return fmt::format("no knee in {}..{} bits: the narrowest width tried ({} bits) does not leave the floor",
                       r.rows.front().bits, r.rows.back().bits, r.rows.back().bits);
  }
  std::string s;
  if (k == &r.rows.front())
    s = fmt::format("knee at {} bits or wider: every width tried ({}..{}) leaves the floor; try wider widths",
                    k->bits, r.rows.front().bits, r.rows.back().bits);
  else
    s = fmt::format(
        "knee at {} bits: {} bits and narrower leave the noise floor, {} bits and wider stay at it "
        "(the model uses about {} mantissa bits of {})",
        k->bits, k->bits, k->bits + 1, k->bits + 1, r.tensor);
  if (!k->failed.empty()) s += fmt::format("; it leaves on {}", words::sentence(k->failed.front()));
  return s;
}

}  // namespace

std::string render_sweep_text(const SweepResult& r) {
  std::string s =
      fmt::format("sweep of {} on base {} against {} ({} mode", r.tensor, r.base, r.golden, r.mode);
  if (!r.noise.empty()) s += fmt::format(", {} noise run(s)", r.noise.size());
  s += ")\n";
  if (!std::isnan(r.floor_kl_median))
    s += fmt::format("noise floor: KL median {}, p99 {}, flip rate at margin<=1 {}; KL median limit {}\n",
                     g3(r.floor_kl_median), g3(r.floor_kl_p99), g3(r.floor_flip_rate_uncertain),
                     g3(r.kl_median_limit));
  s += fmt::format("{:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {:>7}  {:>16}  {:>9}  {:<12}  {}\n", "bits",
                   "KL median", "prose", "code", "KL p99", "flips", "flips m<=1 (fl.)", "PPL", "verdict",
                   "left the floor on");
  for (const auto& row : r.rows) {
    std::string left = row.failed.empty() ? "" : words::sentence(row.failed.front());
    if (row.failed.size() > 1) left += fmt::format(" (+{} more)", row.failed.size() - 1);
    s += fmt::format("{:>4}  {:>10}  {:>10}  {:>10}  {:>10}  {:>7}  {:>16}  {:>9}  {:<12}  {}\n", row.bits,
                     g3(row.kl_median), g3(row.kl_median_prose), g3(row.kl_median_code), g3(row.kl_p99),
                     row.flips,
                     fmt::format("{} ({})", g3(row.flip_rate_uncertain), g3(r.floor_flip_rate_uncertain)),
                     g5(row.ppl), verdict_name(row.verdict), left);
  }
  s += knee_sentence(r) + "\n";
  if (!r.isolated.empty())
    s += fmt::format("isolated excursions above the knee (left the floor, a narrower width did not): {}\n",
                     fmt::join(r.isolated, ", "));
  return s;
}

nlohmann::json sweep_json(const SweepResult& r) {
  json j;
  j["format"] = "kerncheck.sweep";  // schema: python/kerncheck/schemas/sweep.json (docs/schemas.md)
  j["version"] = 1;
  j["tensor"] = r.tensor;
  j["base"] = r.base;
  j["model"] = r.model;
  j["golden"] = r.golden;
  j["golden_checksum"] = r.golden_checksum;
  j["mode"] = r.mode;
  j["noise"] = r.noise;
  j["thresholds"] = r.thresholds.empty() ? json(nullptr) : json(r.thresholds);
  j["floor"] = {{"kl_median", num(r.floor_kl_median)},
                {"kl_p99", num(r.floor_kl_p99)},
                {"flip_rate_uncertain", num(r.floor_flip_rate_uncertain)},
                {"kl_median_limit", num(r.kl_median_limit)}};
  j["ppl_ref"] = num(r.ppl_ref);
  json rows = json::array();
  for (const auto& row : r.rows) {
    json f = json::array();
    for (const auto& x : row.failed)
      f.push_back({{"rule", rule_name(x.rule)},
                   {"split", x.where()},
                   {"statistic", x.statistic()},
                   {"value", num(x.value)},
                   {"limit", num(x.limit)},
                   {"floor", num(x.floor)},
                   {"ratio", num(x.ratio)}});
    rows.push_back({{"bits", row.bits},
                    {"variant", row.variant},
                    {"candidate", row.candidate},
                    {"reused", row.reused},
                    {"record_seconds", row.record_seconds},
                    {"verdict", verdict_name(row.verdict)},
                    {"leaves_floor", row.leaves_floor},
                    {"positions", row.n},
                    {"kl_mean", num(row.kl_mean)},
                    {"kl_median", num(row.kl_median)},
                    {"kl_p99", num(row.kl_p99)},
                    {"kl_max", num(row.kl_max)},
                    {"kl_median_prose", num(row.kl_median_prose)},
                    {"kl_median_code", num(row.kl_median_code)},
                    {"flips", row.flips},
                    {"flip_rate", num(row.flip_rate)},
                    {"flip_rate_uncertain", num(row.flip_rate_uncertain)},
                    {"n_uncertain", row.n_uncertain},
                    {"high_margin_flips", row.high_margin_flips},
                    {"ppl", num(row.ppl)},
                    {"failed", f},
                    {"inconclusive_reasons", row.inconclusive_reasons}});
  }
  j["rows"] = rows;
  const SweepRow* k = knee_row(r);
  j["knee"] = r.knee ? json(*r.knee) : json(nullptr);
  j["knee_statistic"] = k && !k->failed.empty() ? json({{"rule", rule_name(k->failed.front().rule)},
                                                        {"split", k->failed.front().where()},
                                                        {"statistic", k->failed.front().statistic()},
                                                        {"value", num(k->failed.front().value)},
                                                        {"limit", num(k->failed.front().limit)}})
                                                : json(nullptr);
  j["knee_text"] = knee_sentence(r);
  j["isolated"] = r.isolated;
  return j;
}

std::string sweep_plot_svg(const SweepResult& r) {
  svg::Plot p;
  p.id = "sweep-kl";
  p.title = fmt::format("KL median vs mantissa bits of {} (base {})", r.tensor, r.base);
  p.x = {"mantissa bits kept", svg::Scale::linear};
  p.y = {"KL median (log scale)", svg::Scale::log10};
  p.width = 620;
  p.height = 380;
  svg::Series cur, prose, code, floor, limit, knee;
  cur.name = "overall";
  cur.mark = prose.mark = code.mark = svg::Mark::line;
  cur.css_class = "sweep-kl";
  prose.name = "prose";
  prose.dashed = true;
  code.name = "code";
  code.dasharray = "2,3";  // dotted: told from prose's dashes without the colour
  std::vector<const SweepRow*> rows;
  for (const auto& row : r.rows) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](auto a, auto b) { return a->bits < b->bits; });
  for (const SweepRow* row : rows) {
    cur.x.push_back(row->bits), cur.y.push_back(row->kl_median);
    cur.titles.push_back(
        fmt::format("{} bits: KL median {} ({})", row->bits, g3(row->kl_median), verdict_name(row->verdict)));
    if (!std::isnan(row->kl_median_prose))
      prose.x.push_back(row->bits), prose.y.push_back(row->kl_median_prose);
    if (!std::isnan(row->kl_median_code)) code.x.push_back(row->bits), code.y.push_back(row->kl_median_code);
  }
  if (!rows.empty()) {
    double lo = rows.front()->bits, hi = rows.back()->bits;
    if (!std::isnan(r.floor_kl_median) && r.floor_kl_median > 0) {
      floor.name = "noise floor (median)";
      floor.color = "#777777";
      floor.css_class = "floor";
      floor.x = {lo, hi};
      floor.y = {r.floor_kl_median, r.floor_kl_median};
    }
    if (!std::isnan(r.kl_median_limit) && r.kl_median_limit > 0) {
      limit.name = r.mode == "thresholds" ? "calibrated limit" : "limit (floor band top)";
      limit.color = "#777777";
      limit.dashed = true;
      limit.css_class = "limit";
      limit.x = {lo, hi};
      limit.y = {r.kl_median_limit, r.kl_median_limit};
    }
  }
  if (const SweepRow* k = knee_row(r)) {
    knee.name = fmt::format("knee: {} bits", k->bits);
    knee.mark = svg::Mark::points;
    knee.color = "#D55E00";
    knee.radius = 6;
    knee.css_class = "knee";
    knee.x = {static_cast<double>(k->bits)};
    knee.y = {k->kl_median};
    knee.titles = {knee_sentence(r)};
  }
  p.series.push_back(std::move(cur));
  if (!prose.x.empty()) p.series.push_back(std::move(prose));
  if (!code.x.empty()) p.series.push_back(std::move(code));
  if (!floor.x.empty()) p.series.push_back(std::move(floor));
  if (!limit.x.empty()) p.series.push_back(std::move(limit));
  if (!knee.x.empty()) p.series.push_back(std::move(knee));
  return svg::render(p);
}

std::string sweep_flip_plot_svg(const SweepResult& r) {
  svg::Plot p;
  p.id = "sweep-flips";
  p.title = "Flip rate at margin ≤ 1 vs mantissa bits";
  p.x = {"mantissa bits kept", svg::Scale::linear};
  p.y = {"flip rate, margin in (0, 1]", svg::Scale::linear};
  p.width = 620;
  svg::Series cur, floor;
  cur.name = "candidate";
  cur.mark = svg::Mark::line;
  cur.css_class = "sweep-flips";
  std::vector<const SweepRow*> rows;
  for (const auto& row : r.rows) rows.push_back(&row);
  std::sort(rows.begin(), rows.end(), [](auto a, auto b) { return a->bits < b->bits; });
  for (const SweepRow* row : rows)
    if (!std::isnan(row->flip_rate_uncertain))
      cur.x.push_back(row->bits), cur.y.push_back(row->flip_rate_uncertain);
  if (!rows.empty() && !std::isnan(r.floor_flip_rate_uncertain)) {
    floor.name = "noise floor";
    floor.color = "#777777";
    floor.dashed = true;
    floor.x = {static_cast<double>(rows.front()->bits), static_cast<double>(rows.back()->bits)};
    floor.y = {r.floor_flip_rate_uncertain, r.floor_flip_rate_uncertain};
  }
  p.series.push_back(std::move(cur));
  if (!floor.x.empty()) p.series.push_back(std::move(floor));
  return svg::render(p);
}

std::string render_sweep_html(const SweepResult& r) {
  std::string h = svg::table_page_head("kerncheck sweep");
  h += fmt::format("<h1>Sweep of <code>{}</code></h1>\n", svg::escape(r.tensor));
  h += fmt::format("<p>Base variant <code>{}</code>, golden <code>{}</code>, {} mode. {}</p>\n",
                   svg::escape(r.base), svg::escape(r.golden), svg::escape(r.mode),
                   svg::escape(knee_sentence(r)));
  h += "<div>" + sweep_plot_svg(r) + sweep_flip_plot_svg(r) + "</div>\n";
  h += "<table><tr><th>bits</th><th>variant</th><th>KL median</th><th>prose</th><th>code</th><th>KL p99</th>"
       "<th>flips</th><th>flip rate m≤1</th><th>floor</th><th>PPL</th><th>verdict</th><th>left the floor "
       "on</th></tr>\n";
  for (const auto& row : r.rows) {
    std::string left;
    for (const auto& f : row.failed) left += svg::escape(words::sentence(f)) + "<br>";
    h += fmt::format(
        "<tr><td>{}</td><td "
        "class=\"l\"><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"l\">{}</td></tr>\n",
        row.bits, svg::escape(row.variant), g3(row.kl_median), g3(row.kl_median_prose),
        g3(row.kl_median_code), g3(row.kl_p99), row.flips, g3(row.flip_rate_uncertain),
        g3(r.floor_flip_rate_uncertain), g5(row.ppl), verdict_name(row.verdict), verdict_name(row.verdict),
        left);
  }
  h += "</table>\n</body></html>\n";
  return h;
}

}  // namespace kc
