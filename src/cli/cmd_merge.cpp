// kerncheck merge SHARDS…: combine `kerncheck test --partial` shards and judge them as one run.
#include <fmt/ranges.h>

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
  CLI::App app{"Merge shards written by kerncheck test --partial and judge them as one comparison."};
  app.name(argv[0]);
  std::vector<std::string> shards;
  std::string thresholds_path, out_partial;
  kc::ReportFiles out;
  kc::JudgeOptions opt;
  app.add_option("shards", shards, "shard files")->required()->check(CLI::ExistingFile);
  app.add_option("--thresholds", thresholds_path, "thresholds TOML from kerncheck calibrate")
      ->check(CLI::ExistingFile);
  app.add_option("--json", out.json, "write the JSON report here");
  app.add_option("--junit", out.junit, "write a JUnit XML report here");
  app.add_option("--html", out.html, "write a self-contained HTML report here");
  app.add_option("--partial", out_partial,
                 "write the merged shard instead of judging (positions may have gaps)");
  kc::cli::add_judge_options(app, opt);
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::check_judge_options(opt);
  std::vector<std::string> inputs = shards;
  inputs.push_back(thresholds_path);
  kc::check_outputs_apart(inputs, {out.json, out.junit, out.html, out_partial});
  std::optional<kc::Thresholds> th;
  if (!thresholds_path.empty()) th = kc::read_thresholds(thresholds_path);
  std::vector<kc::Partial> parts;
  for (auto& s : shards) parts.push_back(kc::read_partial(s));
  // test's floor check, again: a shard may have been written with --allow-floor-mismatch.
  const std::vector<std::string> mismatches = kc::check_floors(parts, shards, opt.allow_floor_mismatch);
  kc::Partial m = kc::merge_partials(parts, shards);  // one golden, one floor, no overlap
  if (!out_partial.empty()) {
    kc::write_partial(out_partial, m);
    kc::printf_safe(stdout, "wrote merged shard %s\n", out_partial.c_str());
    return 0;
  }
  if (m.cand.positions_judged() != m.golden.n) {
    std::string have;
    for (auto& r : m.cand.ranges)
      have += fmt::format("{}[{}, {})", have.empty() ? "" : ", ", r.first, r.second);
    kc::throw_input_error(fmt::format("{}", fmt::join(shards, ", ")), "positions",
                          fmt::format("positions [0, {}) of the golden", m.golden.n),
                          have + " (a shard is missing; or merge with --partial)");
  }
  for (std::size_t r = 0; r < m.noise.size(); ++r)
    if (m.noise[r].positions_judged() != m.golden.n)
      kc::throw_input_error(fmt::format("{}", fmt::join(shards, ", ")), fmt::format("noise run {}", r + 1),
                            fmt::format("all {} positions", m.golden.n),
                            fmt::format("{}", m.noise[r].positions_judged()));
  const kc::JudgeReport report = kc::judge_runs(m, mismatches, th, opt);
  kc::write_reports(report, out);
  kc::print_safe(stdout, kc::render_text(report));
  return kc::verdict_exit_code(report.verdict);
}

kc::cli::Registrar reg({"merge", "merge kerncheck test --partial shards and judge them as one run", run});

}  // namespace
