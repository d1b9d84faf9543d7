// `kerncheck demo` (docs/demo.md): the attention-precision experiments end to end on a real model. Builds the
// default corpus, records the f32 golden, the normal-difference pair (bf16 and bf16+attn=flash: equally
// correct, other summation order) and the attention-P variants on the bf16 base, judges each against the
// golden with the pair as noise floor (the pair itself leave-one-out), calibrates thresholds (good: the
// pair and bf16 P; bad: fp8 direct), sweeps one tensor, and writes one HTML report plus a summary table.
// Rerunnable: every finished file in the output folder whose metadata matches is reused.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc {

struct DemoOptions {
  std::string preset = "quick";  // quick | full | tiny (tests: a few short segments)
  std::string out_dir = "kerncheck-demo";
  std::string model;                                 // "" = the cache of scripts/fetch_smollm2.sh
  std::vector<std::string> prose_files, code_files;  // corpus sources (default: the Debian/system ones)
  std::string sweep_tensor, sweep_bits;              // "" = the preset's
  // The corpus shape (corpus build's flags; empty / 0 = the preset's).
  std::vector<std::int64_t> depths;
  std::optional<std::int64_t> segments_per_depth, decode_last;
  JudgeOptions judge;
};

// Where scripts/fetch_smollm2.sh leaves the SmolLM2 GGUF: ${KC_CACHE:-$HOME/.cache/kerncheck}/smollm2/….
std::string default_demo_model();

// Runs the demo, printing each step with its time and the summary on stdout. Returns 0 when every
// expectation held (noise pair and bf16 P pass, fp8 direct fails, the sweep finds a knee), 1 otherwise.
int run_demo(const DemoOptions& o);

}  // namespace kc
