// Fuzz target: llama.cpp's KLD base file reader and its golden import (header, sizes, tokens, every
// record's scale / min_log_prob, top-k and tail sums). Inputs are small, so the header is usually
// patched to fit: the first bytes choose n_ctx, n_vocab and n_chunk, the rest is the file body.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "golden/importers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // As given: exercises the header checks.
  try {
    kc::LlamaKldFile::parse({data, size}, "fuzz.kld");
  } catch (const kc::Error&) {
  }
  if (size < 3) return 0;
  // A well-formed header sized to the remaining bytes, so the records are reached.
  std::uint32_t n_ctx = 3 + data[0] % 14;
  std::int32_t n_vocab = 2 + data[1] % 40, n_chunk = 1 + data[2] % 3;
  std::uint64_t want = kc::llamacpp_kld_file_bytes(n_ctx, n_vocab, n_chunk);
  std::vector<std::uint8_t> file(want, 0);
  std::memcpy(file.data(), "_logits_", 8);
  std::memcpy(file.data() + 8, &n_ctx, 4);
  std::memcpy(file.data() + 12, &n_vocab, 4);
  std::memcpy(file.data() + 16, &n_chunk, 4);
  std::memcpy(file.data() + 20, data + 3, std::min<std::size_t>(size - 3, want - 20));
  try {
    kc::LlamaKldFile f = kc::LlamaKldFile::parse(file, "fuzz.kld");
    kc::GoldenMeta meta;
    kc::GoldenBuffers golden;
    kc::golden_from_llamacpp(f, 1 + data[0] % n_vocab, "prose", meta, golden);
  } catch (const kc::Error&) {
  }
  return 0;
}
