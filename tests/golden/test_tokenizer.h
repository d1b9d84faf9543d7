// A small byte-level BPE tokenizer for eval tests (corpus_test, generate_test): GPT-2's 256 byte tokens, a
// few merges, and the ChatML / EOS added tokens, as tokenizer.json text parsed by kc::Tokenizer.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/tokenizer.h"

namespace kc {

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 + n.
inline std::vector<std::string> gpt2_byte_alphabet() {
  std::vector<int> cp(256, -1);
  int n = 0;
  for (int b = 0; b < 256; ++b)
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) cp[b] = b;
  for (int b = 0; b < 256; ++b)
    if (cp[b] < 0) cp[b] = 256 + n++;
  std::vector<std::string> out(256);
  for (int b = 0; b < 256; ++b) {
    int c = cp[b];
    std::string s;
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
    out[b] = s;
  }
  return out;
}

// ids 0…255 the bytes (id = byte), then the merges, then <|endoftext|>, <|im_start|>, <|im_end|> (special
// added tokens): 512 ids.
inline std::string test_tokenizer_json() {
  using json = nlohmann::json;
  const auto a = gpt2_byte_alphabet();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[a[b]] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"Ġ", "a"}, {"Ġ", "w"}, {"e", "r"}, {"i", "n"}, {"Ġ", "m"}};
  json m = json::array();
  int next = 256;
  for (auto& [l, r] : merges) {
    if (!vocab.contains(l + r)) vocab[l + r] = next++;
    m.push_back(l + " " + r);
  }
  // Letter pairs fill the vocabulary up to 509 ids, so with the 3 added tokens it covers exactly the 512
  // embedding rows of the tiny fixtures (every id a model can generate decodes).
  for (char l = 'a'; l <= 'z' && next < 509; ++l)
    for (char r = 'a'; r <= 'z' && next < 509; ++r) {
      const std::string t{l, r};
      if (vocab.contains(t)) continue;
      vocab[t] = next++;
      m.push_back(std::string(1, l) + " " + std::string(1, r));
    }
  json added = json::array();
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"})
    added.push_back({{"id", next++},
                     {"content", t},
                     {"special", true},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"single_word", false}});
  json tj = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"unk_token", nullptr}, {"fuse_unk", false}, {"vocab", vocab}, {"merges", m}}}};
  return tj.dump();
}

inline Tokenizer test_tokenizer() {
  return Tokenizer::from_json_text(test_tokenizer_json(), "test tokenizer.json");
}

}  // namespace kc
