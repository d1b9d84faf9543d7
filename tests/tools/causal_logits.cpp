// kc_causal_logits MODEL OUT.npy [options] TOKEN… — runs any reference-engine model through kc::CausalLM
// (load_causal_lm: Llama family or the Gated DeltaNet hybrids) and writes the logits as float32 .npy [T, V].
//   --decode-from P     prefill tokens [0, P), then decode the rest one token at a time
//   --prefill-block B   prefill in separate prefill() calls of B tokens (the state is stored between them)
//   --gdn-fla           KernelOptions::gdn_fla_casts (FLA-style bf16 casts in the GDN chunked prefill)
//   --state-out F.npy   hybrids: capture every "gdn.state" event of the last layer that reports one and write
//                       the last one [Hv·dk, dv] (tests compare states)
//   --tokens FILE       read whitespace-separated token ids from FILE
//   --warmup N          first prefill the first N tokens on a throwaway state, untimed, logits computed and
//                       dropped (benchmarks: the timed run then finds warm buffers, as a model in use does)
// Prints "tokens T prefill_s X decode_s Y". Bad input: message on stderr, exit 3.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/npy.h"
#include "model/causal_lm.h"

namespace {

std::int32_t parse_int(const std::string& s) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || v < 0 || v > INT32_MAX)
    kc::throw_input_error("command line", "integer", "an integer", s);
  return static_cast<std::int32_t>(v);
}

void write_f32(const std::string& path, const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<std::uint8_t> bytes(v.size() * sizeof(float));
  std::memcpy(bytes.data(), v.data(), bytes.size());
  kc::write_npy(path, kc::make_tensor(kc::DType::float32, {rows, cols}, std::move(bytes), "<causal logits>"));
}

int run(int argc, char** argv) {
  if (argc < 3)
    kc::fail(
        "usage: kc_causal_logits MODEL OUT.npy [--decode-from P] [--prefill-block B] [--gdn-fla] "
        "[--state-out F.npy] [--tokens FILE] [--warmup N] TOKEN…");
  const std::string model_path = argv[1], out_path = argv[2];
  std::size_t decode_from = SIZE_MAX, block = SIZE_MAX, warmup = 0;
  std::string state_out;
  kc::engine::KernelOptions ko;
  std::vector<std::int32_t> tokens;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--decode-from" && i + 1 < argc) {
      decode_from = static_cast<std::size_t>(parse_int(argv[++i]));
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = static_cast<std::size_t>(parse_int(argv[++i]));
    } else if (a == "--prefill-block" && i + 1 < argc) {
      block = static_cast<std::size_t>(parse_int(argv[++i]));
      if (block == 0) kc::throw_input_error("command line", "--prefill-block", "a positive integer", "0");
    } else if (a == "--gdn-fla") {
      ko.gdn_fla_casts = true;
    } else if (a == "--state-out" && i + 1 < argc) {
      state_out = argv[++i];
    } else if (a == "--tokens" && i + 1 < argc) {
      std::ifstream in(argv[++i]);
      if (!in) kc::throw_input_error(argv[i], "file", "a readable token file", "cannot open");
      std::string s;
      while (in >> s) tokens.push_back(parse_int(s));
    } else {
      tokens.push_back(parse_int(a));
    }
  }
  if (tokens.empty()) kc::throw_input_error("command line", "tokens", "at least one token id", "none");
  auto model = kc::load_causal_lm(model_path);
  model->set_kernel_options(ko);
  if (warmup > 0) {  // before the hook: the warm-up reports nothing
    auto w = model->new_state();
    model->prefill(*w, std::span(tokens).first(std::min(warmup, tokens.size())),
                   [](std::size_t, std::size_t, std::span<const float>) {});
  }
  std::vector<float> state;
  std::size_t state_rows = 0, state_cols = 0;
  int state_layer = -1;
  if (!state_out.empty())
    model->set_hook([&](const kc::engine::TensorEvent& e) {
      if (e.name != "gdn.state" || e.layer < state_layer) return;
      state_layer = e.layer;
      state.assign(e.data.begin(), e.data.end());
      state_rows = e.rows, state_cols = e.cols;
    });
  const std::size_t T = tokens.size(), V = model->vocab_size(), P = std::min(decode_from, T);
  auto st = model->new_state();
  std::vector<float> logits(T * V);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  for (std::size_t b = 0; b < P; b += std::min(block, P)) {
    const std::size_t n = std::min(block, P - b);
    model->prefill(*st, std::span(tokens).subspan(b, n),
                   [&](std::size_t pos0, std::size_t, std::span<const float> l) {
                     std::copy(l.begin(), l.end(), logits.begin() + pos0 * V);
                   });
  }
  const auto t1 = clock::now();
  for (std::size_t t = P; t < T; ++t) {
    const std::vector<float> row = model->decode(*st, tokens[t]);
    std::copy(row.begin(), row.end(), logits.begin() + t * V);
  }
  const auto t2 = clock::now();
  write_f32(out_path, logits, static_cast<std::int64_t>(T), static_cast<std::int64_t>(V));
  if (!state_out.empty()) {
    if (state.empty())
      kc::throw_input_error(model_path, "gdn.state", "a hybrid model reporting its state", "none");
    write_f32(state_out, state, static_cast<std::int64_t>(state_rows), static_cast<std::int64_t>(state_cols));
  }
  std::printf("tokens %zu prefill_s %.6f decode_s %.6f\n", T, std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_causal_logits: error: %s\n", e.what());
    return kc::kExitBadInput;
  }
}
