// The one way every entry point judges: `kerncheck test`, `kerncheck merge` and kerncheck.test() read the
// runs, check the floor and the positions, judge and write the reports through these functions, so what
// one of them checks, all of them check.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "judge/judge.h"
#include "judge/judge_html.h"

namespace kc {

struct JudgeRequest {
  std::string golden, candidate;
  std::vector<std::string> noise;
  std::string floor;  // a floor manifest (kerncheck floor) in place of `noise`: its runs are the noise runs
  std::string ref_logits;  // "" = none: full logits of the reference, for the full-vocabulary KL
  std::optional<std::pair<std::int64_t, std::int64_t>> positions;  // golden positions [A, B) (shards)
  bool shard = false;  // `--partial`: without `positions`, the candidate's own range
  std::size_t worst = JudgeAccumulator::kWorst;
  bool allow_floor_mismatch = false;
};

// The files a floor manifest names (the manifest first, then its runs), for the output checks.
std::vector<std::string> floor_inputs(const std::string& manifest);

// Reads the golden, the candidate and each noise run (one pass each: the files' checks run in it) and
// checks the floor (check_floors) and that every noise run covers the candidate's positions. With
// `floor`, the noise runs are the manifest's: it must have been recorded against this golden, each run must
// be the file it recorded (its checksum), and a server's candidate must come from the floor's served model.
// `mismatches`: the floor mismatches accepted by allow_floor_mismatch.
Partial gather_runs(const JudgeRequest& q, std::vector<std::string>& mismatches);

// The floor check of every entry point: each part's candidate against every part's noise runs (one part
// for `test`; every shard for `merge`, whose files name them). Refuses (exit 3) unless allow; returns the
// accepted mismatches, each once.
std::vector<std::string> check_floors(const std::vector<Partial>& parts,
                                      const std::vector<std::string>& files, bool allow);

// Judges a whole comparison (gather_runs, or merged shards) and puts the floor's provenance and the accepted
// mismatches into the report. `thresholds`: read_thresholds' (the entry points read it before the runs, so
// a bad file is refused before the long part).
JudgeReport judge_runs(const Partial& runs, const std::vector<std::string>& mismatches,
                       const std::optional<Thresholds>& thresholds, const JudgeOptions& o);

struct ReportFiles {
  std::string json, junit, html;     // "" = not written
  std::optional<LocateLink> locate;  // with html: the page links a `kerncheck locate` report
};
// Writes the asked reports atomically.
void write_reports(const JudgeReport& r, const ReportFiles& f);

}  // namespace kc
