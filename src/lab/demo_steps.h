// The steps every demo preset shares (demo.cpp: quick, full, tiny; demo_deep.cpp: deep): a timed step log,
// the corpus (rebuilt, kept when identical), the f32 golden and the candidates (reused when their metadata
// matches), and each run judged against the floor of the others. Internal to lab/.
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden/corpus.h"
#include "judge/judge.h"
#include "lab/demo.h"

namespace kc::demo {

class Steps {
 public:
  Steps() : t0_(Clock::now()) {}
  void begin(const std::string& what);  // prints "[n] what …"
  double end(const std::string& result);  // prints the result and the step's time; returns it in seconds
  double total() const { return secs(t0_); }

 private:
  using Clock = std::chrono::steady_clock;
  static double secs(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  Clock::time_point t0_, ts_;
  int n_ = 0;
};

struct Run {
  std::string name, variant, role;  // role: "noise" (also good), "good", "bad", "probe"
};

// The model the options name (default: the fetch script's cache); exit 3 when it is missing. Also makes the
// output folders (OUT/runs, OUT/reports) and prints the demo's first line.
std::string demo_begin(const DemoOptions& o);

// Step 1: builds the corpus of `co` (resolved here) from the default or the given sources into
// OUT/corpus.kcorpus, keeping the file when it is the same corpus; returns it as read back.
Corpus demo_corpus(Steps& steps, const std::filesystem::path& out, CorpusOptions co, const DemoOptions& o,
                   const std::string& model);

// Step 2: records the f32 golden OUT/golden.kcg (k = 20), or reuses a matching one. Returns its path.
std::string demo_golden(Steps& steps, const std::filesystem::path& out, const Corpus& corpus,
                        const std::string& model, std::map<std::string, double>& record_seconds);

// Step 3: records each run into OUT/runs/NAME.kcc (reused when it matches). Returns name → path.
std::map<std::string, std::string> demo_candidates(Steps& steps, const std::filesystem::path& out,
                                                   const std::string& model, const std::string& golden_path,
                                                   const std::vector<Run>& runs,
                                                   std::map<std::string, double>& record_seconds);

// Step 4's pieces: each run's accumulator, and its report against the noise runs other than itself.
struct Judged {
  const Run* run = nullptr;
  std::string path;
  JudgeReport floor_report, th_report;
};
std::map<std::string, JudgeAccumulator> accumulate_runs(const Golden& golden, const std::vector<Run>& runs,
                                                        const std::map<std::string, std::string>& path_of);
// The floor of `r`: every noise run but itself (leave-one-out).
std::pair<std::vector<JudgeAccumulator>, std::vector<std::string>> floor_for(
    const Run& r, const std::vector<Run>& runs, std::map<std::string, JudgeAccumulator>& acc,
    const std::map<std::string, std::string>& path_of);

// The keys every demo JSON file starts with: its format (schema name) and version, the preset, model,
// golden, positions and the corpus identities.
nlohmann::ordered_json demo_json_head(const std::string& format, const DemoOptions& o, const std::string& model,
                                      const std::string& golden_path, const Golden& golden, const Corpus& corpus);

// `kerncheck demo --preset deep` (and "tiny-deep", its test-sized twin): demo_deep.cpp.
int run_deep_demo(const DemoOptions& o);

// The report's floor test of a split, nullptr if none.
const FloorTest* floor_test_of(const JudgeReport& r, const SplitId& split);

// One verdict from the two columns (vs the floor, vs the thresholds): the stricter, FAIL over INCONCLUSIVE
// over PASS. A miss is never acceptable: either reference failing the run fails it.
Verdict overall_verdict(const Judged& j);
// What each verdict column answers, said under every table that shows them.
extern const char* const kVerdictColumns;
// The failing findings of a report in words (the first n), "; "-separated.
std::string failing_in_words(const JudgeReport& r, std::size_t n);

}  // namespace kc::demo
