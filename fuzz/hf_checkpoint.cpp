// libFuzzer target: the HF checkpoint reader (kc::HfCheckpoint) and the model loader on top of it
// (kc::load_causal_lm: config.json parsing, tensor shape checks, widening to f32), on a checkpoint folder
// made from the input bytes. A finding is a crash, a hang, a sanitizer report, or a broken invariant.
//
// Input framing (seeds: fuzz/corpus/hf_checkpoint/, made by make_seeds.py there):
//   byte 0        mode: bit 0 set = sharded (index json + one shard), else one model.safetensors
//   u16 LE n      then n bytes of config.json
//   sharded only: u16 LE m, then m bytes of model.safetensors.index.json
//   the rest      the safetensors bytes (model.safetensors, or the shard model-00001-of-00001.safetensors)
#include "model/hf_checkpoint.h"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "model/causal_lm.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::uint8_t* d, std::size_t n) {
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) std::abort();
  if (n && std::fwrite(d, 1, n, f) != n) std::abort();
  std::fclose(f);
}

const fs::path& dir() {
  static const fs::path d = [] {
    fs::path p = fs::temp_directory_path() / ("kc_fuzz_hf_" + std::to_string(::getpid()));
    fs::create_directories(p);
    return p;
  }();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool sharded = data[0] & 1;
  std::size_t at = 1;
  auto take_u16 = [&](std::size_t& n) {
    if (at + 2 > size) return false;
    n = data[at] | (static_cast<std::size_t>(data[at + 1]) << 8);
    at += 2;
    return at + n <= size;
  };
  std::size_t n_config = 0, n_index = 0;
  if (!take_u16(n_config)) return 0;
  const std::uint8_t* config = data + at;
  at += n_config;
  const std::uint8_t* index = nullptr;
  if (sharded) {
    if (!take_u16(n_index)) return 0;
    index = data + at;
    at += n_index;
  }
  const fs::path& d = dir();
  std::error_code ec;
  for (const char* f :
       {"model.safetensors", "model.safetensors.index.json", "model-00001-of-00001.safetensors"})
    fs::remove(d / f, ec);
  write(d / "config.json", config, n_config);
  if (sharded) {
    write(d / "model.safetensors.index.json", index, n_index);
    write(d / "model-00001-of-00001.safetensors", data + at, size - at);
  } else {
    write(d / "model.safetensors", data + at, size - at);
  }
  std::size_t sink = 0;
  try {
    const auto ck = kc::HfCheckpoint::open(d.string());
    for (const auto& name : ck.tensor_names()) {
      const auto shape = ck.shape(name);
      const kc::Tensor t = ck.tensor(name);
      if (!t.bytes.empty()) sink += t.bytes.front() + t.bytes.back();  // ASan sees an out-of-range span
      if (t.numel() <= (1u << 16)) {
        try {
          const auto v = ck.tensor_f32(name, shape);
          KC_ASSERT(v.size() == t.numel(), "tensor_f32 size");
        } catch (const kc::Error&) {  // a dtype other than F32/BF16/F16
        }
      }
    }
    for (const char* k : {"hidden_size", "num_hidden_layers", "vocab_size", "text_config.vocab_size"})
      if (auto v = ck.find_int(k)) sink += static_cast<std::size_t>(*v);
  } catch (const kc::Error&) {
  }
  try {
    const auto m = kc::load_causal_lm(d.string());
    sink += m->vocab_size() + m->n_layers();
  } catch (const kc::Error&) {
  }
  volatile std::size_t s = sink;
  (void)s;
  return 0;
}
