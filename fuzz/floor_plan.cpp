// libFuzzer target: a floor plan (TOML, docs/floor.md) on arbitrary bytes, read as `kerncheck floor` reads
// it (kc::read_floor_plan from a file, with a --set override), then every template expanded for one start
// (kc::expand_runtime). Any input must be read or refused with kc::Error, never crash, hang or trip a
// sanitizer. HOME is set so {env:HOME} resolves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "fuzz_file.h"
#include "lab/floor_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int home = setenv("HOME", "/nonexistent-home", 0);  // {env:HOME} resolves
  (void)home;
  const std::string path = fuzz_input_file("floor-plan", ".toml", data, size);
  if (path.empty()) return 0;
  try {
    kc::FloorPlan p = kc::read_floor_plan(path, {{"model", "m.gguf"}}, "/tmp/kc-fuzz-floor-out");
    for (const auto& c : p.command) (void)kc::expand_runtime(c, 8000, "base");
    for (const auto& [k, v] : p.env) (void)kc::expand_runtime(v, 8000, "base");
    (void)kc::expand_runtime(p.url, 8000, "base");
    (void)kc::expand_runtime(p.health, 8000, "base");
  } catch (const kc::Error&) {
  }
  return 0;
}
