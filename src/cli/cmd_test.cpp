// kerncheck test GOLDEN CANDIDATE: judge a candidate against a golden (docs/judge.md).
#include <cstdio>

#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/error.h"
#include "core/atomic_file.h"
#include "core/text_safe.h"
#include "judge/judge.h"
#include "judge/options.h"
#include "judge/pipeline.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Judge a candidate against a golden: KL, flips by margin, noise floor; PASS/FAIL/INCONCLUSIVE."};
  app.name(argv[0]);
  kc::JudgeRequest q;
  kc::ReportFiles out;
  std::string thresholds_path, partial_path, positions, locate_path;
  kc::JudgeOptions opt;
  bool quiet = false;
  app.add_option("golden", q.golden, "golden file (kerncheck record)")->required()->check(CLI::ExistingFile);
  app.add_option("candidate", q.candidate, "candidate file, or full logits [N, vocab] (.npy/.safetensors)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--noise", q.noise,
                 "noise-floor run(s): candidates (or logits) of equally correct implementations")
      ->check(CLI::ExistingFile);
  app.add_option("--floor", q.floor,
                 "a floor manifest (kerncheck floor): its runs are the noise runs, checked against it (the "
                 "golden, each run's checksum, the engine, precision and served model); in place of --noise")
      ->check(CLI::ExistingFile);
  app.add_option("--thresholds", thresholds_path, "thresholds TOML from kerncheck calibrate")
      ->check(CLI::ExistingFile);
  app.add_option("--json", out.json, "write the JSON report here");
  app.add_option("--junit", out.junit, "write a JUnit XML report here");
  app.add_option("--html", out.html, "write a self-contained HTML report here");
  app.add_option("--locate", locate_path,
                 "with --html: a `kerncheck locate --json` report of this candidate; the page shows its first "
                 "departing site per phase and links to its HTML (docs/locate.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--partial", partial_path,
                 "write a shard (accumulators) for kerncheck merge instead of judging");
  app.add_option("--positions", positions, "judge golden positions A:B only (shards)");
  app.add_option("--ref-logits", q.ref_logits,
                 "reference full logits [N, vocab]: full-vocabulary KL for logits candidates")
      ->check(CLI::ExistingFile);
  app.add_option(
         "--worst", q.worst,
         "keep the N worst positions (largest KL) in the JSON report (the text shows 10, the HTML 20); "
         "`kerncheck locate --positions worst:N` reads them")
      ->capture_default_str();
  kc::cli::add_judge_options(app, opt);
  app.add_flag("-q,--quiet", quiet, "print only the verdict line");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::check_judge_options(opt);
  std::vector<std::string> inputs{q.golden, q.candidate, thresholds_path, locate_path, q.ref_logits};
  inputs.insert(inputs.end(), q.noise.begin(), q.noise.end());
  if (!q.floor.empty())
    for (const std::string& f : kc::floor_inputs(q.floor)) inputs.push_back(f);
  kc::check_outputs_apart(inputs, {out.json, out.junit, out.html, partial_path});
  if (!locate_path.empty() && out.html.empty())
    kc::fail("--locate: expected --html F (the page that links to the locate report), got none");
  // Everything small is read before the runs: a bad file exits 3 before the long part.
  if (!locate_path.empty()) out.locate = kc::read_locate_link(locate_path, out.html);
  std::optional<kc::Thresholds> th;
  if (!thresholds_path.empty()) th = kc::read_thresholds(thresholds_path);
  if (!positions.empty()) q.positions = kc::cli::parse_position_range(positions);
  q.shard = !partial_path.empty();
  q.allow_floor_mismatch = opt.allow_floor_mismatch;

  std::vector<std::string> mismatches;
  kc::Partial runs = kc::gather_runs(q, mismatches);
  if (!partial_path.empty()) {
    kc::write_partial(partial_path, runs);
    kc::printf_safe(stdout, "wrote shard %s: positions [%lld, %lld)\n", partial_path.c_str(),
                static_cast<long long>(runs.cand.ranges.front().first),
                static_cast<long long>(runs.cand.ranges.back().second));
    return 0;
  }
  const kc::JudgeReport report = kc::judge_runs(runs, mismatches, th, opt);
  kc::write_reports(report, out);
  std::string text = kc::render_text(report);
  if (quiet) text = text.substr(0, text.find('\n') + 1);
  kc::print_safe(stdout, text);
  return kc::verdict_exit_code(report.verdict);
}

kc::cli::Registrar reg({"test", "judge a candidate against a golden (PASS/FAIL/INCONCLUSIVE)", run});

}  // namespace
