// libFuzzer target: a floor manifest (`kerncheck floor`'s floor.json, docs/floor.md) on arbitrary bytes, read
// as `kerncheck test --floor` reads it (kc::read_floor_manifest from a file; the runs' files are not opened
// here), then written back as JSON. Any input must be read or refused with kc::Error, never crash, hang or
// trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_file.h"
#include "judge/floor_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz_input_file("floor-manifest", ".json", data, size);
  if (path.empty()) return 0;
  try {
    kc::FloorManifest m = kc::read_floor_manifest(path);
    (void)kc::floor_manifest_json(m).dump();
  } catch (const kc::Error&) {
  }
  return 0;
}
