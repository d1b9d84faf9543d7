// libFuzzer target: kc::SafetensorsFile::parse on arbitrary bytes, then every tensor it reports.
#include "io/safetensors.h"

#include <cstddef>
#include <cstdint>

#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto st = kc::SafetensorsFile::parse({data, size}, "fuzz.safetensors", nullptr);
    for (const auto& name : st.names()) {
      kc::Tensor t = st.tensor(name);
      KC_ASSERT(t.bytes.size() == kc::storage_bytes(t.dtype, t.numel()), "size mismatch for {}", name);
      KC_ASSERT(t.bytes.data() >= data && t.bytes.data() + t.bytes.size() <= data + size,
                "span outside input");
      unsigned sum = 0;
      for (std::uint8_t b : t.bytes) sum += b;
      volatile unsigned sink = sum;
      (void)sink;
    }
  } catch (const kc::Error&) {
  }
  return 0;
}
