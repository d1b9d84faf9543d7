// libFuzzer target: kc::Tokenizer::from_json_text on arbitrary bytes; when it loads, encode and decode
// a fixed text and the input itself (as text, when it is valid UTF-8).
// A finding is a crash, a hang, a sanitizer report, or a broken invariant.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = kc::Tokenizer::from_json_text(text, "fuzz.json");
    for (std::string_view s :
         {std::string_view("Hello <|endoftext|> 123 日本 🙂\n\n  x"), text.substr(0, 256)}) {
      try {
        const auto ids = tok.encode(s);
        for (auto id : ids)
          KC_ASSERT(id >= 0 && static_cast<std::size_t>(id) < tok.vocab_size(), "id {}", id);
        volatile std::size_t n = tok.decode(ids).size();
        (void)n;
      } catch (const kc::Error&) {
      }
    }
  } catch (const kc::Error&) {
  }
  return 0;
}
