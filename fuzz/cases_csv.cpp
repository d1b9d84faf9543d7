// Fuzz the case-file reader: RFC 4180 records, header and column checks, op-mode rows (registry lookups,
// shapes, distributions, params). Any input must end in cases or a kc::Error, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "opmode/cases.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    kc::parse_csv(text, "fuzz.csv");
  } catch (const kc::Error&) {
  }
  try {
    auto cases = kc::parse_cases_csv(text, "fuzz.csv", "base");
    for (auto& c : cases) (void)c.where();
  } catch (const kc::Error&) {
  }
  return 0;
}
