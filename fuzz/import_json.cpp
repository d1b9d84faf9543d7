// Fuzz target: the vLLM and SGLang dump readers (streaming JSON, both as one document and as JSON Lines).
// Any input must end in a kc::Error or a dump; a crash, hang, leak or sanitizer report is a finding.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "golden/engine_logprobs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  for (const char* name : {"fuzz.json", "fuzz.jsonl"}) {
    try {
      kc::parse_vllm_logprobs(bytes, name);
    } catch (const kc::Error&) {
    }
    try {
      kc::parse_sglang_logprobs(bytes, name);
    } catch (const kc::Error&) {
    }
  }
  return 0;
}
