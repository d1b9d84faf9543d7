// libFuzzer target: a floor plan (TOML, docs/floor.md) on arbitrary bytes, read as `kerncheck floor` reads
// it (kc::read_floor_plan from a file, with a --set override), then every template expanded for one start
// (kc::expand_runtime). Any input must be read or refused with kc::Error, never crash, hang or trip a
// sanitizer. HOME is set so {env:HOME} resolves.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "lab/floor_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    setenv("HOME", "/nonexistent-home", 0);
    return "/tmp/kc-fuzz-floor-plan-" + std::to_string(getpid()) + ".toml";
  }();
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
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
