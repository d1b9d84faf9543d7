#include "model/backend.h"

#include "core/error.h"

namespace kc {

namespace {
// The registry: a device backend adds its table here (and its own backend_<name>.cpp).
std::span<const EngineBackend* const> backends() {
  static const EngineBackend* const all[] = {&host_backend()};
  return all;
}
}  // namespace

const EngineBackend& engine_backend(std::string_view name) {
  for (const EngineBackend* b : backends())
    if (name == b->name) return *b;
  fail("engine backend: expected one of {}, got '{}'", engine_backend_names(), name);
}

std::string engine_backend_names() {
  std::string s;
  for (const EngineBackend* b : backends()) s += (s.empty() ? "" : ", ") + std::string(b->name);
  return s;
}

}  // namespace kc
