// libFuzzer target: the text parsers behind --shape and --dtype. A shape that parses must print and parse
// back to itself (shape_str is what error messages and reports show).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "io/tensor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kc::parse_dtype(text);
  try {
    kc::Tensor t;
    t.shape = kc::parse_shape(text, "fuzz");
    const std::string printed = t.shape_str();
    KC_ASSERT(kc::parse_shape(printed, "fuzz") == t.shape, "shape {} does not parse back", printed);
    (void)t.numel();
  } catch (const kc::Error&) {
  }
  return 0;
}
