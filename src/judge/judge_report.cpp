// Text, JSON and JUnit renderings of a JudgeReport. JSON keys are documented in docs/judge.md and stable.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/text_safe.h"
#include "judge/judge.h"
#include "judge/report_format.h"
#include "judge/words.h"

namespace kc {
namespace {

using report::g3;
using report::num;

using nlohmann::json;
using ordered = nlohmann::ordered_json;

ordered kl_json(const KlStats& k) {
  return {{"n", k.n},          {"mean", num(k.mean)}, {"stderr", num(k.stderr_)}, {"median", num(k.median)},
          {"p90", num(k.p90)}, {"p99", num(k.p99)},   {"p999", num(k.p999)},      {"max", num(k.max)}};
}

ordered bin_json(const BinCount& b) {
  return {{"n", b.n},
          {"flips", b.flips},
          {"rate", num(b.rate)},
          {"ci", {num(b.ci_lo), num(b.ci_hi)}},
          {"tie_flips", b.tie_flips}};
}

ordered split_json(const SplitSummary& s) {
  ordered j;
  j["n"] = s.n;
  j["nonfinite"] = s.nonfinite;
  j["kl"] = kl_json(s.kl);
  j["flips"] = {{"count", s.flips},
                {"rate", num(s.flip_rate)},
                {"uncertain_positions", s.n_uncertain},
                {"uncertain_rate", num(s.flip_rate_uncertain)},
                {"tie_flips", s.tie_flips}};
  ordered bins = ordered::array();
  for (int b = 0; b < kMarginBins; ++b) {
    ordered x = bin_json(s.bins[b]);
    x["bin"] = margin_bin_label(b);
    bins.push_back(x);
  }
  j["flip_rate_by_margin"] = bins;
  j["high_margin_flips"] = s.high_margin_flips;
  j["delta_p"] = {
      {"mean", num(s.delta_p_mean)}, {"stderr", num(s.delta_p_stderr)}, {"rms", num(s.delta_p_rms)}};
  j["ppl"] = {{"ref", num(s.ppl_ref)},
              {"cand", num(s.ppl_cand)},
              {"ln_ratio", num(s.ln_ppl_ratio)},
              {"ln_ratio_stderr", num(s.ln_ppl_ratio_stderr)}};
  j["sigma"] = num(s.sigma);
  j["coverage"] = {{"ids", num(s.coverage_ids)}, {"mass", num(s.coverage_mass)}};
  return j;
}

ordered finding_json(const Finding& f) {
  return {{"rule", rule_name(f.rule)},     {"split", f.where()},    {"statistic", f.statistic()},
          {"value", num(f.value)},         {"limit", num(f.limit)}, {"floor", num(f.floor)},
          {"ratio", num(f.ratio)},         {"failed", f.failed},    {"detail", f.detail},
          {"sentence", words::sentence(f)}};
}

ordered depth_profile_json(const JudgeReport& r) {
  const DepthProfile& p = r.depth_profile;
  if (!p.kept) return nullptr;
  ordered bs = ordered::array();
  for (const DepthBucket& b : p.buckets)
    bs.push_back({{"depth", b.lo},
                  {"depth_end", b.hi},
                  {"n", b.n},
                  {"segments", b.segments},
                  {"value", num(b.cand)},
                  {"floor_mean", num(b.floor_mean)},
                  {"floor_min", num(b.floor_lo)},
                  {"floor_max", num(b.floor_hi)},
                  {"ratio_to_floor", num(b.ratio())},
                  {"t", num(b.t)},
                  {"df", num(b.df)},
                  {"p_value", num(b.p_value)},
                  {"outside", b.outside}});
  const DepthOnset& o = p.onset;
  ordered on = {{"tested", o.tested},
                {"found", o.found},
                {"depth", o.found ? ordered(o.depth) : ordered(nullptr)},
                {"depth_end", o.found ? ordered(p.buckets[o.bucket].hi) : ordered(nullptr)},
                {"ratio_to_floor", num(o.ratio_after)},
                {"t_critical", num(o.t_critical)},
                {"df", num(o.df)},
                {"resamples", o.resamples},
                {"found_share", num(o.found_share)},
                {"interval", o.found_share > 0 ? ordered{o.lo, o.hi} : ordered(nullptr)},
                {"sentence", words::onset(p, r.options.onset_alpha)}};
  return {{"statistic", "kl_mean"},
          {"fine_buckets_per_octave", kProfilePerOctave},
          {"min_positions", r.options.min_split_center},
          {"onset_alpha", r.options.onset_alpha},
          {"buckets", bs},
          {"onset", on}};
}

}  // namespace

json report_json(const JudgeReport& r) {
  ordered j;
  j["kerncheck_report"] = 1;
  j["verdict"] = verdict_name(r.verdict);
  j["exit_code"] = verdict_exit_code(r.verdict);
  j["mode"] = mode_name(r.mode);
  j["headline"] = r.headline;
  j["decided_by"] = r.findings.empty() ? ordered(nullptr) : finding_json(r.findings.front());
  ordered fs = ordered::array();
  for (auto& f : r.findings) fs.push_back(finding_json(f));
  j["findings"] = fs;
  j["inconclusive_reasons"] = r.inconclusive_reasons;
  j["golden"] = {{"path", r.golden_path},
                 {"checksum", r.golden.checksum},
                 {"k", r.golden.k},
                 {"vocab", r.golden.vocab},
                 {"positions", r.golden.n},
                 {"model", r.golden.identity.model},
                 {"tokenizer", r.golden.identity.tokenizer},
                 {"corpus", r.golden.identity.corpus}};
  j["candidate"] = r.candidate_path;
  j["candidate_made_by"] = {{"engine", r.candidate_made_by.engine}, {"variant", r.candidate_made_by.variant}};
  j["noise"] = r.noise_paths;
  j["floor_manifest"] = r.floor_manifest.empty() ? ordered(nullptr) : ordered(r.floor_manifest);
  ordered nm = ordered::array();
  for (auto& p : r.noise_made_by) nm.push_back({{"engine", p.engine}, {"variant", p.variant}});
  j["noise_made_by"] = nm;
  j["floor_mismatches"] = r.floor_mismatches;
  j["thresholds"] = r.thresholds_path.empty() ? ordered(nullptr) : ordered(r.thresholds_path);
  const SplitSummary& o = r.cand.overall;
  j["positions_judged"] = r.positions_judged;
  j["nonfinite"] = o.nonfinite;
  j["kl"] = kl_json(o.kl);
  j["kl_full"] = o.full_kl.n ? kl_json(o.full_kl) : ordered(nullptr);
  j["flips"] = {{"count", o.flips},
                {"rate", num(o.flip_rate)},
                {"uncertain_positions", o.n_uncertain},
                {"uncertain_rate", num(o.flip_rate_uncertain)},
                {"tie_flips", o.tie_flips}};
  ordered bins = ordered::array();
  for (auto& b : r.bins) {
    ordered x = bin_json(b.cand);
    x["bin"] = b.label;
    x["floor"] = r.has_floor ? bin_json(b.floor) : ordered(nullptr);
    x["p_value"] = num(b.p_value);
    x["significant"] = b.rejected;
    x["expected_flips"] = num(b.expected_flips);
    x["expected_flips_own_sigma"] = num(b.expected_flips_cand_sigma);
    bins.push_back(x);
  }
  j["flip_rate_by_margin"] = bins;
  std::uint64_t floor_hm = 0;
  for (int b = kHighMarginBin; b < kMarginBins; ++b) floor_hm += r.bins[b].floor.flips;
  j["high_margin_flips"] = {{"count", o.high_margin_flips},
                            {"floor_count", r.has_floor ? ordered(floor_hm) : ordered(nullptr)}};
  j["ppl"] = {{"ref", num(o.ppl_ref)},
              {"cand", num(o.ppl_cand)},
              {"ratio", num(std::exp(o.ln_ppl_ratio))},
              {"ln_ratio", num(o.ln_ppl_ratio)},
              {"ln_ratio_stderr", num(o.ln_ppl_ratio_stderr)},
              {"n", o.n_token}};
  j["delta_p"] = {
      {"mean", num(o.delta_p_mean)}, {"stderr", num(o.delta_p_stderr)}, {"rms", num(o.delta_p_rms)}};
  j["pinsker_bound"] = {{"value", num(r.cand.pinsker_bound)},
                        {"steps", num(r.cand.pinsker_steps)},
                        {"max_segment", num(r.cand.pinsker_max_segment)},
                        {"note",
                         "|ΔAcc| ≤ sqrt(½ Σ_t KL_t) per segment taken as one T-step answer; a loose upper "
                         "bound, not a threshold"}};
  j["high_kl_without_flip"] = {{"threshold", num(r.cand.high_kl_threshold)},
                               {"high_kl", r.cand.high_kl},
                               {"without_flip", r.cand.high_kl_no_flip},
                               {"share", num(r.cand.high_kl_no_flip_share)}};
  j["sigma"] = {{"candidate", num(o.sigma)}, {"floor", num(r.sigma_floor)}};
  ordered ft = ordered::array();
  for (auto& t : r.floor_tests) {
    ordered runs = ordered::array(), loo = ordered::array();
    for (double v : t.floor_runs) runs.push_back(num(v));
    for (double v : t.loo_t) loo.push_back(num(v));
    ft.push_back({{"split", t.split.label()},
                  {"statistic", t.statistic},
                  {"n", t.n},
                  {"segments", t.segments},
                  {"value", num(t.cand)},
                  {"floor_mean", num(t.floor_mean)},
                  {"floor_runs", runs},
                  {"ratio_to_floor", num(t.floor_mean > 0 ? t.cand / t.floor_mean : NAN)},
                  {"v_segments", num(t.v_segments)},
                  {"v_runs", num(t.v_runs)},
                  {"sd", num(t.sd)},
                  {"df", num(t.df)},
                  {"t", num(t.t)},
                  {"p_value", num(t.p_value)},
                  {"limit", num(t.limit)},
                  {"significant", t.rejected},
                  {"mde", num(t.mde)},
                  {"mde_ratio", num(t.mde_ratio)},
                  {"matters", t.matters},
                  {"floor_loo_t", loo}});
  }
  j["floor_test"] = {{"alpha", r.options.alpha},
                     {"family_size", r.family_size},
                     {"power", r.options.power},
                     {"mde_target", r.options.mde_target},
                     {"not_run", r.no_floor_test.empty() ? ordered(nullptr) : ordered(r.no_floor_test)},
                     {"tests", ft}};
  j["depth_profile"] = depth_profile_json(r);
  j["notes"] = r.notes;
  j["coverage"] = {{"ids", num(o.coverage_ids)},
                   {"mass", num(o.coverage_mass)},
                   {"positions_partial", o.positions_partial},
                   {"kl_lower_mean", num(o.kl.mean)},
                   {"kl_upper_mean", num(o.kl_upper_mean)},
                   {"upper_infinite", o.upper_infinite},
                   {"q_other_clamped", o.q_other_clamped}};
  auto splits = [](const std::vector<SplitSummary>& v) {
    ordered m = ordered::object();
    for (auto& s : v) m[s.id.name] = split_json(s);
    return m;
  };
  j["by_domain"] = splits(r.cand.by_domain);
  j["by_depth"] = splits(r.cand.by_depth);
  j["by_phase"] = splits(r.cand.by_phase);
  ordered nr = ordered::object();
  for (auto& [k, v] : r.noise_ratio) nr[k] = num(v);
  j["noise_ratio"] = nr;
  ordered st = ordered::object(), fl = ordered::object();
  for (auto& [k, v] : r.stats) st[k] = num(v);
  for (auto& [k, v] : r.floor_stats) fl[k] = num(v);
  j["stats"] = st;
  j["floor_stats"] = r.has_floor ? fl : ordered(nullptr);
  ordered w = ordered::array();
  for (auto& d : r.worst) {
    ordered ref = ordered::array(), cand = ordered::array();
    for (int i = 0; i < 3; ++i) {
      if (d.w.ref_ids[i] >= 0) ref.push_back({{"id", d.w.ref_ids[i]}, {"logprob", num(d.w.ref_logprobs[i])}});
      if (d.w.cand_ids[i] >= 0)
        cand.push_back({{"id", d.w.cand_ids[i]}, {"logprob", num(d.w.cand_logprobs[i])}});
    }
    w.push_back({{"position", d.w.position},
                 {"segment", d.segment_name},
                 {"domain", d.domain},
                 {"offset", d.offset},
                 {"kl", num(d.w.kl)},
                 {"margin", num(d.w.margin)},
                 {"flip", d.w.flip},
                 {"token", d.w.token},
                 {"context", d.context},
                 {"next_text", d.next_text},
                 {"ref_top3", ref},
                 {"cand_top3", cand}});
  }
  j["worst"] = w;
  return json::parse(j.dump(-1, ' ', false, json::error_handler_t::replace));  // valid UTF-8 out
}

std::vector<std::string> floor_test_header() {
  return {"split", "KL mean", "floor", "floor runs min…max", "t", "p", "MDE ×", "significant"};
}

std::vector<FloorTestRow> floor_test_rows(const JudgeReport& r) {
  std::vector<FloorTestRow> rows;
  for (const FloorTest& t : r.floor_tests) {
    double lo = INFINITY, hi = -INFINITY;
    for (double v : t.floor_runs) lo = std::min(lo, v), hi = std::max(hi, v);
    rows.push_back(
        {{t.split.label(), g3(t.cand), g3(t.floor_mean), g3(lo) + "…" + g3(hi), fmt::format("{:.2f}", t.t),
          g3(t.p_value), fmt::format("{:.3g}", t.mde_ratio), t.rejected ? "yes" : "no"},
         t.rejected,
         t.matters});
  }
  return rows;
}

std::vector<std::string> depth_profile_header() {
  return {"depths", "positions", "KL mean", "floor", "ratio", "floor runs min…max", "t", "outside"};
}

std::vector<std::vector<std::string>> depth_profile_rows(const JudgeReport& r) {
  std::vector<std::vector<std::string>> rows;
  for (const DepthBucket& b : r.depth_profile.buckets)
    rows.push_back({words::depth_range(b.lo, b.hi), std::to_string(b.n), g3(b.cand), g3(b.floor_mean),
                    g3(b.ratio()), g3(b.floor_lo) + "…" + g3(b.floor_hi),
                    std::isfinite(b.t) ? fmt::format("{:.2f}", b.t) : "-", b.outside ? "yes" : "no"});
  return rows;
}

std::string render_text(const JudgeReport& r) {
  std::ostringstream o;
  const SplitSummary& ov = r.cand.overall;
  o << fmt::format("kerncheck test: {}  ({} positions, k = {}, mode: {})\n", verdict_name(r.verdict),
                   r.positions_judged, r.golden.k, mode_name(r.mode));
  o << "  " << r.headline << "\n";
  o << fmt::format("  golden    {}\n  candidate {}", r.golden_path, r.candidate_path);
  if (!r.candidate_made_by.engine.empty() || !r.candidate_made_by.variant.empty())
    o << fmt::format("  (engine {}, variant {})", r.candidate_made_by.engine.empty() ? "?" : r.candidate_made_by.engine,
                     r.candidate_made_by.variant.empty() ? "-" : r.candidate_made_by.variant);
  o << "\n";
  if (!r.floor_manifest.empty()) o << fmt::format("  floor     {} ({} runs)\n", r.floor_manifest, r.noise_paths.size());
  for (std::size_t i = 0; i < r.noise_paths.size(); ++i) {
    o << fmt::format("  noise     {}", r.noise_paths[i]);
    if (i < r.noise_made_by.size() && !r.noise_made_by[i].variant.empty())
      o << fmt::format("  (variant {})", r.noise_made_by[i].variant);
    o << "\n";
  }
  if (!r.thresholds_path.empty()) o << fmt::format("  thresholds {}\n", r.thresholds_path);
  o << "\n";
  if (r.verdict == Verdict::fail) {
    o << "decided by:\n";
    int shown = 0, failing = 0;
    for (auto& f : r.findings) failing += f.failed;
    for (auto& f : r.findings) {
      if (!f.failed) break;
      if (shown++ == 8) {
        o << fmt::format("  … and {} more failing checks (see --json)\n", failing - 8);
        break;
      }
      o << fmt::format("  {:<10} {}\n", rule_name(f.rule), words::sentence(f));
    }
  } else if (r.verdict == Verdict::pass && !r.findings.empty()) {
    o << "closest to its limit: " << words::sentence(r.findings.front()) << "\n";
  }
  if (!r.inconclusive_reasons.empty()) {
    o << (r.verdict == Verdict::fail ? words::caveats_title() : std::string("inconclusive because")) << ":\n";
    for (auto& s : r.inconclusive_reasons) o << "  " << s << "\n";
  }
  for (auto& n : r.notes) o << "note: " << n << "\n";
  o << "depth onset: " << words::onset(r.depth_profile, r.options.onset_alpha) << "\n";
  if (r.options.explain || r.verdict == Verdict::fail) {
    // The deciding statistic (or, with --explain, every floor test) against each noise run's own value.
    for (auto& t : r.floor_tests) {
      bool deciding = !r.findings.empty() && r.findings.front().rule == Rule::floor_test &&
                      r.findings.front().split == t.split;
      if (!r.options.explain && !deciding) continue;
      o << fmt::format("{} {} KL mean: candidate {} | noise runs",
                       deciding ? "deciding:" : "explain: ", t.split.label(), g3(t.cand));
      for (std::size_t i = 0; i < t.floor_runs.size(); ++i)
        o << fmt::format(" {}{}", g3(t.floor_runs[i]),
                         i < t.loo_t.size() ? fmt::format(" (t {:.2f})", t.loo_t[i]) : std::string());
      o << fmt::format(" | floor mean {}, sd {}, candidate t {:.2f} (noise runs' t: each against the others)\n",
                       g3(t.floor_mean), g3(t.sd), t.t);
    }
  }
  o << "\n";
  auto row = [&](const SplitSummary& s) {
    auto it = r.noise_ratio.find(s.id.prefix() + "kl_median");
    o << fmt::format("  {:<18} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}\n", s.id.label(), s.n,
                     g3(s.kl.mean), g3(s.kl.median), g3(s.kl.p99), g3(s.kl.max), g3(s.flip_rate),
                     s.high_margin_flips, it == r.noise_ratio.end() ? "-" : g3(it->second));
  };
  o << fmt::format("  {:<18} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}\n", "split", "positions",
                   "KL mean", "KL median", "KL p99", "KL max", "flip rate", "flips>1", "med/floor");
  row(ov);
  for (auto& s : r.cand.by_domain) row(s);
  for (auto& s : r.cand.by_phase) row(s);
  for (auto& s : r.cand.by_depth) row(s);
  if (!r.floor_tests.empty()) {
    o << fmt::format("\n  floor test, KL mean paired over segments (Holm, family of {} at α = {}; MDE: the "
                     "increase found with {:.0f} % power)\n",
                     r.family_size, r.options.alpha, 100 * r.options.power);
    const std::vector<std::string> h = floor_test_header();
    o << fmt::format("  {:<18} {:>10} {:>10} {:>21} {:>7} {:>9} {:>7}\n", h[0], h[1], h[2], h[3], h[4], h[5],
                     h[6]);
    for (const FloorTestRow& t : floor_test_rows(r)) {
      const auto& c = t.cells;
      o << fmt::format("  {:<18} {:>10} {:>10} {:>21} {:>7} {:>9} {:>7}{}{}\n", c[0], c[1], c[2], c[3], c[4], c[5],
                       c[6], t.significant ? " *" : "", t.matters ? " (must detect)" : "");
    }
  }
  if (r.options.explain && !r.depth_profile.buckets.empty()) {
    o << fmt::format("\n  depth profile, KL mean by depth against the floor (paired test per bucket; outside: t above "
                     "the onset's critical value at α = {})\n",
                     r.options.onset_alpha);
    const std::vector<std::string> h = depth_profile_header();
    o << fmt::format("  {:<13} {:>9} {:>10} {:>10} {:>7} {:>21} {:>7} {:>7}\n", h[0], h[1], h[2], h[3], h[4], h[5],
                     h[6], h[7]);
    for (const auto& c : depth_profile_rows(r))
      o << fmt::format("  {:<13} {:>9} {:>10} {:>10} {:>7} {:>21} {:>7} {:>7}\n", c[0], c[1], c[2], c[3], c[4], c[5],
                       c[6], c[7]);
  }
  o << fmt::format("\n  KL mean {} ± {}, p90 {}, p99.9 {}", g3(ov.kl.mean), g3(ov.kl.stderr_), g3(ov.kl.p90),
                   g3(ov.kl.p999));
  if (ov.full_kl.n)
    o << fmt::format("; full-vocab KL mean {} (median {}, max {})", g3(ov.full_kl.mean),
                     g3(ov.full_kl.median), g3(ov.full_kl.max));
  o << "\n";
  o << fmt::format("  PPL ref {} cand {}; ln ratio {} ± {} (paired)\n", g3(ov.ppl_ref), g3(ov.ppl_cand),
                   g3(ov.ln_ppl_ratio), g3(ov.ln_ppl_ratio_stderr));
  o << fmt::format("  Δp mean {} ± {}, rms {}\n", g3(ov.delta_p_mean), g3(ov.delta_p_stderr),
                   g3(ov.delta_p_rms));
  o << fmt::format("  per-logit noise σ: candidate {}, floor {}\n", g3(ov.sigma), g3(r.sigma_floor));
  o << fmt::format("  high-KL positions (KL > {}) without a flip: {} of {} ({})\n",
                   g3(r.cand.high_kl_threshold), r.cand.high_kl_no_flip, r.cand.high_kl,
                   g3(r.cand.high_kl_no_flip_share));
  o << fmt::format("  Pinsker bound |ΔAcc| ≤ {} for a {}-step answer (loose: not a threshold)\n",
                   g3(r.cand.pinsker_bound), g3(r.cand.pinsker_steps));
  if (ov.coverage_ids < 1)
    o << fmt::format("  coverage: {:.2f} % of ids, {:.3f} % of mass; KL is a lower bound (upper mean {})\n",
                     100 * ov.coverage_ids, 100 * ov.coverage_mass, g3(ov.kl_upper_mean));
  if (ov.q_other_clamped)
    o << fmt::format("  q_other clamped at the floor in {} positions\n", ov.q_other_clamped);
  o << "\n  flips by margin   cand (rate, 95% CI)                 floor (rate)          p      expected(σ "
       "floor)  ties (floor)\n";
  for (auto& b : r.bins) {
    o << fmt::format("  {:<12} {:>6}/{:<8} {:>9} [{}, {}]   {:>14}  {:>8} {}  {:>8}  {:>5} ({})\n", b.label,
                     b.cand.flips, b.cand.n, g3(b.cand.rate), g3(b.cand.ci_lo), g3(b.cand.ci_hi),
                     r.has_floor ? fmt::format("{}/{} {}", b.floor.flips, b.floor.n, g3(b.floor.rate)) : "-",
                     g3(b.p_value), b.rejected ? "*" : " ", g3(b.expected_flips), b.cand.tie_flips,
                     r.has_floor ? std::to_string(b.floor.tie_flips) : "-");
  }
  o << fmt::format(
      "  ties: flips the candidate's own log-probs could not order ({} of {} flips; docs/judge.md, "
      "\"Tie flips\")\n",
      ov.tie_flips, ov.flips);
  if (!r.worst.empty()) {
    o << "\n  worst positions (KL):\n";
    int shown = 0;
    for (auto& d : r.worst) {
      if (shown++ == 10) break;
      auto top = [](const std::array<std::int32_t, 3>& ids, const std::array<float, 3>& lp) {
        std::string s;
        for (int i = 0; i < 3; ++i)
          if (ids[i] >= 0) s += fmt::format("{}{}:{:.3f}", i ? " " : "", ids[i], std::exp(lp[i]));
        return s;
      };
      o << fmt::format("  #{} {} +{} KL {} margin {}{}  ref [{}]  cand [{}]\n", d.w.position, d.segment_name,
                       d.offset, g3(d.w.kl), g3(d.w.margin), d.w.flip ? " FLIP" : "",
                       top(d.w.ref_ids, d.w.ref_logprobs), top(d.w.cand_ids, d.w.cand_logprobs));
      if (!d.context.empty() || !d.next_text.empty())
        o << fmt::format("      …{}⟦{}⟧\n", terminal_safe(d.context), terminal_safe(d.next_text));
    }
  }
  return o.str();
}

std::string render_junit(const JudgeReport& r) {
  auto esc = [](const std::string& s) { return xml_escape(s); };  // valid UTF-8, no raw controls
  auto stem = [](const std::string& p) {
    const std::string b = p.substr(p.find_last_of('/') + 1);
    return b.substr(0, b.find('.')).empty() ? b : b.substr(0, b.find('.'));
  };
  int failures = 0;
  for (auto& f : r.findings) failures += f.failed;
  bool inconclusive = r.verdict == Verdict::inconclusive;
  // Names from the golden, candidate and variant, so several runs in one CI job stay apart.
  const std::string& variant = r.candidate_made_by.variant;
  const std::string suite = fmt::format("kerncheck test {}{} vs {}", stem(r.candidate_path),
                                        variant.empty() || variant == "-" ? "" : " (" + variant + ")",
                                        stem(r.golden_path));
  const std::string cls = fmt::format("kerncheck.{}.{}", stem(r.golden_path), stem(r.candidate_path));
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << fmt::format("<testsuites><testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n",
                   esc(suite), r.findings.size() + 1, failures, inconclusive ? 1 : 0);
  o << fmt::format("  <testcase classname=\"{}\" name=\"verdict\">", esc(cls));
  if (r.verdict == Verdict::fail) o << fmt::format("<failure message=\"{}\"/>", esc("FAIL: " + r.headline));
  if (inconclusive) {
    std::string why;
    for (auto& s : r.inconclusive_reasons) why += (why.empty() ? "" : "; ") + s;
    o << fmt::format("<skipped message=\"{}\"/>", esc(why));
  }
  o << "</testcase>\n";
  for (auto& f : r.findings) {
    o << fmt::format("  <testcase classname=\"{}.{}\" name=\"{}\">", esc(cls), esc(rule_name(f.rule)),
                     esc(f.where() + " " + f.statistic()));
    if (f.failed)
      o << fmt::format("<failure message=\"{}\"/>",
                       esc(words::sentence(f) + (f.detail.empty() ? "" : ". " + f.detail)));
    o << "</testcase>\n";
  }
  // The notes (a floor without spread, a floor mismatch) travel with the verdict: CI pages show system-out.
  if (!r.notes.empty()) {
    std::string notes;
    for (auto& n : r.notes) notes += "note: " + n + "\n";
    o << fmt::format("  <system-out>{}</system-out>\n", esc(notes));
  }
  o << "</testsuite></testsuites>\n";
  return o.str();
}

}  // namespace kc
