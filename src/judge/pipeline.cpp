#include "judge/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "judge/floor_manifest.h"
#include "judge/options.h"
#include "judge/words.h"

namespace kc {

namespace {

// The served model a `record --server` file names in its run key ("" for other files).
std::string served_model_of(const Candidate& c) {
  auto it = c.meta.extra.find("server_record");
  if (it == c.meta.extra.end()) return "";
  const nlohmann::json k = nlohmann::json::parse(it->second, nullptr, false);
  return k.is_object() && k.contains("model") && k["model"].is_string() ? k["model"].get<std::string>() : "";
}

// A manifest's claims against the golden and the candidate (before any long pass).
void check_manifest(const FloorManifest& m, const Golden& golden, const std::string& golden_path,
                    const CandidateInput& cand, const std::string& cand_path) {
  if (m.golden_checksum != golden.meta.checksum)
    throw_input_error(m.path, "golden.checksum",
                      fmt::format("the golden's checksum ({}: {}): a floor is recorded against one golden",
                                  golden_path, golden.meta.checksum),
                      m.golden_checksum);
  const std::string served = cand.in_memory ? "" : served_model_of(cand.cand);
  if (!m.served_model.empty() && !served.empty() && served != m.served_model)
    throw_input_error(cand_path, "server_record.model",
                      fmt::format("the floor's served model \"{}\" ({})", m.served_model, m.path),
                      "\"" + served + "\"");
}

}  // namespace

std::vector<std::string> floor_inputs(const std::string& manifest) {
  std::vector<std::string> v{manifest};
  for (const FloorRun& r : read_floor_manifest(manifest).runs) v.push_back(r.path);
  return v;
}

Partial gather_runs(const JudgeRequest& q_in, std::vector<std::string>& mismatches) {
  JudgeRequest q = q_in;
  std::optional<FloorManifest> manifest;
  std::vector<std::size_t> judged;  // the manifest's runs read (judged_runs)
  if (!q.floor.empty()) {
    if (!q.noise.empty())
      fail("--floor: expected the manifest alone (it lists the floor's runs), got {} --noise run(s) too",
           q.noise.size());
    manifest = read_floor_manifest(q.floor);
    judged = judged_runs(manifest->runs);
    for (std::size_t i : judged) q.noise.push_back(manifest->runs[i].path);
  }
  // Deferred verification: accumulate() checks the checksums and rows in its one pass over the files and
  // throws (exit 3, nothing written) before a report exists.
  Golden golden = read_golden(q.golden, true);
  std::optional<Logits> ref;
  if (!q.ref_logits.empty()) ref = open_logits(q.ref_logits);
  Partial p;
  p.golden_path = q.golden;
  p.candidate_path = q.candidate;
  p.noise_paths = q.noise;
  p.floor_manifest = q.floor;
  auto range = q.positions;
  {
    CandidateInput ci = open_candidate_input(q.candidate, golden, range, true);
    if (manifest) check_manifest(*manifest, golden, q.golden, ci, q.candidate);
    if (!ci.in_memory) p.candidate_made_by = ci.cand.meta.made_by;
    if (!range && q.shard) range = std::make_pair(ci.begin, ci.begin + ci.n);
    p.cand = accumulate(golden, ci, ref ? &*ref : nullptr, q.worst);
  }
  for (std::size_t i = 0; i < q.noise.size(); ++i) {
    const std::string& path = q.noise[i];
    CandidateInput ni = open_candidate_input(path, golden, range, true);
    // The manifest's run is the file it recorded: the stored checksum here, verified by accumulate() below.
    if (manifest && (ni.in_memory || ni.cand.meta.checksum != manifest->runs[judged[i]].checksum))
      throw_input_error(q.floor, fmt::format("runs[{}].checksum", judged[i]),
                        fmt::format("the checksum of {} when the floor was recorded ({})", path,
                                    manifest->runs[judged[i]].checksum),
                        ni.in_memory ? "full logits" : ni.cand.meta.checksum);
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
  if (manifest && judged.size() < manifest->runs.size()) {
    std::vector<std::string> same;
    for (std::size_t i = 0, j = 0; i < manifest->runs.size(); ++i)
      if (j < judged.size() && judged[j] == i)
        ++j;
      else
        same.push_back(manifest->runs[i].name);
    p.floor_note = words::floor_repeats(manifest->runs.size(), judged.size(), same);
  }
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
  r.floor_manifest = runs.floor_manifest;
  if (!runs.floor_note.empty()) r.notes.push_back(runs.floor_note);
  return r;
}

void write_reports(const JudgeReport& r, const ReportFiles& f) {
  if (!f.json.empty()) write_file_atomic(f.json, report_json(r).dump(2) + "\n");
  if (!f.junit.empty()) write_file_atomic(f.junit, render_junit(r));
  if (!f.html.empty()) write_file_atomic(f.html, render_judge_html(r, f.locate ? &*f.locate : nullptr));
}

}  // namespace kc
