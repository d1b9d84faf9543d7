// `kerncheck sweep` (docs/lab.md, docs/demo.md): cut one named tensor's mantissa one width at a time, record
// and judge each width against a golden with the noise floor (or calibrated thresholds), and find the
// knee — the precision the model actually uses.
//
// Each width B records the variant BASE+round:TENSOR=B (model/variant.h) with the f32 engine into
// OUT_DIR/sweep-TENSOR-bB.kcc; a file already there whose metadata matches (same golden checksum, same
// canonical variant, same prefill block) is reused. Each width is judged like `kerncheck test` (same
// accumulators, same verdict rules), so its JSON row agrees with `kerncheck test GOLDEN FILE --noise …`.
//
// Knee: the widest width B such that B and every narrower width tried leave the floor (verdict FAIL:
// some check failed — KL mean/median/p99 above kl_factor × floor in some split, a flip-rate test, the
// backstop, a calibrated limit). A width that leaves the floor while a narrower one does not is listed as
// an isolated excursion, not taken as the knee. "Which statistic" = the failing findings at the knee.
#pragma once
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "judge/judge.h"

namespace kc {

// "23..2", "2..23", "23,16,12,8..2" → distinct widths in [0, 23], widest first. Throws kc::Error naming
// `field` on anything else.
std::vector<int> parse_bit_widths(std::string_view spec, std::string_view field = "--bits");

// The canonical form of a variant string (model/variant.h), for comparing what a file says it ran.
std::string canonical_variant(const std::string& spec, std::string_view field = "--variant");

// Records a candidate of `variant` against `golden` into `out` unless `out` already holds one whose
// metadata matches (golden checksum, canonical variant, prefill block). Returns true when reused.
// `command_line` goes into the file's provenance (and the resume manifest).
struct CachedRecord {
  std::string model, golden, out, variant, tokenizer;
  int prefill_block = 0;
};
bool record_candidate_cached(const CachedRecord& r);

struct SweepOptions {
  std::string model, golden, tensor;  // tensor: a hook name, optionally "NAME@LAYER"
  std::vector<int> bits;              // widest first (parse_bit_widths)
  std::string base = "bf16";          // variant the rounding is added to
  std::vector<std::string> noise;     // noise-floor runs (candidates of the same golden)
  std::string thresholds;             // calibrated limits (optional; then noise only gives ratios)
  std::string out_dir = ".";
  std::string tokenizer;
  int prefill_block = 0;
  JudgeOptions judge;
  // One line per step (recording, judging); nullptr = stderr.
  std::function<void(const std::string&)> log;
};

struct SweepRow {
  int bits = 0;
  std::string variant, candidate;
  bool reused = false;
  double record_seconds = 0;
  Verdict verdict = Verdict::inconclusive;
  bool leaves_floor = false;  // verdict FAIL
  std::int64_t n = 0;
  double kl_mean = NAN, kl_median = NAN, kl_p99 = NAN, kl_max = NAN;
  double kl_median_prose = NAN, kl_median_code = NAN;
  std::uint64_t flips = 0, n_uncertain = 0;
  double flip_rate = NAN, flip_rate_uncertain = NAN;
  std::uint64_t high_margin_flips = 0;
  double ppl = NAN;
  std::vector<Finding> failed;  // failing findings, largest ratio first
  std::vector<std::string> inconclusive_reasons;
};

struct SweepResult {
  std::string model, golden, golden_checksum, tensor, base, mode, thresholds;
  std::vector<std::string> noise;
  JudgeOptions judge;
  // The floor (mean over the noise runs; NaN without noise runs).
  double floor_kl_median = NAN, floor_kl_p99 = NAN, floor_flip_rate_uncertain = NAN;
  double kl_median_limit = NAN;  // noise mode: max(kl_factor × floor, kl_abs_min); thresholds: the limit
  double ppl_ref = NAN;
  std::vector<SweepRow> rows;  // widest first
  std::optional<int> knee;
  std::vector<int> isolated;  // widths that left the floor above the knee
};

SweepResult run_sweep(const SweepOptions& o);

std::string render_sweep_text(const SweepResult& r);
nlohmann::json sweep_json(const SweepResult& r);
// The KL-median-vs-bits curve with the floor, the limit and the knee marked (an <svg> element).
std::string sweep_plot_svg(const SweepResult& r);
// Flip rate at margin ≤ 1 vs bits against the floor (an <svg> element).
std::string sweep_flip_plot_svg(const SweepResult& r);
// Self-contained page: both plots and the table.
std::string render_sweep_html(const SweepResult& r);

}  // namespace kc
