// kerncheck test GOLDEN CANDIDATE: judge a candidate against a golden (docs/judge.md).
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "judge/judge.h"
#include "judge/judge_html.h"
#include "core/text_safe.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Judge a candidate against a golden: KL, flips by margin, noise floor; PASS/FAIL/INCONCLUSIVE."};
  app.name(argv[0]);
  std::string golden_path, cand_path, thresholds_path, json_path, junit_path, html_path, partial_path,
      positions, ref_logits, locate_path;
  std::vector<std::string> noise_paths;
  kc::JudgeOptions opt;
  bool quiet = false, allow_mismatch = false;
  std::size_t worst = kc::JudgeAccumulator::kWorst;
  app.add_option("golden", golden_path, "golden file (kerncheck record)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("candidate", cand_path, "candidate file, or full logits [N, vocab] (.npy/.safetensors)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--noise", noise_paths,
                 "noise-floor run(s): candidates (or logits) of equally correct implementations")
      ->check(CLI::ExistingFile);
  app.add_option("--thresholds", thresholds_path, "thresholds TOML from kerncheck calibrate")
      ->check(CLI::ExistingFile);
  app.add_option("--json", json_path, "write the JSON report here");
  app.add_option("--junit", junit_path, "write a JUnit XML report here");
  app.add_option("--html", html_path, "write a self-contained HTML report here");
  app.add_option("--locate", locate_path,
                 "with --html: a `kerncheck locate --json` report of this candidate; the page shows its first "
                 "departing site per phase and links to its HTML (docs/locate.md)")
      ->check(CLI::ExistingFile);
  app.add_option("--partial", partial_path,
                 "write a shard (accumulators) for kerncheck merge instead of judging");
  app.add_option("--positions", positions, "judge golden positions A:B only (shards)");
  app.add_option("--ref-logits", ref_logits,
                 "reference full logits [N, vocab]: full-vocabulary KL for logits candidates")
      ->check(CLI::ExistingFile);
  app.add_option("--worst", worst,
                 "keep the N worst positions (largest KL) in the JSON report (the text shows 10, the HTML 20); "
                 "`kerncheck locate --positions worst:N` reads them")
      ->capture_default_str();
  kc::cli::add_judge_options(app, opt);
  app.add_flag("--allow-floor-mismatch", allow_mismatch,
               "judge against noise runs whose engine, base precision, KV or logits dtype differ from the "
               "candidate's (refused otherwise, exit 3; the report then says so)");
  app.add_flag("-q,--quiet", quiet, "print only the verdict line");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  std::vector<std::string> inputs{golden_path, cand_path, thresholds_path, locate_path, ref_logits};
  inputs.insert(inputs.end(), noise_paths.begin(), noise_paths.end());
  kc::check_outputs_apart(inputs, {json_path, junit_path, html_path, partial_path});
  if (!locate_path.empty() && html_path.empty())
    kc::fail("--locate: expected --html F (the page that links to the locate report), got none");
  std::optional<kc::LocateLink> locate;  // read before judging: a bad file exits 3 before any output
  if (!locate_path.empty()) locate = kc::read_locate_link(locate_path, html_path);
  if (!(opt.kl_factor >= 1)) kc::fail("--kl-factor: expected ≥ 1, got {}", opt.kl_factor);
  if (!(opt.alpha > 0 && opt.alpha < 1)) kc::fail("--alpha: expected in (0, 1), got {}", opt.alpha);

  // Deferred verification: accumulate() checks the checksums and rows in its one pass over the files and
  // throws (exit 3, nothing written) before a report exists.
  kc::Golden golden = kc::read_golden(golden_path, true);
  std::optional<std::pair<std::int64_t, std::int64_t>> range;
  if (!positions.empty()) range = kc::cli::parse_position_range(positions);
  std::optional<kc::Logits> ref;
  if (!ref_logits.empty()) ref = kc::open_logits(ref_logits);

  kc::JudgeAccumulator cand;
  kc::Provenance cand_made_by;
  {
    kc::CandidateInput ci = kc::open_candidate_input(cand_path, golden, range, true);
    if (!ci.in_memory) cand_made_by = ci.cand.meta.made_by;
    if (!range && !partial_path.empty()) range = std::make_pair(ci.begin, ci.begin + ci.n);
    cand = kc::accumulate(golden, ci, ref ? &*ref : nullptr, worst);
  }
  std::vector<kc::JudgeAccumulator> noise;
  std::vector<kc::Provenance> noise_made_by;
  std::vector<std::string> mismatches;
  for (auto& p : noise_paths) {
    kc::CandidateInput ni = kc::open_candidate_input(p, golden, range, true);
    noise_made_by.push_back(ni.in_memory ? kc::Provenance{} : ni.cand.meta.made_by);
    if (std::string m = kc::check_floor_provenance(p, cand_path, cand_made_by, p, noise_made_by.back(), allow_mismatch);
        !m.empty())
      mismatches.push_back(m);
    if (ni.begin != cand.ranges.front().first || ni.n != cand.positions_judged())
      kc::throw_input_error(p, "positions", "the candidate's positions",
                            fmt::format("[{}, {})", ni.begin, ni.begin + ni.n));
    noise.push_back(kc::accumulate(golden, ni, ref ? &*ref : nullptr));
  }
  if (!partial_path.empty()) {
    kc::Partial part{golden.meta,  golden_path,    cand_path,      noise_paths,
                     cand_made_by, noise_made_by, std::move(cand), std::move(noise)};
    kc::write_partial(partial_path, part);
    kc::printf_safe(stdout, "wrote shard %s: positions [%lld, %lld)\n", partial_path.c_str(),
                static_cast<long long>(part.cand.ranges.front().first),
                static_cast<long long>(part.cand.ranges.back().second));
    return 0;
  }
  std::optional<kc::Thresholds> th;
  if (!thresholds_path.empty()) th = kc::read_thresholds(thresholds_path);
  kc::JudgeReport report =
      kc::judge(golden.meta, golden_path, cand, cand_path, noise, noise_paths, th ? &*th : nullptr, opt);
  kc::set_floor_provenance(report, cand_made_by, noise_made_by, mismatches);
  if (!json_path.empty()) kc::write_file_atomic(json_path, kc::report_json(report).dump(2) + "\n");
  if (!junit_path.empty()) kc::write_file_atomic(junit_path, kc::render_junit(report));
  if (!html_path.empty()) kc::write_file_atomic(html_path, kc::render_judge_html(report, locate ? &*locate : nullptr));
  std::string text = kc::render_text(report);
  if (quiet) text = text.substr(0, text.find('\n') + 1);
  kc::print_safe(stdout, text);
  return kc::verdict_exit_code(report.verdict);
}

kc::cli::Registrar reg({"test", "judge a candidate against a golden (PASS/FAIL/INCONCLUSIVE)", run});

}  // namespace
