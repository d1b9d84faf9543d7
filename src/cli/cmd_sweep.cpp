// kerncheck sweep: cut one tensor's mantissa one width at a time, record and judge each width, find the
// knee (lab/sweep.h, docs/demo.md).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "lab/sweep.h"
#include "core/text_safe.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Cut a named tensor's mantissa one width at a time; record and judge each width against a "
      "golden and the noise floor; find the knee (the precision the model actually uses)."};
  app.name(argv[0]);
  kc::SweepOptions o;
  std::string bits = "23..2", json_path, html_path;
  app.add_option("--model", o.model, "the model (.gguf or HF folder) the golden was recorded with")
      ->required()
      ->check(CLI::ExistingPath);
  app.add_option("--golden", o.golden, "golden file (kerncheck record --model … --corpus …)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--tensor", o.tensor,
                 "hook name of the tensor to round (attn.p, attn.out, mlp.out, hidden …; "
                 "NAME@LAYER for one layer)")
      ->required();
  app.add_option("--bits", bits, "mantissa widths: a range 23..2 or a list 23,16,12,8..2")
      ->capture_default_str();
  app.add_option("--base", o.base, "variant the rounding is added to (docs/lab.md)")->capture_default_str();
  app.add_option("--noise", o.noise,
                 "noise-floor run(s) of the same golden (equally correct implementations)")
      ->check(CLI::ExistingFile);
  app.add_option("--thresholds", o.thresholds, "calibrated thresholds TOML (kerncheck calibrate)")
      ->check(CLI::ExistingFile);
  app.add_option("--out-dir", o.out_dir, "where the candidates go (existing matching files are reused)")
      ->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "tokenizer, when the model has none of its own");
  app.add_option("--prefill-block", o.prefill_block, "prefill in calls of N tokens (0: one call per segment)")
      ->capture_default_str();
  app.add_option("--json", json_path, "write the JSON report here");
  app.add_option("--html", html_path, "write a self-contained HTML page (KL vs bits, knee marked) here");
  kc::cli::add_judge_options(app, o.judge);
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::check_judge_options(o.judge);
  if (o.prefill_block < 0) kc::fail("--prefill-block: expected ≥ 0, got {}", o.prefill_block);
  o.bits = kc::parse_bit_widths(bits);
  kc::SweepResult r = kc::run_sweep(o);
  if (!json_path.empty()) kc::write_file_atomic(json_path, kc::sweep_json(r).dump(2) + "\n");
  if (!html_path.empty()) kc::write_file_atomic(html_path, kc::render_sweep_html(r));
  kc::print_safe(stdout, kc::render_sweep_text(r));
  return 0;
}

kc::cli::Registrar reg({"sweep", "round one tensor to fewer mantissa bits, width by width; find the knee",
                        run});

}  // namespace
