// libFuzzer target: kc::GgufFile::parse on arbitrary bytes, then everything a loader would touch:
// metadata getters, tensor data spans, dequantization of small tensors, the tokenizer from the metadata.
// A finding is a crash, a hang, a sanitizer report, or a broken invariant.
#include "model/gguf.h"

#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto g = kc::GgufFile::parse({data, size}, "fuzz.gguf");
    std::size_t sink = 0;
    for (const auto& [key, v] : g.metadata()) sink += kc::gguf_value_str(v).size() + key.size();
    for (const auto& t : g.tensors()) {
      const auto bytes = g.tensor_data(t);
      KC_ASSERT(bytes.size() == t.n_bytes, "span size");
      if (!bytes.empty()) sink += bytes.front() + bytes.back();  // ASan sees an out-of-range span
      if (kc::ggml_type_info(t.type).dequantizable && t.n_elements <= (1u << 20)) {
        const auto v = g.dequantize(t);
        KC_ASSERT(v.size() == t.n_elements, "dequantized size");
      }
    }
    try {
      const auto tok = kc::Tokenizer::from_gguf(g);
      const auto ids = tok.encode("Hello <|im_start|> 123 日本 🙂\n\n  x");
      sink += tok.decode(ids).size();
    } catch (const kc::Error&) {
    }
    volatile std::size_t s = sink;
    (void)s;
  } catch (const kc::Error&) {
  }
  return 0;
}
