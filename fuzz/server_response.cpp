// libFuzzer target: record --server's reading of a segment's responses (vLLM /v1/completions and SGLang
// /generate, prefill and decode steps: echo checks, row checks, JSON with repeated keys), on arbitrary
// bytes. Byte 0 picks the API and phase (bits 0–5) and SGLang's prefill window (bits 6–7: 0 for the whole
// segment, else that many depths per response); the rest, split at NUL bytes, is first the segment
// ("t_0,t_1,…,t_D;n_prefill;vocab", at most 64 tokens) and then the responses in the order the server sent
// them. Any input must end in a kc::Error or a segment; a crash, hang, leak or sanitizer report is a
// finding. KC_FUZZ_SHOW=1 prints why an input was refused (to check that seeds reach the end).
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "lab/record_server.h"

namespace {

bool parse_int(std::string_view s, std::int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// "5,9,2,7;2;16" → tokens, n_prefill, vocab; false when malformed.
bool parse_segment(const std::string& s, std::vector<std::int32_t>& tokens, std::int64_t& n_prefill,
                   std::int64_t& vocab) {
  const auto a = s.find(';'), b = s.find(';', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) return false;
  if (!parse_int(std::string_view(s).substr(a + 1, b - a - 1), n_prefill) ||
      !parse_int(std::string_view(s).substr(b + 1), vocab) || vocab < 1 || vocab > (1 << 20))
    return false;
  std::size_t at = 0;
  while (at <= a && tokens.size() < 64) {
    std::size_t e = s.find(',', at);
    if (e == std::string::npos || e > a) e = a;
    std::int64_t t = 0;
    if (!parse_int(std::string_view(s).substr(at, e - at), t) || t < 0 || t >= vocab) return false;
    tokens.push_back(static_cast<std::int32_t>(t));
    at = e + 1;
  }
  return tokens.size() >= 2;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const char* const apis[] = {"vllm", "sglang"};
  static const char* const phases[] = {"prefill", "decode", "both"};
  const std::string api = apis[data[0] & 1], phase = phases[((data[0] >> 1) & 31) % 3];
  const int window = data[0] >> 6;  // SGLang prefill depths per response: 0 (all at once), 1, 2, 3
  std::vector<std::string> parts(1);
  for (std::size_t i = 1; i < size; ++i) {
    if (data[i] == 0)
      parts.emplace_back();
    else
      parts.back().push_back(static_cast<char>(data[i]));
  }
  std::vector<std::int32_t> tokens;
  std::int64_t n_prefill = 0, vocab = 0;
  if (!parse_segment(parts[0], tokens, n_prefill, vocab)) return 0;
  parts.erase(parts.begin());
  try {
    kc::read_segment_responses(api, phase, tokens, n_prefill, vocab, parts, window);
    if (std::getenv("KC_FUZZ_SHOW")) std::fprintf(stderr, "accepted\n");
  } catch (const kc::Error& e) {
    if (std::getenv("KC_FUZZ_SHOW")) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
