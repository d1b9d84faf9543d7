// libFuzzer target: a record --server checkpoint (OUT.partial/seg-NNNNN.safetensors) on arbitrary bytes, as
// a resumed recording reads it: kc::check_checkpoint (checksum check off, so the fuzzer gets past it), the
// responses it holds (kc::checkpoint_responses), then those responses through the server reader
// (kc::read_segment_responses). Byte 0 picks the checkpoint's segment number, the API and the phase; the
// segment is the checkpoint's metadata "fuzz.segment" ("t_0,…,t_D;n_prefill;vocab", as in
// fuzz/server_response.cpp), absent: 5,9,2,7,7,3 with 3 prefill depths, vocab 16. KC_FUZZ_SHOW=1 prints why
// an input was refused.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "lab/record_model.h"
#include "lab/record_server.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const char* const apis[] = {"vllm", "sglang"};
  static const char* const phases[] = {"prefill", "decode", "both"};
  const std::int32_t segment = data[0] & 1;
  const std::string api = apis[(data[0] >> 1) & 1], phase = phases[(data[0] >> 2) % 3];
  try {
    kc::SafetensorsFile f = kc::SafetensorsFile::parse({data + 1, size - 1}, "fuzz.seg", nullptr);
    kc::check_checkpoint(f, "fuzz-run", segment, false);
    const std::vector<std::string> responses = kc::checkpoint_responses(f);
    std::vector<std::int32_t> tokens = {5, 9, 2, 7, 7, 3};
    std::int64_t n_prefill = 3, vocab = 16;
    if (auto it = f.metadata().find("fuzz.segment"); it != f.metadata().end()) {
      tokens.clear();
      std::size_t a = it->second.find(';'), b = it->second.rfind(';');
      if (a == std::string::npos || a == b) return 0;
      try {
        n_prefill = std::stoll(it->second.substr(a + 1, b - a - 1));
        vocab = std::stoll(it->second.substr(b + 1));
        for (std::size_t at = 0; at < a && tokens.size() < 64;) {
          std::size_t e = std::min(it->second.find(',', at), a);
          tokens.push_back(static_cast<std::int32_t>(std::stol(it->second.substr(at, e - at))));
          at = e + 1;
        }
      } catch (const std::exception&) {
        return 0;
      }
      if (vocab < 1 || vocab > (1 << 20) || tokens.size() < 2) return 0;
      for (auto t : tokens)
        if (t < 0 || t >= vocab) return 0;
    }
    kc::read_segment_responses(api, phase, tokens, n_prefill, vocab, responses);
    if (std::getenv("KC_FUZZ_SHOW")) std::fprintf(stderr, "accepted\n");
  } catch (const kc::Error& e) {
    if (std::getenv("KC_FUZZ_SHOW")) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
