// Corpus building (docs/corpus.md): determinism, the segment layout (windows, offsets, text), answer
// segments, option and file validation. A small byte-level BPE tokenizer.json is made here, so the test
// needs no model files.
#include "golden/corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors.h"
#include "test_tokenizer.h"

namespace kc {
namespace {

std::string tmp(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("kc_corpus_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::vector<SourceDoc> docs() {
  std::string prose, code;
  for (int i = 0; i < 40; ++i)
    prose +=
        "Verse " + std::to_string(i) + ": and the evening and the morning were the day; the waters moved.\n";
  for (int i = 0; i < 40; ++i)
    code += "def f" + std::to_string(i) + "(x):\n    return x * " + std::to_string(i) + "  # the step\n";
  return {{"prose", "p.txt", prose}, {"code", "c.py", code}};
}

CorpusOptions small_options() {
  CorpusOptions o;
  o.depths = {16, 24};
  o.segments_per_depth = 3;
  o.decode_last = 4;
  o.seed = 7;
  resolve_corpus_options(o);
  return o;
}

TEST(Corpus, BuildIsDeterministicAndSeeded) {
  const Tokenizer tok = test_tokenizer();
  const auto d = docs();
  Corpus a = build_corpus(small_options(), d, tok, "t.json");
  Corpus b = build_corpus(small_options(), d, tok, "t.json");
  EXPECT_EQ(a.tokens, b.tokens);
  const std::string fa = tmp("a.kcc"), fb = tmp("b.kcc");
  write_corpus(fa, a);
  write_corpus(fb, b);
  EXPECT_EQ(read_bytes(fa), read_bytes(fb));
  EXPECT_EQ(a.checksum, b.checksum);
  CorpusOptions o2 = small_options();
  o2.seed = 8;
  Corpus c = build_corpus(o2, d, tok, "t.json");
  EXPECT_NE(a.tokens, c.tokens) << "another seed picks other windows";
  std::filesystem::remove(fa);
  std::filesystem::remove(fb);
}

TEST(Corpus, SegmentLayout) {
  const Tokenizer tok = test_tokenizer();
  const auto d = docs();
  Corpus c = build_corpus(small_options(), d, tok, "t.json");
  ASSERT_EQ(c.segments.size(), 6u);
  std::int64_t begin = 0;
  const char* dom[] = {"prose", "code", "prose"};
  for (std::size_t i = 0; i < c.segments.size(); ++i) {
    const CorpusSegment& s = c.segments[i];
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.depth, i < 3 ? 16 : 24);
    EXPECT_EQ(s.domain, dom[i % 3]);
    EXPECT_EQ(s.name, fmt::format("{}-d{}-{}", s.domain, s.depth, i % 3));
    EXPECT_EQ(s.decode_last, 4);
    EXPECT_EQ(s.token_begin, begin);
    begin += s.depth + 1;
    // The window is the tokenization of its text, which is the source's bytes at byte_offset, at a line
    // start.
    auto w = c.window(s);
    const SourceDoc& src = s.domain == "prose" ? d[0] : d[1];
    EXPECT_EQ(src.text.substr(s.byte_offset, s.text.size()), s.text);
    EXPECT_TRUE(s.byte_offset == 0 || src.text[s.byte_offset - 1] == '\n');
    EXPECT_EQ(tok.decode_bytes(w), s.text);
    // offsets[i]: where token i + 1 (the one position i predicts) starts in the text
    ASSERT_EQ(s.offsets.size(), static_cast<std::size_t>(s.depth));
    for (std::int64_t p = 0; p < s.depth; ++p)
      EXPECT_EQ(s.offsets[p], static_cast<std::int64_t>(tok.decode_bytes(w.first(p + 1)).size()));
  }
  EXPECT_EQ(static_cast<std::int64_t>(c.tokens.size()), begin);
  EXPECT_EQ(c.positions(), 3 * 16 + 3 * 24);

  const std::string f = tmp("layout.kcc");
  write_corpus(f, c);
  Corpus r = read_corpus(f);
  EXPECT_EQ(r.tokens, c.tokens);
  EXPECT_EQ(r.identity(), "kcc-" + c.checksum);
  ASSERT_EQ(r.segments.size(), c.segments.size());
  EXPECT_EQ(r.segments[4].text, c.segments[4].text);
  EXPECT_EQ(r.segments[4].offsets, c.segments[4].offsets);
  EXPECT_EQ(r.tokenizer_id, tokenizer_identity(tok));
  EXPECT_TRUE(r.generation.empty());
  std::filesystem::remove(f);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Corpus, BadOptions) {
  auto with = [](auto change) {
    CorpusOptions o;
    change(o);
    resolve_corpus_options(o);
  };
  expect_error([&] { with([](CorpusOptions& o) { o.preset = "medium"; }); },
               "--preset: expected quick, full or deep");
  expect_error([&] { with([](CorpusOptions& o) { o.depths = {1}; }); },
               "--depths: expected depths in [2, 2^20], got 1");
  expect_error([&] { with([](CorpusOptions& o) { o.segments_per_depth = -2; }); }, "--segments-per-depth");
  expect_error([&] { with([](CorpusOptions& o) { o.depths = {64}, o.decode_last = 64; }); },
               "--decode-last: expected at most depth − 1 = 63");
  expect_error([&] { with([](CorpusOptions& o) { o.decode_last = -1; }); }, "--decode-last: expected ≥ 0");
  // Presets fill what is not given.
  CorpusOptions q;
  resolve_corpus_options(q);
  EXPECT_EQ(q.depths, (std::vector<std::int64_t>{256, 512}));
  EXPECT_EQ(q.decode_last, 128);
  EXPECT_EQ(q.segments_per_depth, 12);
  CorpusOptions f;
  f.preset = "full";
  resolve_corpus_options(f);
  EXPECT_EQ(f.depths, (std::vector<std::int64_t>{1024, 2048, 4096, 8192}));
  EXPECT_EQ(f.decode_last, 512);
  EXPECT_EQ(f.segments_per_depth, 4);
  CorpusOptions d;
  d.preset = "deep";
  resolve_corpus_options(d);
  EXPECT_EQ(d.depths, (std::vector<std::int64_t>{8192}));
  EXPECT_EQ(d.decode_last, 32);
  EXPECT_EQ(d.segments_per_depth, 2);

  const Tokenizer tok = test_tokenizer();
  CorpusOptions deep = small_options();
  deep.depths = {5000};
  resolve_corpus_options(deep);
  expect_error([&] { build_corpus(deep, docs(), tok, "t.json"); }, "tokens for a segment of depth 5000");
  expect_error([&] { build_corpus(small_options(), {}, tok, "t.json"); }, "expected at least one prose or code document");
  expect_error([&] { read_sources({tmp("missing.txt")}, {}); }, "missing.txt");
}

TEST(Corpus, ReadRefusesCorruptFiles) {
  const Tokenizer tok = test_tokenizer();
  Corpus c = build_corpus(small_options(), docs(), tok, "t.json");
  const std::string f = tmp("bad.kcc");
  Corpus bad = c;
  bad.tokens[3] = static_cast<std::int32_t>(c.vocab);  // outside the vocabulary
  write_corpus(f, bad);
  expect_error([&] { read_corpus(f); }, "tokens[3]: expected an id in [0, " + std::to_string(c.vocab) + ")");
  bad = c;
  bad.segments[1].token_begin += 1;
  write_corpus(f, bad);
  expect_error([&] { read_corpus(f); }, "segments[1].token_begin");
  bad = c;
  bad.segments[0].decode_last = bad.segments[0].depth;
  write_corpus(f, bad);
  expect_error([&] { read_corpus(f); }, "segments[0].decode_last");
  bad = c;
  bad.tokens.push_back(1);  // a token no segment covers
  write_corpus(f, bad);
  expect_error([&] { read_corpus(f); }, "the segments' windows");
  // A tampered token (checksum no longer matches): rewrite the tensor, keep the metadata.
  {
    write_corpus(f, c);
    SafetensorsFile sf = SafetensorsFile::open(f);
    auto md = sf.metadata();
    std::vector<std::int32_t> t = c.tokens;
    t[0] = (t[0] + 1) % static_cast<std::int32_t>(c.vocab);
    std::vector<std::uint8_t> b(t.size() * 4);
    std::memcpy(b.data(), t.data(), b.size());
    write_safetensors(f + ".t",
                      {{"tokens", make_tensor(DType::int32, {static_cast<std::int64_t>(t.size())},
                                              std::move(b), "tokens")}},
                      md);
    expect_error([&] { read_corpus(f + ".t"); }, "metadata checksum");
    md["kerncheck.format"] = "golden";
    write_safetensors(f + ".t", {{"tokens", sf.tensor("tokens")}}, md);
    expect_error([&] { read_corpus(f + ".t"); }, "kerncheck.format: expected \"corpus\"");
    md["kerncheck.format"] = "corpus";
    md["generation"] = "{not json";
    write_safetensors(f + ".t", {{"tokens", sf.tensor("tokens")}}, md);
    expect_error([&] { read_corpus(f + ".t"); }, "metadata generation");
    std::filesystem::remove(f + ".t");
  }
  std::filesystem::remove(f);
}

TEST(Corpus, AnswerSegmentLayout) {
  const Tokenizer tok = test_tokenizer();
  const std::vector<std::int32_t> prompt = tok.encode("Say the day:", false);
  const std::vector<std::int32_t> answer = tok.encode(" the evening and the morning", false);
  ASSERT_GE(prompt.size(), 2u);
  CorpusSegment s = answer_segment(tok, prompt, answer);
  EXPECT_EQ(s.domain, "answer");
  EXPECT_EQ(s.depth, static_cast<std::int64_t>(prompt.size() + answer.size() - 1));
  EXPECT_EQ(s.decode_last, static_cast<std::int64_t>(answer.size()));
  EXPECT_EQ(s.text, "Say the day: the evening and the morning");
  // The decode-phase positions (the last decode_last) predict exactly the answer tokens; their offsets
  // point at the answer's tokens in the text.
  ASSERT_EQ(s.offsets.size(), static_cast<std::size_t>(s.depth));
  const std::int64_t first_answer = s.depth - s.decode_last;
  EXPECT_EQ(s.offsets[first_answer], static_cast<std::int64_t>(std::string("Say the day:").size()));
  std::size_t pos = std::string("Say the day:").size();
  for (std::size_t i = 0; i < answer.size(); ++i) {
    EXPECT_EQ(s.offsets[first_answer + i], static_cast<std::int64_t>(pos));
    pos += tok.decode_bytes({&answer[i], 1}).size();
  }
  // Invalid UTF-8 in the answer (a lone byte token) becomes '?' with the same length.
  const std::int32_t lone = *tok.token_id("\xc3\x83");  // byte 0xC3 in GPT-2's byte alphabet
  CorpusSegment t = answer_segment(tok, prompt, std::vector<std::int32_t>{lone});
  EXPECT_EQ(t.text, "Say the day:?");
  expect_error([&] { answer_segment(tok, std::vector<std::int32_t>{prompt[0]}, answer); },
               "prompt: expected at least 2 tokens");
  expect_error([&] { answer_segment(tok, prompt, {}); }, "answer: expected at least one generated token");

  // An answer corpus round-trips with its generation metadata.
  Corpus c;
  c.tokenizer_id = tokenizer_identity(tok);
  c.tokenizer_origin = "t.json";
  c.vocab = static_cast<std::int64_t>(tok.vocab_size());
  c.preset = "answers";
  s.name = "answer-0";
  c.tokens = prompt;
  c.tokens.insert(c.tokens.end(), answer.begin(), answer.end());
  c.segments.push_back(s);
  c.generation = R"({"temperature":1.0,"seed":3})";
  const std::string f = tmp("answers.kcc");
  write_corpus(f, c);
  Corpus r = read_corpus(f);
  EXPECT_EQ(r.generation, c.generation);
  EXPECT_EQ(r.segments[0].domain, "answer");
  EXPECT_EQ(r.segments[0].decode_last, static_cast<std::int64_t>(answer.size()));
  std::filesystem::remove(f);
}

}  // namespace
}  // namespace kc
