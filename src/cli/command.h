// Subcommands register themselves here; main.cpp dispatches `kerncheck NAME ARGS…`.
// Each command parses its own flags with CLI11 (declared once, with default and help text) and returns
// an exit code. kc::Error escaping a command becomes "kerncheck NAME: message" and exit 3.
#pragma once
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/suggest.h"
#include "core/text_safe.h"

namespace kc::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `kerncheck --help`
  std::function<int(int argc, char** argv)> run;  // argv[0] is "kerncheck NAME"
};

std::vector<Command>& commands();

struct Registrar {
  explicit Registrar(Command c) { commands().push_back(std::move(c)); }
};

// After a parse error: "did you mean" for each unknown --flag on the line (core/suggest.h).
inline void suggest_flags(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> known;
  for (const CLI::Option* o : app.get_options())
    for (const auto& n : o->get_lnames()) known.push_back("--" + n);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    a = a.substr(0, a.find('='));
    if (a.size() <= 2 || a.rfind("--", 0) != 0 || std::find(known.begin(), known.end(), a) != known.end()) continue;
    const std::string hint = did_you_mean(a, known);
    if (!hint.empty()) printf_safe(stderr, "%s: unknown flag %s%s\n", argv[0], a.c_str(), hint.c_str());
  }
}

// Runs a CLI11 app's parse inside a command: --help prints and exits 0, a parse error prints the
// message and usage hint and yields exit 3. Returns -1 when parsing succeeded and the command should go on.
inline int parse_or_exit(CLI::App& app, int argc, char** argv) {
  // CLI11's messages quote the command line ("File does not exist: NAME"): printed terminal-safe.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return terminal_safe(CLI::FailureMessage::simple(a, e), true);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e) == 0 ? 0 : 3;
    if (rc != 0) suggest_flags(app, argc, argv);  // also when a check failed first (a value the typo left)
    return rc;
  }
  return -1;
}

}  // namespace kc::cli
