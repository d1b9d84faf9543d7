// Error policy of the library (every layer below the CLI and Python):
// throw kc::Error with a message that names the file, the field and the expected value. The CLI and the
// Python module are the only places that catch it; there it becomes one line on stderr and an exit code
// (kExitBadInput = 3) or a Python exception. Internal invariants use KC_ASSERT (a bug, not bad input).
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kc {

// Process exit codes shared by every command (docs/ci.md).
inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitInconclusive = 2;
inline constexpr int kExitBadInput = 3;

// Bad input or usage: a file, a flag, a field. `what()` is the whole user-facing message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// "FILE: FIELD: expected EXPECTED, got GOT" — the one shape of every input error.
[[noreturn]] void throw_input_error(std::string_view file, std::string_view field, std::string_view expected,
                                    std::string_view got);

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace kc

// A broken invariant is a bug of ours: abort loudly with the context.
#define KC_ASSERT(cond, ...)                                                              \
  do {                                                                                    \
    if (!(cond)) ::kc::assert_fail(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)
