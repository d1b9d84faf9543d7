// Test helper for tests/py/test_tokenizer.py: kc::Tokenizer from a GGUF or a tokenizer.json.
//   kc_tokenize SRC --info                         JSON: vocab_size, bos, eos, pad, add_bos, pre
//   kc_tokenize SRC --encode IN.json [--no-special]  IN: JSON list of strings → JSON list of id lists
//   kc_tokenize SRC --decode IN.json [--skip-special] IN: JSON list of id lists → JSON list of strings
//   kc_tokenize SRC --bench TEXT_FILE              encodes the file: tokens, seconds, tokens/s (JSON)
//   kc_tokenize SRC --check-vocab N                check_vocab_size(tok, N, "model")
// SRC is a .gguf (detected by its magic) or a tokenizer.json. kc::Error → message on stderr, exit 3.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) kc::fail("{}: cannot open", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

kc::Tokenizer load(const std::string& src) {
  char magic[4] = {};
  std::ifstream(src, std::ios::binary).read(magic, 4);
  if (std::memcmp(magic, "GGUF", 4) == 0) return kc::Tokenizer::from_gguf(kc::GgufFile::open(src));
  return kc::Tokenizer::from_tokenizer_json(src);
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: kc_tokenize SRC --info|--encode IN|--decode IN|--bench FILE|--check-vocab N\n");
    return 2;
  }
  const kc::Tokenizer tok = load(argv[1]);
  const std::string mode = argv[2];
  const bool flag = argc > 4;  // --no-special / --skip-special
  using json = nlohmann::json;
  if (mode == "--info") {
    json j = {{"vocab_size", tok.vocab_size()},
              {"bos", tok.bos_id()},
              {"eos", tok.eos_id()},
              {"pad", tok.pad_id()},
              {"add_bos", tok.add_bos()},
              {"pre", tok.pre_name()}};
    std::printf("%s\n", j.dump().c_str());
  } else if (mode == "--encode" && argc >= 4) {
    const json in = json::parse(slurp(argv[3]));
    json out = json::array();
    for (const auto& s : in) out.push_back(tok.encode(s.get<std::string>(), !flag));
    std::printf("%s\n", out.dump().c_str());
  } else if (mode == "--decode" && argc >= 4) {
    const json in = json::parse(slurp(argv[3]));
    json out = json::array();
    for (const auto& ids : in) out.push_back(tok.decode(ids.get<std::vector<std::int32_t>>(), flag));
    std::printf("%s\n", out.dump().c_str());
  } else if (mode == "--bench" && argc >= 4) {
    const std::string text = slurp(argv[3]);
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json j = {
        {"bytes", text.size()}, {"tokens", ids.size()}, {"seconds", s}, {"tokens_per_s", ids.size() / s}};
    std::printf("%s\n", j.dump().c_str());
  } else if (mode == "--check-vocab" && argc >= 4) {
    kc::check_vocab_size(tok, std::stoull(argv[3]), "model");
    std::printf("ok\n");
  } else {
    std::fprintf(stderr, "kc_tokenize: unknown mode %s\n", mode.c_str());
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
}
