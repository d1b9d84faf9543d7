#include "judge/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "judge/options.h"

namespace kc {

Partial gather_runs(const JudgeRequest& q, std::vector<std::string>& mismatches) {
  // Deferred verification: accumulate() checks the checksums and rows in its one pass over the files and
  // throws (exit 3, nothing written) before a report exists.
  Golden golden = read_golden(q.golden, true);
  std::optional<Logits> ref;
  if (!q.ref_logits.empty()) ref = open_logits(q.ref_logits);
  Partial p;
  p.golden_path = q.golden;
  p.candidate_path = q.candidate;
  p.noise_paths = q.noise;
  auto range = q.positions;
  {
    CandidateInput ci = open_candidate_input(q.candidate, golden, range, true);
    if (!ci.in_memory) p.candidate_made_by = ci.cand.meta.made_by;
    if (!range && q.shard) range = std::make_pair(ci.begin, ci.begin + ci.n);
    p.cand = accumulate(golden, ci, ref ? &*ref : nullptr, q.worst);
  }
  for (const std::string& path : q.noise) {
    CandidateInput ni = open_candidate_input(path, golden, range, true);
    p.noise_made_by.push_back(ni.in_memory ? Provenance{} : ni.cand.meta.made_by);
    // The floor check before the noise run's pass: a refusal costs no time.
    const std::string m = check_floor_provenance(path, q.candidate, p.candidate_made_by, path,
                                                 p.noise_made_by.back(), q.allow_floor_mismatch);
    if (!m.empty() && std::find(mismatches.begin(), mismatches.end(), m) == mismatches.end())
      mismatches.push_back(m);
    if (ni.begin != p.cand.ranges.front().first || ni.n != p.cand.positions_judged())
      throw_input_error(path, "positions", "the candidate's positions",
                        fmt::format("[{}, {})", ni.begin, ni.begin + ni.n));
    p.noise.push_back(accumulate(golden, ni, ref ? &*ref : nullptr));
  }
  p.golden = golden.meta;
  return p;
}

std::vector<std::string> check_floors(const std::vector<Partial>& parts,
                                      const std::vector<std::string>& files, bool allow) {
  std::vector<std::string> mismatches;
  for (const Partial& c : parts)
    for (std::size_t j = 0; j < parts.size(); ++j)
      for (std::size_t r = 0; r < parts[j].noise_made_by.size(); ++r) {
        const std::string& path = parts[j].noise_paths[r];
        const std::string where =
            j < files.size() ? fmt::format("{} (noise run {} of shard {})", path, r + 1, files[j]) : path;
        std::string m = check_floor_provenance(where, c.candidate_path, c.candidate_made_by, path,
                                               parts[j].noise_made_by[r], allow);
        if (!m.empty() && std::find(mismatches.begin(), mismatches.end(), m) == mismatches.end())
          mismatches.push_back(std::move(m));
      }
  return mismatches;
}

JudgeReport judge_runs(const Partial& runs, const std::vector<std::string>& mismatches,
                       const std::optional<Thresholds>& thresholds, const JudgeOptions& o) {
  JudgeReport r = judge(runs.golden, runs.golden_path, runs.cand, runs.candidate_path, runs.noise,
                        runs.noise_paths, thresholds ? &*thresholds : nullptr, o);
  set_floor_provenance(r, runs.candidate_made_by, runs.noise_made_by, mismatches);
  return r;
}

void write_reports(const JudgeReport& r, const ReportFiles& f) {
  if (!f.json.empty()) write_file_atomic(f.json, report_json(r).dump(2) + "\n");
  if (!f.junit.empty()) write_file_atomic(f.junit, render_junit(r));
  if (!f.html.empty()) write_file_atomic(f.html, render_judge_html(r, f.locate ? &*f.locate : nullptr));
}

}  // namespace kc
