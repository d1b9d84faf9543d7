// kerncheck locate: from a model-level FAIL to the first op whose error leaves the normal difference
// (docs/locate.md).
//
// The f32 reference, m ≥ 2 noise variants (equally correct implementations, e.g. bf16 and bf16+order=1) and
// the candidate variant run over the same golden positions under teacher forcing (each chosen segment's
// window, as `record` replays it). At every site — (layer, hook name, phase) in data-flow order, the order
// in which the reference's forward reports them — each run's error against the reference is the
// per-position relative L2 error of the row (‖run − ref‖₂ / ‖ref‖₂; per-head tensors: all heads' rows of
// the position together; state tensors: the state after the prefill call and after each decode step).
// A site "departs" when the candidate's log error is above the noise runs' on average, by a one-sided test
// whose variance comes from the noise runs only (clustered by runs of 4 positions of a segment), Holm over all sites at --alpha,
// and by at least `min_factor` in geometric mean (so rounding-level differences are never flagged).
//
// Example:
//   kc::LocateOptions o;  o.model = "SmolLM2.gguf";  o.golden = "quick.kcg";
//   o.variant = "bf16+p=fp8";  o.noise = {"bf16", "bf16+order=1"};  o.positions = {0, 17, 400};
//   kc::LocateResult r = kc::run_locate(o);
//   std::fputs(kc::locate_text(r).c_str(), stdout);
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compare/compare.h"

namespace kc {

struct Golden;

struct LocateOptions {
  std::string model, golden, tokenizer;  // tokenizer: default the model's
  std::string variant;                   // the candidate (model/variant.h)
  std::vector<std::string> noise;        // ≥ 2 distinct noise variants
  std::vector<std::int64_t> positions;   // golden indices, any order (deduplicated)
  std::vector<std::string> tensors;      // hook names; empty = every name the model reports
  double alpha = 0.05;                   // family-wise over all sites (Holm)
  double min_factor = 1.3;               // a departing site's geometric-mean error ≥ this × the floor's
  int cluster_positions = 4;             // positions per cluster within a segment; 0 = the whole segment
  bool allow_other_model = false;
  std::optional<Method> compare;         // tensor verdicts at each site (null: as `compare` routes f32)
  bool verdicts = true;                  // run the tensor method at each site
};

// One site's samples: per sample (position, or segment for a prefill state) its cluster (segment) and
// each run's error against the reference; runs[0 … m) the noise runs, runs[m] the candidate.
struct SiteSamples {
  std::vector<std::int32_t> cluster;
  std::vector<std::vector<double>> runs;  // [m + 1][samples]
};

// The site rule on samples alone (the statistics of docs/locate.md "Rule").
struct SiteTest {
  std::size_t samples = 0, clusters = 0;
  double cand = 0, floor = 0;      // geometric-mean error: candidate, mean over the noise runs (in log)
  std::vector<double> noise;       // each noise run's geometric-mean error
  double ratio = 1;                // cand / floor (exp of the mean log excess)
  double sd = 0;                   // sd of the mean log excess under the null
  double df = 0, t = 0, p_value = 1;
  bool rejected = false;           // by Holm over the family
  bool departs = false;            // rejected and ratio ≥ min_factor
};
// Tests every site and applies Holm over them all; errors are floored at 1e-30 before the log.
std::vector<SiteTest> test_sites(std::span<const SiteSamples> sites, double alpha, double min_factor);

// The tensor method's verdict of one run's rows against the reference's at a site (concatenated over the
// site's samples), the candidate's and each noise run's.
struct SiteVerdicts {
  std::string method;
  bool cand_pass = true;
  std::vector<bool> noise_pass;
  std::string cand_detail;  // the method's headline figure (e.g. "rel_err 3.1e-3 <= 1e-2")
};

struct LocateSite {
  std::string name;
  int layer = -1;
  int phase = 0;  // 0 prefill, 1 decode
  SiteTest test;
  std::vector<std::string> noise_runs;  // the noise variants test.noise holds (those that reported the site)
  std::optional<SiteVerdicts> verdicts;
};

struct LocateResult {
  std::string model, golden, variant, reference = "f32";  // canonical variants
  std::vector<std::string> noise;
  double alpha = 0.05, min_factor = 1.3;
  std::size_t positions[2] = {0, 0};  // chosen positions per phase
  std::size_t segments = 0;           // segments replayed
  std::vector<LocateSite> sites;      // per phase, in data-flow order (prefill first)
  int first[2] = {-1, -1};            // index into sites of each phase's first departing site, or -1
  std::size_t family = 0;             // sites under Holm
  std::string html;                   // the HTML page written beside the JSON, relative to its folder ("" none)
  // Sites a run could not be compared at (a tensor the flash path never holds whole: attn.p arrives one
  // key block at a time), left out for that run, or left out of the test when the candidate or all but one
  // noise run could not be compared there; one line each.
  std::vector<std::string> notes;
};

LocateResult run_locate(const LocateOptions& o);

// --positions: "worst:N" (the N worst of a judge report's "worst" list, `report` = its JSON, plus a random
// sample of max(N / 4, 8) others), "random:N" (seeded, without replacement) or "A:B" (golden indices
// [A, B)). Throws kc::Error (field --positions or the report's file and field) on bad input.
std::vector<std::int64_t> select_positions(const Golden& g, const std::string& spec,
                                           const std::string& report, std::uint64_t seed = 0);

std::string locate_text(const LocateResult& r);
std::string locate_json(const LocateResult& r);  // docs/locate.md "JSON"
std::string locate_html(const LocateResult& r);  // error vs layer per tensor with the floor band

}  // namespace kc
