// The model-level judge (`kerncheck test`, `merge`, `calibrate`): accumulates the per-position metrics of a
// candidate (and of the noise runs) against a golden, summarises them per split, and decides
// PASS / FAIL / INCONCLUSIVE. The rules are in docs/judge.md; the JSON keys there too.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "golden/golden.h"
#include "golden/record_logits.h"
#include "metrics/accumulator.h"
#include "metrics/statistics.h"

namespace kc {

enum class Verdict { pass, fail, inconclusive };
const char* verdict_name(Verdict v);  // "PASS", "FAIL", "INCONCLUSIVE"
int verdict_exit_code(Verdict v);     // 0, 1, 2

// What the verdict reads the candidate against (docs/judge.md, "Verdict"): nothing, the noise runs, or
// calibrated thresholds (noise runs then only give ratios, σ and the backstop's floor).
enum class JudgeMode { none, noise, thresholds };
const char* mode_name(JudgeMode m);  // "none" | "noise" | "thresholds"

// The verdict's knobs. Every one is a row of the option table (judge/options.h): a flag of `kerncheck test`
// and `merge`, a keyword of kerncheck.test(), validated in one place.
struct JudgeOptions {
  double kl_factor = 2.0;               // noise mode: KL limit = kl_factor × floor
  double kl_abs_min = 1e-6;             // … but never below this
  double alpha = 0.05;                  // family-wise level of the floor and flip tests (Holm)
  std::int64_t min_positions = 1000;    // fewer positions judged: at best INCONCLUSIVE
  std::int64_t min_split_center = 100;  // a split needs this many positions for mean/median limits
  std::int64_t min_split_tail = 1000;   // … and this many for p99 limits
  std::int64_t min_uncertain = 50;      // positions with margin in (0, 1] needed to test flips
  double min_coverage = 0.99;           // probability mass the candidate reported (partial coverage)
  double mde_target = 1.25;             // decode / deepest depth must detect this × the floor's KL mean
  double power = 0.95;                  // … with this power
  bool explain = false;                 // text report: every floor test with each noise run's value
  bool allow_floor_mismatch = false;    // judge against noise runs of another engine or precision
  double onset_alpha = 0.01;            // the depth onset's false-alarm level (its deepest bucket's test)
};

// Calibrated limits: statistic key (see stat_table) → largest passing value (smallest for a statistic
// where lower is worse).
struct Thresholds {
  std::map<std::string, double> limits;
  std::string golden_checksum;  // the golden they were calibrated on ("" = any)
  std::string path;
};
Thresholds read_thresholds(const std::string& path);
std::string thresholds_to_toml(const Thresholds& t, const std::string& comment);

// One input of the judge: a candidate file or full logits turned into a candidate in memory.
struct CandidateInput {
  std::string path;
  Candidate cand;                // for files
  CandidateBuffers buffers;      // for logits (or built in memory)
  bool in_memory = false;        // true: the arrays are `buffers`, else the file's
  std::optional<Logits> logits;  // the logits, kept for the full-vocabulary KL
  CandidateArrays arrays() const { return in_memory ? buffers.view() : cand.a; }
  std::int64_t begin = 0, n = 0;  // golden positions covered
};
// Detects the kind from the content (kerncheck.format metadata, else logits) and checks it belongs to
// the golden. `range` limits logits to golden positions [range.first, range.second) (default all).
// defer: a candidate file's rows are verified by accumulate() (golden.h, DeferredCheck).
CandidateInput open_candidate_input(const std::string& path, const Golden& golden,
                                    std::optional<std::pair<std::int64_t, std::int64_t>> range = std::nullopt,
                                    bool defer = false);

// Accumulates positions [begin, begin + n) of the golden (candidate row 0 = golden position `begin`).
// ref_logits (all golden positions) + candidate logits give the full-vocabulary KL.
// Deferred checks of the golden and the candidate file (read with defer = true) are run and finished
// here, in the same pass when the fast path applies: a damaged file throws before anything is returned.
// worst: how many worst positions (largest KL, non-finite first) the accumulator keeps (`--worst`).
JudgeAccumulator accumulate(const Golden& golden, const CandidateInput& cand, const Logits* ref_logits,
                            std::size_t worst = JudgeAccumulator::kWorst);

// ---- statistics ----------------------------------------------------------------------------------------
// Summaries (KlStats, SplitSummary, RunSummary, summarize) are metrics/summary.h; the statistic table
// (names, thresholds keys, stat_table) is metrics/statistics.h. This is stat_table with the judge's
// smallest split (min_split_center).
inline std::map<std::string, double> stat_table(const RunSummary& r, const JudgeOptions& o) {
  return stat_table(r, o.min_split_center);
}

// ---- verdict -----------------------------------------------------------------------------------------
// The rules that can fail a run, in the order in which they decide the headline (docs/judge.md, "Verdict"):
// non-finite output is beyond doubt; then the KL evidence (the paired floor test, the fixed KL limits, the
// calibrated limits: each reads many positions); then the flip evidence (a test on one margin bin, the
// backstop's count above margin 1), which rests on few positions.
enum class Rule { nonfinite, floor_test, kl_limit, threshold, flip_test, backstop };
const char* rule_name(Rule r);  // "nonfinite", "floor_test", "kl_limit", "threshold", "flip_test", "backstop"

// One check: a rule applied to one statistic of one split (or one margin bin).
struct Finding {
  Rule rule = Rule::nonfinite;
  SplitId split = SplitId::overall();  // overall for nonfinite, backstop and the flip tests
  int bin = -1;                        // flip_test: the margin bin
  const StatDef* stat = nullptr;       // what was measured (metrics/statistics.h)
  double value = NAN, limit = NAN, floor = NAN;
  double ratio = NAN;    // value / limit (> 1 fails)
  double p_value = NAN;  // floor_test and flip_test: the test's one-sided p (Holm decides `failed`)
  double t = NAN;        // floor_test: the t statistic
  bool failed = false;
  std::string detail;         // the numbers behind it (judge/words.h)
  std::string where() const;  // "overall", "domain prose", "bin (0.25,0.5]"
  const char* statistic() const { return stat->name; }
};

struct BinReport {
  std::string label;
  BinCount cand, floor;         // floor: pooled over the noise runs (n = runs × positions)
  bool tested = false;          // noise mode, a non-tie bin with positions: in the Holm family
  double p_value = NAN;         // one-sided Fisher exact, candidate rate > floor rate
  bool rejected = false;        // after Holm over the whole family
  double expected_flips = NAN;  // Gaussian model with σ of the floor: Σ Φ(−m / (√2 σ)) over the bin
  double expected_flips_cand_sigma = NAN;  // the same with the candidate's own σ
};

// The paired floor test of one split's KL mean (docs/judge.md, "Floor test"): the candidate is one more
// implementation exchangeable with the noise runs under the null.
struct FloorTest {
  SplitId split;
  std::string statistic;                   // floor_test_statistic() (metrics/statistics.h): kl_mean
  std::int64_t n = 0;                      // candidate positions with finite KL in the split
  int segments = 0;                        // segments with positions in the split
  double cand = NAN, floor_mean = NAN;     // KL mean of the candidate, mean over the noise runs
  std::vector<double> floor_runs;          // each noise run's KL mean
  double v_segments = NAN, v_runs = NAN;   // one run's variance: Σ_j s_j² (per segment) and s² of the means
  double sd = NAN;                         // sqrt((1 + 1/m) · max(v_segments, v_runs))
  double df = NAN, t = NAN, p_value = NAN; // Student t, one-sided (candidate larger)
  double limit = NAN;                      // the value at which this test's Holm level is reached
  bool rejected = false;                   // after Holm over the whole family (these + flip bins)
  double mde = NAN, mde_ratio = NAN;       // minimum detectable increase (absolute; (floor + mde) / floor)
  bool matters = false;                    // decode phase or deepest depth: must detect mde_target
  std::vector<double> loo_t;               // each noise run tested against the others (≥ 3 runs)
};

// The depth profile (docs/judge.md, "Depth profile and onset"): the candidate's KL mean against the floor's
// in fine depth buckets (profile_bucket's, merged from the shallow end until each holds min_split_center
// positions), each with the floor test's paired statistic, and the onset depth.
struct DepthBucket {
  std::int64_t lo = 0, hi = 0;  // depths [lo, hi)
  std::int64_t n = 0;           // candidate positions with finite KL
  int segments = 0;             // segments with positions in the bucket
  double cand = NAN, floor_mean = NAN, floor_lo = NAN, floor_hi = NAN;  // KL means; the floor runs' min … max
  double t = NAN, df = NAN, p_value = NAN;  // paired test as FloorTest's (≥ 2 noise runs that differ)
  bool outside = false;                     // t above the onset's critical value
  double ratio() const { return floor_mean > 0 ? cand / floor_mean : NAN; }
};
// The first depth from which the candidate stays outside the floor's spread: the first bucket of the run
// of `outside` buckets that reaches the deepest one. Its false-alarm rate is the deepest bucket's one-sided
// test's, onset_alpha. Its uncertainty: the onset of the same rule on segments resampled with replacement.
struct DepthOnset {
  bool tested = false;  // ≥ 2 noise runs that differ and a profile bucket: the rule ran
  bool found = false;
  int bucket = -1;      // index into DepthProfile::buckets
  std::int64_t depth = 0;  // the onset bucket's lower edge
  double t_critical = NAN, df = NAN;
  int resamples = 0;
  double found_share = NAN;          // share of the resamples that found an onset
  std::int64_t lo = 0, hi = 0;       // 5th and 95th percentile of the resamples' onset depths (when found)
  double ratio_after = NAN;          // the candidate's KL mean over the floor's, from the onset on
};
struct DepthProfile {
  std::vector<DepthBucket> buckets;
  DepthOnset onset;
  bool kept = true;  // false: shards written before the depth sums were kept (no profile)
};

struct WorstDetail {
  WorstPosition w;
  std::string segment_name, domain;
  std::int64_t offset = 0;  // within the segment
  std::string context;      // quoted text before the token, "" when the golden has no text
  std::string next_text;    // the token's text
};

struct JudgeReport {
  Verdict verdict = Verdict::inconclusive;
  JudgeMode mode = JudgeMode::none;
  // Every check made: the failing ones first, rule by rule in Rule's order (the strongest of each rule
  // first: smallest p, else largest ratio); the others by ratio, closest to its limit first.
  std::vector<Finding> findings;
  std::string headline;  // the verdict in one sentence (judge/words.h): what a reader needs first
  std::vector<std::string> inconclusive_reasons;  // under a FAIL: caveats, they do not change it
  std::string golden_path, candidate_path, thresholds_path;
  Provenance candidate_made_by;  // engine / variant of a candidate file (set by the caller; empty for logits)
  std::vector<std::string> noise_paths;
  GoldenMeta golden;
  std::int64_t positions_judged = 0;
  RunSummary cand;
  std::vector<RunSummary> noise;
  bool has_floor = false;
  double sigma_floor = NAN;
  std::vector<BinReport> bins;  // overall, with the floor
  std::vector<FloorTest> floor_tests;  // noise mode with ≥ 2 distinct noise runs
  DepthProfile depth_profile;          // every report (the floor's columns with noise runs)
  // Noise mode without any floor test: why (the verdict then rests on the fixed limits alone, and the
  // headline and every report say so); "" when floor tests ran.
  std::string no_floor_test;
  std::string floor_manifest;  // `--floor MANIFEST`: the manifest the noise runs came from ("" = --noise)
  int family_size = 0;                 // hypotheses under Holm: floor tests + flip bins tested (noise mode)
  std::vector<std::string> notes;      // said in every report, never change the verdict
  std::vector<Provenance> noise_made_by;       // set by the caller (empty entries for logits files)
  std::vector<std::string> floor_mismatches;   // accepted with --allow-floor-mismatch (said loudly)
  std::map<std::string, double> stats, floor_stats, noise_ratio;
  std::vector<WorstDetail> worst;
  std::vector<SamplePoint> sample;  // ≤ 20k, sorted by position
  std::vector<std::string> domains;
  JudgeOptions options;
};

// The parts of a run's provenance that a floor must share with the candidate (docs/judge.md, "Floors
// that match"): engine, base precision (variant term bf16), KV cache dtype (kv=), logits dtype (logits=).
// A variant string that parse_variant refuses (a foreign engine's, a newer build's) is compared by its
// bf16 / kv= / logits= terms as written, dtypes by their canonical names either way.
struct FloorMismatch {
  enum class What { none, engine, base, kv, logits } what = What::none;
  std::string cand, floor;  // the two values ("bf16", "f32"; "float8_e4m3fn", "bfloat16"; …)
  explicit operator bool() const { return what != What::none; }
};
// None when they match or cannot be compared (a logits file has no provenance).
FloorMismatch floor_provenance_mismatch(const Provenance& cand, const Provenance& floor);

// The one floor check of `kerncheck test`, `merge` and kerncheck.test(): noise run `noise_path` against the
// candidate. On a mismatch, refuses (exit 3; `file` names where the noise run was given: its path, or a
// shard) naming the candidate, both variants and what to do, unless `allow`; then returns
// "NOISE_PATH: sentence" for the report. Returns "" when they match.
std::string check_floor_provenance(const std::string& file, const std::string& cand_path, const Provenance& cand,
                                   const std::string& noise_path, const Provenance& noise, bool allow);

// golden: the golden's metadata (segments for quoting). noise: accumulators of the noise runs. Checks the
// options (check_judge_options) and refuses (exit 3) a thresholds limit on a split this golden lacks.
JudgeReport judge(const GoldenMeta& golden, const std::string& golden_path, const JudgeAccumulator& cand,
                  const std::string& cand_path, const std::vector<JudgeAccumulator>& noise,
                  const std::vector<std::string>& noise_paths, const Thresholds* thresholds,
                  const JudgeOptions& opt);

// Sets the report's provenance fields and puts a FLOOR MISMATCH note first for each accepted mismatch
// (check_floor_provenance's return values).
void set_floor_provenance(JudgeReport& r, const Provenance& cand, std::vector<Provenance> noise,
                          std::vector<std::string> mismatches);

// The floor-test table, one source of the rows for the text and the HTML report: per split the cells
// split, KL mean, floor mean, floor runs' min…max, t, p, MDE ×, significant ("yes"/"no").
struct FloorTestRow {
  std::vector<std::string> cells;
  bool significant = false, matters = false;  // rejected after Holm; a split that must detect mde_target
};
std::vector<std::string> floor_test_header();
std::vector<FloorTestRow> floor_test_rows(const JudgeReport& r);

// The depth profile's table, one source for the text (--explain) and the HTML report: per bucket the depths,
// positions, KL mean, floor mean, ratio, floor runs' min…max, t, outside ("yes"/"no").
std::vector<std::string> depth_profile_header();
std::vector<std::vector<std::string>> depth_profile_rows(const JudgeReport& r);

std::string render_text(const JudgeReport& r);
nlohmann::json report_json(const JudgeReport& r);
std::string render_junit(const JudgeReport& r);

// ---- shards --------------------------------------------------------------------------------------------
// A partial result (`kerncheck test --partial`): golden metadata + the accumulators of the candidate
// and each noise run, as safetensors (metadata: JSON; tensors: the KL values).
struct Partial {
  GoldenMeta golden;
  std::string golden_path, candidate_path;
  std::vector<std::string> noise_paths;
  std::string floor_manifest;  // the noise runs came from this manifest (`--floor`; not kept in shards)
  std::string floor_note;      // which of its runs were left out as repeats of others' bits (words.h)
  // Who made the candidate and each noise run (merge repeats test's floor check; empty for logits files
  // and for shards written before these were kept).
  Provenance candidate_made_by;
  std::vector<Provenance> noise_made_by;
  JudgeAccumulator cand;
  std::vector<JudgeAccumulator> noise;
};
void write_partial(const std::string& path, const Partial& p);
// Verifies the shard's checksum (over its whole content: every count, every KL value) before any use.
Partial read_partial(const std::string& path);
// The same from bytes in memory (fuzzing); `verify_checksum` can be turned off only by fuzzers.
Partial parse_partial(std::span<const std::uint8_t> bytes, const std::string& path, bool verify_checksum = true);
// Merges shards of one comparison; refuses shards of different goldens or overlapping ranges, naming
// paths[i] (the shard files; "shard i" where not given).
Partial merge_partials(const std::vector<Partial>& parts, const std::vector<std::string>& paths = {});

}  // namespace kc
