// libFuzzer target: the record checkpoint reader (OUT.partial/seg-NNNNN.safetensors: kc::check_checkpoint,
// golden_checkpoint_rows / candidate_checkpoint_rows) on arbitrary bytes, checksum check off. The first
// two bytes pick the run key's segment and the row count n (k = 4) so both the accept and refuse paths of
// the shape checks are reached; a checkpoint that is accepted must hold exactly n rows of k.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "lab/record_model.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::int32_t segment = data[0] % 4;
  const std::size_t n = 1 + data[1] % 64, k = 4;
  try {
    kc::SafetensorsFile f = kc::SafetensorsFile::parse({data + 2, size - 2}, "fuzz.seg", nullptr);
    kc::check_checkpoint(f, "fuzz-run", segment, false);
    kc::GoldenBuffers g;
    g.k = k;
    if (kc::golden_checkpoint_rows(f, n, k, g) && (g.size() != n || g.top_ids.size() != n * k)) std::abort();
    kc::CandidateBuffers c;
    c.k = k;
    if (kc::candidate_checkpoint_rows(f, n, k, c) && (c.size() != n || c.logprobs_at_ref.size() != n * k))
      std::abort();
  } catch (const kc::Error&) {
  }
  return 0;
}
