// kerncheck demo: the attention-precision experiments end to end on SmolLM2 (lab/demo.h, docs/demo.md).
#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/error.h"
#include "lab/demo.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "The main demo: corpus, f32 golden of SmolLM2, the noise pair and the attention-P variants, "
      "judged and calibrated, one tensor swept; one HTML report and a summary table."};
  app.name(argv[0]);
  kc::DemoOptions o;
  app.add_option("--preset", o.preset,
                 "quick (≤ 10 min on 2 idle cores), deep (KL by depth to 8 192 tokens) or full (the full corpus; "
                 "hours)")
      ->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "output folder (finished files there are reused)")
      ->capture_default_str();
  app.add_option("--model", o.model,
                 "the model (.gguf or HF folder); default: SmolLM2 where scripts/fetch_smollm2.sh puts it")
      ->check(CLI::ExistingPath);
  app.add_option("--prose", o.prose_files,
                 "prose source file (repeatable; default: KJV + Devil's Dictionary)")
      ->check(CLI::ExistingFile);
  app.add_option("--code", o.code_files,
                 "code source file (repeatable; default: the pinned Python stdlib and C headers of data/corpus)")
      ->check(CLI::ExistingFile);
  app.add_option("--sweep-tensor", o.sweep_tensor, "tensor to sweep (default: the preset's, attn.p)");
  app.add_option("--sweep-bits", o.sweep_bits, "widths to sweep (default: the preset's)");
  app.add_option("--depths", o.depths, "corpus: context depths (default: the preset's; corpus build --depths)")
      ->delimiter(',');
  std::int64_t segments_per_depth = 0, decode_last = 0;  // into o only when given (0 is a value)
  app.add_option("--segments-per-depth", segments_per_depth,
                 "corpus: segments per depth (default: the preset's; more segments power the floor test)");
  app.add_option("--decode-last", decode_last,
                 "corpus: positions at the end of each segment decoded one token at a time (default: the "
                 "preset's)");
  kc::cli::add_judge_options(app, o.judge);
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  if (app.count("--segments-per-depth")) o.segments_per_depth = segments_per_depth;
  if (app.count("--decode-last")) o.decode_last = decode_last;
  kc::check_judge_options(o.judge);
  // "tiny" (a few short segments, seconds) exists for the tests; it measures nothing.
  if (o.preset != "quick" && o.preset != "full" && o.preset != "deep" && o.preset != "tiny" &&
      o.preset != "tiny-deep")
    kc::fail("--preset: expected quick, full or deep, got \"{}\"", o.preset);
  return kc::run_demo(o);
}

kc::cli::Registrar reg({"demo",
                        "the main demo: attention-precision experiments on SmolLM2, judged and swept", run});

}  // namespace
