// libFuzzer target: the golden and candidate readers (kc::parse_golden / parse_candidate) on arbitrary
// bytes, with the checksum check off so the fuzzer gets past it. A golden that parses is then judged
// against itself (its own log-probs as the candidate), which walks every array the judge reads.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "golden/golden.h"
#include "judge/judge.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kc::Golden g = kc::parse_golden({data, size}, "fuzz.golden", false);
    if (g.meta.n > 4096) return 0;  // keep each input fast
    kc::CandidateInput ci;
    ci.path = "self";
    ci.buffers.k = g.meta.k;
    const std::size_t k = g.meta.k;
    for (std::int64_t i = 0; i < g.meta.n; ++i)
      ci.buffers.push(g.a.top_logprobs.subspan(i * k, k), g.a.other_logprob[i], g.a.top_ids[i * k],
                      g.a.top_logprobs[i * k], g.a.token_logprob[i], 0);
    ci.in_memory = true;
    ci.n = g.meta.n;
    kc::JudgeAccumulator acc = kc::accumulate(g, ci, nullptr);
    kc::JudgeReport r = kc::judge(g.meta, "fuzz", acc, "self", {}, {}, nullptr, kc::JudgeOptions{});
    (void)kc::render_text(r);
  } catch (const kc::Error&) {
  }
  try {
    kc::Candidate c = kc::parse_candidate({data, size}, "fuzz.candidate", false);
    (void)c;
  } catch (const kc::Error&) {
  }
  return 0;
}
