// `kerncheck floor PLAN --golden G -o DIR` (docs/floor.md): records one run per configuration of a floor
// plan (lab/floor_plan.h) against the golden — a server started, awaited, recorded and stopped for each, one
// at a time, its log kept in DIR/logs/; or kerncheck's own engine with the configuration's variant — and
// writes DIR/floor.json, the floor manifest (judge/floor_manifest.h) with the measured spread. Resumable: a
// configuration whose file in DIR is intact and was recorded by the same configuration against the same
// golden is kept; an interrupted server recording resumes from its checkpoints (with a fixed port).
#pragma once
#include <map>
#include <string>

#include "judge/floor_manifest.h"
#include "judge/judge.h"

namespace kc {

struct FloorOptions {
  std::string plan, golden, out_dir, command_line;
  std::map<std::string, std::string> set;  // placeholders (--set NAME=VALUE)
  JudgeOptions judge;                      // what the spread's MDE is computed for (alpha, power, target)
};

// Returns the manifest it wrote to DIR/floor.json.
FloorManifest run_floor(const FloorOptions& o);

// "Intel(R) Xeon(R) …, 2 CPUs, AVX-512, AMX": what a run's numbers may depend on (from /proc/cpuinfo).
std::string machine_description();

}  // namespace kc
