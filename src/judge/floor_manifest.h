// The floor manifest (docs/floor.md): the runs of one floor — equally correct configurations of the
// baseline engine, recorded once by `kerncheck floor` — with their checksums and the measured spread, so
// that `kerncheck test GOLDEN CAND --floor MANIFEST` (and kerncheck.test(floor=…)) judges against them
// without recording the floor again. The runs' paths are relative to the manifest's folder.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "judge/judge.h"

namespace kc {

inline constexpr const char* kFloorManifestFormat = "kerncheck.floor";

struct FloorRun {
  std::string name;        // the plan's configuration
  std::string file;        // as the manifest writes it (relative to its folder, or absolute)
  std::string path;        // resolved by the reader (and set by the writer's caller)
  std::string checksum;    // the file's own checksum ("xxh3:…") when the manifest was written
  std::string tensors;     // XXH3-64 of the file's tensors only: equal for runs with the same bits
  Provenance made_by;      // engine, variant (the precision the judge matches)
  std::string engine_version, hardware;
  nlohmann::ordered_json configuration = nlohmann::ordered_json::object();  // what the plan set
  double kl_mean = NAN;    // against the golden, every position
};

struct FloorPair {
  std::size_t a = 0, b = 0;  // runs (plan order), a < b
  double kl_mean = NAN;      // mean over positions of KL(run a ‖ run b) on the golden's top-k + other
  std::int64_t positions = 0;
};

struct FloorPower {
  std::string split;      // "phase decode", "depth 256"
  double mde_ratio = NAN; // the floor test's minimum detectable increase (×), NaN where the runs do not differ
  bool spread = false;    // the runs differ in this split
};

struct FloorSpread {
  std::vector<std::vector<std::size_t>> identical;  // groups of runs with the same tensors, plan order
  std::vector<FloorPair> pairs;
  std::vector<FloorPower> power;  // the splits that must detect the MDE target: decode, the deepest depth
  double alpha = NAN, power_level = NAN, mde_target = NAN, kl_factor = NAN;
  bool degenerate() const { return identical.size() == 1; }  // every run has the same bits
  std::string sentence;  // one sentence: the spread and what it means (words.h)
};

struct FloorManifest {
  std::string path;                      // the manifest file (reader)
  std::string plan, plan_sha256;         // the plan it was recorded from
  std::string golden_path, golden_checksum, model, corpus;
  std::string engine, variant, served_model;  // served_model: "" for kerncheck's own engine
  std::vector<FloorRun> runs;
  FloorSpread spread;
};

// Reads and validates a manifest (exit 3 "FILE: FIELD: expected …, got …" for anything malformed) and
// resolves the runs' paths. The runs themselves are read (and their checksums checked) by the judge.
FloorManifest read_floor_manifest(const std::string& path);
nlohmann::ordered_json floor_manifest_json(const FloorManifest& m);
void write_floor_manifest(const std::string& path, const FloorManifest& m);

// The runs a candidate is judged against (indices, plan order): one per group of runs with the same bits (the
// first), since a run that repeats another's bits is the same implementation and adds no spread (counting it
// twice would shrink the floor's measured spread); every run when none differ, so that the judge says they do
// not differ.
std::vector<std::size_t> judged_runs(const std::vector<FloorRun>& runs);

// The XXH3-64 of a candidate's tensors ("xxh3:<hex>"): two runs with the same bits have the same value,
// whatever their metadata (command line, configuration).
std::string candidate_tensors_hash(const CandidateArrays& a);

// Measures the spread of `runs` (recorded against `golden`, in plan order): each run's tensors hash and
// KL mean, the groups of identical runs, KL between every pair, and the floor test's MDE in the splits that
// must detect o.mde_target, as the judge computes them for a candidate judged against these runs.
FloorSpread measure_floor_spread(const Golden& golden, const std::string& golden_path, std::vector<FloorRun>& runs,
                                 const JudgeOptions& o);

}  // namespace kc
