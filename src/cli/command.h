// Subcommands register themselves here; main.cpp dispatches `kerncheck NAME ARGS…`.
// Each command parses its own flags with CLI11 (declared once, with default and help text) and returns
// an exit code. kc::Error escaping a command becomes "kerncheck NAME: message" and exit 3.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

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

// Runs a CLI11 app's parse inside a command: --help prints and exits 0, a parse error prints the
// message and usage hint and yields exit 3. Returns -1 when parsing succeeded and the command should go on.
inline int parse_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 3;
  }
  return -1;
}

}  // namespace kc::cli
