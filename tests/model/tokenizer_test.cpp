// Tokenizer rules checked on a hand-made tokenizer.json (tests/py/test_tokenizer.py compares with the
// HF tokenizers library on real vocabularies and texts).
#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/gguf.h"

namespace kc {
namespace {

// GPT-2 bytes_to_unicode, written out independently of the library's table.
std::string byte_char(int b) {
  std::vector<int> keep;
  for (int i = '!'; i <= '~'; ++i) keep.push_back(i);
  for (int i = 0xA1; i <= 0xAC; ++i) keep.push_back(i);
  for (int i = 0xAE; i <= 0xFF; ++i) keep.push_back(i);
  int cp = -1, extra = 0;
  for (int i = 0; i < 256; ++i) {
    const bool k = std::find(keep.begin(), keep.end(), i) != keep.end();
    const int c = k ? i : 256 + extra++;
    if (i == b) cp = c;
  }
  std::string s;
  if (cp < 0x80)
    s += static_cast<char>(cp);
  else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Vocabulary: the 256 byte characters (ids 0..255 in byte order), then merged tokens.
Tokenizer tiny(std::vector<std::pair<std::string, std::string>> merges, nlohmann::json pre = nullptr) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  int next = 256;
  nlohmann::json m = nlohmann::json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    m.push_back(a + " " + b);
  }
  nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}},
      {"pre_tokenizer",
       pre.is_null() ? nlohmann::json{{"type", "ByteLevel"}, {"add_prefix_space", false}} : pre},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       {{{"id", next}, {"content", "<|x|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}},
        {{"id", next + 1}, {"content", "<s>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}}}}};
  return Tokenizer::from_json_text(j.dump(), "tiny.json");
}

TEST(Tokenizer, BpeMergesLowestRankFirstAndLeftmostOnTies) {
  const auto t = tiny({{"a", "a"}});
  EXPECT_EQ(t.encode("aaa"), (std::vector<std::int32_t>{256, 'a'}));  // (aa)(a), not (a)(aa)
  EXPECT_EQ(t.encode("aaaa"), (std::vector<std::int32_t>{256, 256}));
  const auto r = tiny({{"b", "c"}, {"a", "b"}});  // rank 0: "bc" wins over "ab" in "abc"
  EXPECT_EQ(r.encode("abc"), (std::vector<std::int32_t>{'a', 256}));
  EXPECT_EQ(r.encode("abd"), (std::vector<std::int32_t>{257, 'd'}));
}

TEST(Tokenizer, ByteLevelPreTokenizerAndSpaces) {
  const std::string G = byte_char(' ');  // "Ġ"
  const auto t = tiny({{G, "a"}});
  // GPT-2 regex: " a" is one piece; "  a" is " " + " a"; a trailing run of spaces stays one piece.
  EXPECT_EQ(t.encode(" a"), (std::vector<std::int32_t>{256}));
  EXPECT_EQ(t.encode("  a"), (std::vector<std::int32_t>{' ', 256}));
  EXPECT_EQ(t.encode("a  "), (std::vector<std::int32_t>{'a', ' ', ' '}));
  EXPECT_EQ(t.decode(t.encode("x  a\t\n é")), "x  a\t\n é");
}

TEST(Tokenizer, AddedTokensAtomicOnlyWhenAsked) {
  const auto t = tiny({});
  const std::int32_t x = 256, s = 257;
  EXPECT_EQ(t.encode("a<|x|>b"), (std::vector<std::int32_t>{'a', x, 'b'}));
  EXPECT_EQ(t.encode("a<|x|>b", false).size(), 7u);  // plain bytes
  // lstrip/rstrip: the whitespace around <s> belongs to the token
  EXPECT_EQ(t.encode("a  <s>  b"), (std::vector<std::int32_t>{'a', s, 'b'}));
  EXPECT_TRUE(t.is_special(x));
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{'a', x, 'b'}, true), "ab");
  EXPECT_EQ(t.vocab_size(), 258u);
}

TEST(Tokenizer, DecodeIsLossyUtf8LikeHF) {
  const auto t = tiny({});
  // byte 0xC3 alone, then 'a': invalid sequence → U+FFFD
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{0xC3, 'a'}),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(t.decode_bytes(std::vector<std::int32_t>{0xC3, 0xA9}), "é");
  EXPECT_EQ(message_of([&] {
              t.decode(std::vector<std::int32_t>{5, 300});
            }),
            "tiny.json: token id #1: expected an id in 0..257, got 300");
}

TEST(Tokenizer, ErrorsNameFileAndField) {
  const auto t = tiny({});
  EXPECT_EQ(message_of([&] { t.encode("ok \xFF bad"); }),
            "text to tokenize: byte 3: expected valid UTF-8, got 0xff");
  EXPECT_EQ(message_of([&] { t.encode("\xED\xA0\x80"); }),  // UTF-8-encoded surrogate
            "text to tokenize: byte 0: expected valid UTF-8, got 0xed");
  EXPECT_EQ(
      message_of([] {
        tiny({{"q", "zz"}});
      }),
      "tiny.json: model.merges[0]: expected a merge of two vocabulary tokens whose concatenation is a token, "
      "got \"q\" + \"zz\"");
  EXPECT_EQ(message_of([] {
              tiny({}, {{"type", "Metaspace"}});
            }),
            "tiny.json: pre_tokenizer.type: expected ByteLevel, Split, Digits or Sequence (byte-level BPE "
            "pre-tokenizers), got \"Metaspace\"");
  EXPECT_EQ(
      message_of([] {
        tiny({}, {{"type", "Digits"}, {"individual_digits", true}});
      }),
      "tiny.json: pre_tokenizer: expected a ByteLevel pre-tokenizer, last in its Sequence (byte-level BPE), "
      "got none");
  EXPECT_EQ(message_of([&] { check_vocab_size(t, 300, "model.gguf"); }),
            "tiny.json: tokenizer vocabulary size: expected 300 (the vocabulary of model.gguf), got 258");
  EXPECT_NO_THROW(check_vocab_size(t, 320, "model.gguf", /*allow_padded_model=*/true));
  EXPECT_NO_THROW(check_vocab_size(t, 258, "model.gguf"));
}

TEST(Tokenizer, SmolLM2IfPresent) {
  const char* env = std::getenv("KC_SMOLLM2_GGUF");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string path = env ? env : home + "/.cache/kerncheck/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (scripts/fetch_smollm2.sh)";
  const auto t = Tokenizer::from_gguf(GgufFile::open(path));
  // Pinned from the HF tokenizers library (tests/py/test_tokenizer.py builds that reference).
  EXPECT_EQ(t.encode("<|im_start|>user\nHi 42"),
            (std::vector<std::int32_t>{1, 4093, 198, 26843, 216, 36, 34}));
  EXPECT_EQ(t.encode("Hello, world!"), (std::vector<std::int32_t>{19556, 28, 905, 17}));
  EXPECT_EQ(t.vocab_size(), 49152u);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_FALSE(t.add_bos());
}

}  // namespace
}  // namespace kc
