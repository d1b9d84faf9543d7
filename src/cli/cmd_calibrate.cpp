// kerncheck calibrate --golden G --good F… --bad F… -o thresholds.toml
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "judge/calibrate.h"
#include "judge/judge.h"
#include "core/text_safe.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"Choose thresholds that pass every known-good run and fail every known-bad run."};
  app.name(argv[0]);
  std::string golden_path, out;
  std::vector<std::string> good, bad;
  kc::JudgeOptions opt;
  app.add_option("--golden", golden_path, "the golden all runs are judged against")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--good", good, "known-good runs (candidates or logits)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--bad", bad, "known-bad runs (candidates or logits)")->required()->check(CLI::ExistingFile);
  app.add_option("-o,--output", out, "thresholds TOML to write")->required();
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::require_runs(good.size(), bad.size());
  kc::Golden g = kc::read_golden(golden_path);
  auto table = [&](const std::string& p) {
    kc::CandidateInput ci = kc::open_candidate_input(p, g);
    kc::JudgeAccumulator acc = kc::accumulate(g, ci, nullptr);
    return std::make_pair(p, kc::calibration_table(kc::summarize(acc, p), opt));
  };
  std::vector<std::pair<std::string, std::map<std::string, double>>> gt, bt;
  for (auto& p : good) gt.push_back(table(p));
  for (auto& p : bad) bt.push_back(table(p));
  kc::CalibrationResult res = kc::calibrate(gt, bt);
  res.thresholds.golden_checksum = g.meta.checksum;
  auto g3 = [](double v) { return std::isinf(v) ? std::string("inf") : fmt::format("{:.3g}", v); };
  std::string comment = fmt::format("kerncheck calibrate: {} good, {} bad runs against {}\n", good.size(),
                                    bad.size(), golden_path);
  for (auto& s : res.chosen)
    comment +=
        fmt::format("{}: good max {}, bad min {} (separation {}×), catches {}\n", s.key, g3(s.good_max),
                    g3(s.bad_min_caught), g3(s.separation), fmt::join(s.catches, ", "));
  kc::write_file_atomic(out, kc::thresholds_to_toml(res.thresholds, comment));
  kc::printf_safe(stdout, "calibrated %zu threshold(s) into %s\n", res.chosen.size(), out.c_str());
  for (auto& s : res.chosen)
    kc::printf_safe(stdout, "  %-34s limit %-10s good max %-10s bad min %-10s separation %s×\n", s.key.c_str(),
                g3(s.limit).c_str(), g3(s.good_max).c_str(), g3(s.bad_min_caught).c_str(),
                g3(s.separation).c_str());
  kc::printf_safe(stdout, "per bad run (best separating statistic):\n");
  for (auto& [name, s] : res.best_per_bad)
    kc::printf_safe(stdout, "  %-40s %s\n", name.c_str(),
                s.key.empty() ? "NOT SEPARABLE from the good runs"
                              : fmt::format("{} = {} vs good max {} ({}×)", s.key, g3(s.bad_min_caught),
                                            g3(s.good_max), g3(s.separation))
                                    .c_str());
  kc::printf_safe(stdout, "leave-one-out (each run judged by the limits fitted without it):\n");
  int loo_bad = 0;
  for (auto& l : res.loo) {
    loo_bad += !l.ok;
    kc::printf_safe(stdout, "  %-40s %s %s\n", l.run.c_str(), l.good ? "good" : "bad ",
                l.ok ? (l.good ? "passes" : fmt::format("fails ({})", l.detail).c_str())
                     : (l.good ? fmt::format("FAILS ({}): a false alarm", l.detail).c_str()
                               : "PASSES: missed without it"));
  }
  kc::printf_safe(stdout, "leave-one-out: %d of %zu runs judged right\n", static_cast<int>(res.loo.size()) - loo_bad,
              res.loo.size());
  for (auto& k : res.rests_on_one)
    kc::printf_safe(stdout, "warning: the limit on %s rests on one bad run (only it exceeds the good maximum)\n", k.c_str());
  if (!res.unseparated.empty()) {
    kc::printf_safe(stderr, "kerncheck calibrate: %zu bad run(s) cannot be separated from the good runs: %s\n",
                 res.unseparated.size(), fmt::format("{}", fmt::join(res.unseparated, ", ")).c_str());
    return kc::kExitFail;
  }
  return 0;
}

kc::cli::Registrar reg({"calibrate", "choose thresholds from known-good and known-bad runs", run});

}  // namespace
