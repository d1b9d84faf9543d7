// kerncheck: does a kernel change hurt accuracy, and where?
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/command.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/suggest.h"
#include "core/text_safe.h"

// kerncheck links the pthread build of OpenBLAS, which the engine runs single-threaded (engine_ops.cpp
// init_blas: it parallelises over fixed tiles itself). The library's constructor starts a worker thread that
// spins on sched_yield for ~0.1 s before it sleeps: 0.1 s of a second core per command, which made `kerncheck
// test` use more CPU than wall time with KC_THREADS=1. No command needs those workers, so main stops them.
extern "C" int blas_thread_shutdown_(void);

namespace kc::cli {
std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}
}  // namespace kc::cli

namespace {

void print_help() {
  std::printf(
      "kerncheck — does a kernel change hurt accuracy, and where?\n\n"
      "usage: kerncheck COMMAND [ARGS]   (kerncheck COMMAND --help for its flags)\n\ncommands:\n");
  auto cmds = kc::cli::commands();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& c : cmds) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf(
      "\nexit codes: 0 pass, 1 fail, 2 inconclusive, 3 bad input or usage\n"
      "outputs: an existing output that is one of the inputs is refused; one that is not a regular file (a\n"
      "  device, FIFO) too, unless --write-special (any command, anywhere on the line) writes to it in place\n"
      "environment: KC_THREADS=N limits worker threads (default: all cores)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_help();
    return argc < 2 ? kc::kExitBadInput : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("kerncheck 0.1.0\n");
    return 0;
  }
  blas_thread_shutdown_();
  kc::set_input_guard(true);  // no output may overwrite an input of this command (core/atomic_file.h)
  // --write-special is global (core/atomic_file.h): taken out before the command parses its flags.
  {
    int w = 2;
    for (int r = 2; r < argc; ++r) {
      if (!std::strcmp(argv[r], "--write-special"))
        kc::set_special_outputs_allowed(true);
      else
        argv[w++] = argv[r];
    }
    argc = w;
    argv[argc] = nullptr;
  }
  for (auto& c : kc::cli::commands()) {
    if (c.name != argv[1]) continue;
    std::string prog = std::string("kerncheck ") + argv[1];
    argv[1] = prog.data();
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const kc::Error& e) {
      kc::printf_safe(stderr, "kerncheck %s: error: %s\n", c.name.c_str(), e.what());
      return kc::kExitBadInput;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "kerncheck %s: error: out of memory\n", c.name.c_str());
      return kc::kExitBadInput;
    }
  }
  std::vector<std::string> names;
  for (auto& c : kc::cli::commands()) names.push_back(c.name);
  kc::printf_safe(stderr, "kerncheck: error: unknown command '%s'%s (see kerncheck --help)\n", argv[1],
               kc::did_you_mean(argv[1], names).c_str());
  return kc::kExitBadInput;
}
