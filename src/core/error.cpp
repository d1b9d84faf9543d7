#include "core/error.h"

#include <cstdio>
#include <cstdlib>

#include "core/text_safe.h"

namespace kc {

void throw_input_error(std::string_view file, std::string_view field, std::string_view expected,
                       std::string_view got) {
  std::string msg = std::string(file);
  if (!field.empty()) msg += fmt::format(": {}", field);
  msg += fmt::format(": expected {}", expected);
  if (!got.empty()) msg += fmt::format(", got {}", got);
  throw Error(msg);
}

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  printf_safe(stderr, "kerncheck internal error at %s:%d: %s (%s)\n", file, line, msg.c_str(), expr);
  std::abort();
}

}  // namespace kc
