// libFuzzer target: the shard reader (kc::parse_partial, `kerncheck merge`'s input) on arbitrary bytes,
// with the checksum check off so the fuzzer reaches the JSON accumulators and KL tensors behind it. A shard
// that parses is merged with itself and judged, which reads every count and value the verdict uses.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "judge/judge.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kc::Partial p = kc::parse_partial({data, size}, "fuzz.part", false);
    if (p.golden.n > (1 << 16)) return 0;  // keep each input fast
    kc::Partial m = kc::merge_partials({p, p});
    kc::JudgeReport r = kc::judge(m.golden, m.golden_path, m.cand, m.candidate_path, m.noise, m.noise_paths,
                                  nullptr, kc::JudgeOptions{});
    (void)kc::render_text(r);
  } catch (const kc::Error&) {
  }
  return 0;
}
