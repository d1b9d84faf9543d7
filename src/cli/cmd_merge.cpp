// kerncheck merge SHARDS…: combine `kerncheck test --partial` shards and judge them as one run.
#include <algorithm>
#include <cstdio>
#include <fmt/ranges.h>
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
  CLI::App app{"Merge shards written by kerncheck test --partial and judge them as one comparison."};
  app.name(argv[0]);
  std::vector<std::string> shards;
  std::string thresholds_path, json_path, junit_path, html_path, out_partial;
  kc::JudgeOptions opt;
  bool allow_mismatch = false;
  app.add_option("shards", shards, "shard files")->required()->check(CLI::ExistingFile);
  app.add_option("--thresholds", thresholds_path, "thresholds TOML from kerncheck calibrate")
      ->check(CLI::ExistingFile);
  app.add_option("--json", json_path, "write the JSON report here");
  app.add_option("--junit", junit_path, "write a JUnit XML report here");
  app.add_option("--html", html_path, "write a self-contained HTML report here");
  app.add_option("--partial", out_partial,
                 "write the merged shard instead of judging (positions may have gaps)");
  kc::cli::add_judge_options(app, opt);
  app.add_flag("--allow-floor-mismatch", allow_mismatch,
               "judge shards whose noise runs' engine, base precision, KV or logits dtype differ from the "
               "candidate's (refused otherwise, exit 3, as by kerncheck test; the report then says so)");
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  std::vector<std::string> inputs = shards;
  inputs.push_back(thresholds_path);
  kc::check_outputs_apart(inputs, {json_path, junit_path, html_path, out_partial});
  std::vector<kc::Partial> parts;
  for (auto& s : shards) parts.push_back(kc::read_partial(s));
  // test's floor check, again: a shard may have been written with --allow-floor-mismatch, or shards may
  // carry other noise runs than each other. Every shard's candidate against every shard's noise runs.
  std::vector<std::string> mismatches;
  for (std::size_t i = 0; i < parts.size(); ++i)
    for (std::size_t j = 0; j < parts.size(); ++j)
      for (std::size_t r = 0; r < parts[j].noise_made_by.size(); ++r) {
        std::string m = kc::check_floor_provenance(
            fmt::format("{} (noise run {} of shard {})", parts[j].noise_paths[r], r + 1, shards[j]),
            parts[i].candidate_path, parts[i].candidate_made_by, parts[j].noise_paths[r], parts[j].noise_made_by[r],
            allow_mismatch);
        if (!m.empty() && std::find(mismatches.begin(), mismatches.end(), m) == mismatches.end())
          mismatches.push_back(m);
      }
  kc::Partial m = kc::merge_partials(parts, shards);
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
  std::optional<kc::Thresholds> th;
  if (!thresholds_path.empty()) th = kc::read_thresholds(thresholds_path);
  kc::JudgeReport report = kc::judge(m.golden, m.golden_path, m.cand, m.candidate_path, m.noise,
                                     m.noise_paths, th ? &*th : nullptr, opt);
  kc::set_floor_provenance(report, m.candidate_made_by, m.noise_made_by, mismatches);
  if (!json_path.empty()) kc::write_file_atomic(json_path, kc::report_json(report).dump(2) + "\n");
  if (!junit_path.empty()) kc::write_file_atomic(junit_path, kc::render_junit(report));
  if (!html_path.empty()) kc::write_file_atomic(html_path, kc::render_judge_html(report));
  kc::print_safe(stdout, kc::render_text(report));
  return kc::verdict_exit_code(report.verdict);
}

kc::cli::Registrar reg({"merge", "merge kerncheck test --partial shards and judge them as one run", run});

}  // namespace
