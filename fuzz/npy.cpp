// libFuzzer target: kc::parse_npy on arbitrary bytes. The first byte picks the dtype hint (none, or one of
// the DTypes), the rest is the file. A finding is a crash, a sanitizer report, or a broken invariant.
#include "io/npy.h"

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::optional<kc::DType> hint;
  if (data[0] < kc::kDTypeCount) hint = static_cast<kc::DType>(data[0]);
  try {
    kc::Tensor t = kc::parse_npy({data + 1, size - 1}, "fuzz.npy", hint);
    KC_ASSERT(t.bytes.size() == kc::storage_bytes(t.dtype, t.numel()), "size mismatch");
    unsigned sum = 0;  // touch every byte so ASan sees an out-of-bounds span
    for (std::uint8_t b : t.bytes) sum += b;
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const kc::Error&) {
  }
  return 0;
}
