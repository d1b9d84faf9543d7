// Phase timings of `kerncheck test GOLDEN CANDIDATE` (what bench/judge_throughput.py times as a whole):
// read the golden, open the candidate (headers; their verification is deferred to accumulate, as in
// `kerncheck test`), accumulate (+ checksums and row checks), judge (summaries, verdict), JSON.
//   kc_judge_phases GOLDEN CANDIDATE [REPEATS]      (KC_PHASES_EAGER=1: the readers verify, as before)
// Prints one line per phase: wall seconds and CPU seconds of the process (best of REPEATS each) and
// positions per CPU second. On a shared machine the CPU time is the figure to read: with KC_THREADS=1 it
// is the time of one core, whatever else runs.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "judge/judge.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s GOLDEN CANDIDATE [REPEATS]\n", argv[0]);
    return 3;
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  // As `kerncheck test` does: the readers defer the checksums and row checks to accumulate's one pass
  // (KC_PHASES_EAGER=1: the readers verify, a second pass over the files).
  const bool defer = !std::getenv("KC_PHASES_EAGER");
  using clk = std::chrono::steady_clock;
  auto cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
  };
  double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30}, best_cpu[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
  std::int64_t n = 0;
  try {
    for (int r = 0; r < reps; ++r) {
      double c[6];
      c[0] = cpu();
      auto t0 = clk::now();
      kc::Golden g = kc::read_golden(argv[1], defer);
      auto t1 = clk::now();
      c[1] = cpu();
      kc::CandidateInput ci = kc::open_candidate_input(argv[2], g, std::nullopt, defer);
      auto t2 = clk::now();
      c[2] = cpu();
      kc::JudgeAccumulator acc = kc::accumulate(g, ci, nullptr);
      auto t3 = clk::now();
      c[3] = cpu();
      kc::JudgeReport rep = kc::judge(g.meta, argv[1], acc, argv[2], {}, {}, nullptr, kc::JudgeOptions{});
      auto t4 = clk::now();
      c[4] = cpu();
      std::string js = kc::report_json(rep).dump(2);
      auto t5 = clk::now();
      c[5] = cpu();
      n = acc.positions_judged();
      const clk::time_point ts[6] = {t0, t1, t2, t3, t4, t5};
      for (int i = 0; i < 5; ++i) {
        best[i] = std::min(best[i], std::chrono::duration<double>(ts[i + 1] - ts[i]).count());
        best_cpu[i] = std::min(best_cpu[i], c[i + 1] - c[i]);
      }
    }
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
  const char* names[5] = {"read golden", "open candidate", "accumulate", "judge (summaries)", "report JSON"};
  double total = 0, total_cpu = 0;
  std::printf("%-18s %9s %9s  %s\n", "phase", "wall s", "CPU s", "M positions per CPU second");
  for (int i = 0; i < 5; ++i) {
    total += best[i];
    total_cpu += best_cpu[i];
    std::printf("%-18s %9.4f %9.4f  %8.2f\n", names[i], best[i], best_cpu[i], n / best_cpu[i] / 1e6);
  }
  std::printf("%-18s %9.4f %9.4f  %8.2f\n", "total", total, total_cpu, n / total_cpu / 1e6);
  return 0;
}
