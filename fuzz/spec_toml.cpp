// Fuzz the tolerance-spec parser: any bytes must parse or throw kc::Error (a clear message), never crash,
// hang or trip a sanitizer. Parsed entries are fed through route() for their own dtype as well.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "compare/compare.h"
#include "compare/spec.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kc::Spec s = kc::parse_spec(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
    for (const auto& e : s.entries) {
      kc::RouteRequest r;
      r.output_dtype = e.dtype;
      r.spec_method = e.method;
      r.spec_where = e.where;
      r.spec_tol = e.tol;
      try {
        (void)kc::route(r);
      } catch (const kc::Error&) {
      }
    }
  } catch (const kc::Error&) {
  }
  return 0;
}
