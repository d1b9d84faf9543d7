// kc_llama_logits MODEL OUT.npy [options] TOKEN… — runs kerncheck's f32 Llama-family engine and writes the
// logits as float32 .npy [T, V] (tests and benches drive it).
//   --decode-from P   prefill tokens [0, P), then decode the rest one token at a time (rows P… from decode)
//   --adjacent-pairs  GGUF llama: keep the file's Q/K row order and rotate adjacent pairs
//   --last            write only the last row [1, V] (long prompts: never holds [T, V])
//   --tokens FILE     read the token ids (whitespace-separated) from FILE instead of the command line
// Prints "tokens T prefill_s X decode_s Y" on stdout. Bad input: message on stderr, exit 3.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/npy.h"
#include "model/llama.h"

namespace {

std::int32_t parse_token(const std::string& s) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || v < 0 || v > INT32_MAX)
    kc::throw_input_error("command line", "token", "an integer id", s);
  return static_cast<std::int32_t>(v);
}

int run(int argc, char** argv) {
  if (argc < 3)
    kc::fail(
        "usage: kc_llama_logits MODEL OUT.npy [--decode-from P] [--adjacent-pairs] [--last] "
        "[--tokens FILE] TOKEN…");
  const std::string model_path = argv[1], out_path = argv[2];
  std::size_t decode_from = SIZE_MAX;
  bool last_only = false;
  kc::LlamaLoadOptions opt;
  std::vector<std::int32_t> tokens;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--decode-from" && i + 1 < argc) {
      decode_from = static_cast<std::size_t>(parse_token(argv[++i]));
    } else if (a == "--adjacent-pairs") {
      opt.gguf_adjacent_pairs = true;
    } else if (a == "--last") {
      last_only = true;
    } else if (a == "--tokens" && i + 1 < argc) {
      std::ifstream in(argv[++i]);
      if (!in) kc::throw_input_error(argv[i], "file", "a readable token file", "cannot open");
      std::string s;
      while (in >> s) tokens.push_back(parse_token(s));
    } else {
      tokens.push_back(parse_token(a));
    }
  }
  if (tokens.empty()) kc::throw_input_error("command line", "tokens", "at least one token id", "none");

  const kc::LlamaModel model = kc::LlamaModel::load(model_path, opt);
  const std::size_t T = tokens.size(), V = model.config().n_vocab, P = std::min(decode_from, T);
  kc::LlamaState state(model.config());
  std::vector<float> logits(last_only ? V : T * V);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  model.prefill(state, std::span(tokens).first(P),
                [&](std::size_t pos0, std::size_t rows, std::span<const float> l) {
                  if (!last_only)
                    std::copy(l.begin(), l.end(), logits.begin() + pos0 * V);
                  else if (pos0 + rows == T)
                    std::copy(l.end() - V, l.end(), logits.begin());
                });
  const auto t1 = clock::now();
  for (std::size_t t = P; t < T; ++t) {
    const std::vector<float> row = model.decode(state, tokens[t]);
    if (!last_only || t + 1 == T) std::copy(row.begin(), row.end(), logits.begin() + (last_only ? 0 : t * V));
  }
  const auto t2 = clock::now();
  std::vector<std::uint8_t> bytes(logits.size() * sizeof(float));
  std::memcpy(bytes.data(), logits.data(), bytes.size());
  const std::int64_t rows = last_only ? 1 : static_cast<std::int64_t>(T);
  kc::write_npy(out_path, kc::make_tensor(kc::DType::float32, {rows, static_cast<std::int64_t>(V)},
                                          std::move(bytes), "<llama logits>"));
  std::printf("tokens %zu prefill_s %.6f decode_s %.6f\n", T, std::chrono::duration<double>(t1 - t0).count(),
              std::chrono::duration<double>(t2 - t1).count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_llama_logits: error: %s\n", e.what());
    return kc::kExitBadInput;
  }
}
