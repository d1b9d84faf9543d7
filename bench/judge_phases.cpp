// Phase timings of `kerncheck test GOLDEN CANDIDATE` (what bench/judge_throughput.py times as a whole):
// read + verify the golden, open + verify the candidate, accumulate, judge (summaries, verdict), JSON.
//   kc_judge_phases GOLDEN CANDIDATE [REPEATS]
// Prints one line per phase: seconds (best of REPEATS) and positions/s.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "eval/judge.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s GOLDEN CANDIDATE [REPEATS]\n", argv[0]);
    return 3;
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  using clk = std::chrono::steady_clock;
  double best[5] = {1e30, 1e30, 1e30, 1e30, 1e30};
  std::int64_t n = 0;
  try {
    for (int r = 0; r < reps; ++r) {
      auto t0 = clk::now();
      kc::Golden g = kc::read_golden(argv[1]);
      auto t1 = clk::now();
      kc::CandidateInput ci = kc::open_candidate_input(argv[2], g);
      auto t2 = clk::now();
      kc::JudgeAccumulator acc = kc::accumulate(g, ci, nullptr);
      auto t3 = clk::now();
      kc::JudgeReport rep = kc::judge(g.meta, argv[1], acc, argv[2], {}, {}, nullptr, kc::JudgeOptions{});
      auto t4 = clk::now();
      std::string js = kc::report_json(rep).dump(2);
      auto t5 = clk::now();
      n = acc.positions_judged();
      const clk::time_point ts[6] = {t0, t1, t2, t3, t4, t5};
      for (int i = 0; i < 5; ++i)
        best[i] = std::min(best[i], std::chrono::duration<double>(ts[i + 1] - ts[i]).count());
    }
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  }
  const char* names[5] = {"read golden", "open candidate", "accumulate", "judge (summaries)", "report JSON"};
  double total = 0;
  for (int i = 0; i < 5; ++i) {
    total += best[i];
    std::printf("%-18s %8.4f s  %8.2f M positions/s\n", names[i], best[i], n / best[i] / 1e6);
  }
  std::printf("%-18s %8.4f s  %8.2f M positions/s\n", "total", total, n / total / 1e6);
  return 0;
}
