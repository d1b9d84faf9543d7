// kerncheck floor PLAN --golden G -o DIR: record a floor plan's configurations and write the floor manifest
// (lab/floor.h, docs/floor.md).
#include <string>

#include "cli/command.h"
#include "cli/judge_flags.h"
#include "core/error.h"
#include "lab/floor.h"

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Record the noise floor once: one run per configuration of a floor plan (a server started, recorded and "
      "stopped for each, one at a time; or kerncheck's own engine with each configuration's variant), then "
      "write DIR/floor.json, the manifest that `kerncheck test --floor` reads, with the floor's measured "
      "spread. Rerunning keeps the finished configurations."};
  app.name(argv[0]);
  kc::FloorOptions o;
  std::vector<std::string> sets;
  app.add_option("plan", o.plan, "the floor plan (TOML, docs/floor.md)")->required()->check(CLI::ExistingFile);
  app.add_option("--golden", o.golden, "the golden the runs are recorded against")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("-o,--out-dir", o.out_dir, "the floor's folder: one file per configuration, logs/, floor.json")
      ->required();
  app.add_option("--set", sets, "NAME=VALUE: a placeholder of the plan's [placeholders] table (repeatable)");
  kc::cli::add_judge_options(app, o.judge);
  if (int rc = kc::cli::parse_or_exit(app, argc, argv); rc >= 0) return rc;
  kc::check_judge_options(o.judge);
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0) kc::fail("--set: expected NAME=VALUE, got \"{}\"", s);
    o.set[s.substr(0, eq)] = s.substr(eq + 1);
  }
  o.command_line = "kerncheck floor";
  for (int i = 1; i < argc; ++i) o.command_line += std::string(" ") + argv[i];
  kc::run_floor(o);
  return 0;
}

kc::cli::Registrar reg({"floor", "record a floor plan's equally correct configurations once; write the manifest",
                        run});

}  // namespace
