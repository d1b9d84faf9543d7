// GGUF parsing, dequantization by hand-computed blocks, exact error messages, HF checkpoint reader.
// (tests/py/test_gguf.py compares every type bit for bit with the gguf PyPI package.)
#include "model/gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/hf_checkpoint.h"
#include "numeric/formats.h"
#include "gguf_test_writer.h"

namespace kc {
namespace {

using Writer = test::GgufWriter;

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A file with: general.alignment 32 (u32), an array of 2 strings, a float; tensors "q" (Q4_1, 1 block of
// 32) and "n" (F32, 4 values).
std::vector<std::uint8_t> sample(std::uint32_t q_type = 3) {
  Writer w;
  w.b = {'G', 'G', 'U', 'F'};
  w.put<std::uint32_t>(3);
  w.put<std::uint64_t>(2);  // tensors
  w.put<std::uint64_t>(3);  // kv
  w.str("general.alignment");
  w.put<std::uint32_t>(4);
  w.put<std::uint32_t>(32);
  w.str("tokenizer.ggml.tokens");
  w.put<std::uint32_t>(9);
  w.put<std::uint32_t>(8);
  w.put<std::uint64_t>(2);
  w.str("<|im_start|>");
  w.str("Ġthe");
  w.str("llama.rope.freq_base");
  w.put<std::uint32_t>(6);
  w.put<float>(100000.0f);
  // tensor infos
  w.str("q");
  w.put<std::uint32_t>(2);
  w.put<std::uint64_t>(32);
  w.put<std::uint64_t>(1);
  w.put<std::uint32_t>(q_type);
  w.put<std::uint64_t>(0);
  w.str("n");
  w.put<std::uint32_t>(1);
  w.put<std::uint64_t>(4);
  w.put<std::uint32_t>(0);
  w.put<std::uint64_t>(32);
  w.pad(32);
  // Q4_1 block: d = 0.5 (0x3800), m = -1 (0xBC00), qs[j] = j | (15 - j) << 4
  w.put<std::uint16_t>(0x3800);
  w.put<std::uint16_t>(0xBC00);
  for (int j = 0; j < 16; ++j) w.b.push_back(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
  w.pad(32);
  for (float f : {1.0f, -2.5f, 0.0f, 3e-8f}) w.put<float>(f);
  return w.b;
}

TEST(Gguf, ParsesMetadataAndDequantizesByHand) {
  const auto bytes = sample();
  const auto g = GgufFile::parse(bytes, "mem.gguf");
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.get_uint("general.alignment"), 32u);
  EXPECT_EQ(g.get_float("llama.rope.freq_base"), 100000.0);
  const auto toks = g.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(toks.size(), 2u);
  EXPECT_EQ(toks[1], "Ġthe");
  ASSERT_EQ(g.tensors().size(), 2u);
  const auto& q = g.tensor_info("q");
  EXPECT_EQ(q.shape(), (std::vector<std::int64_t>{1, 32}));
  EXPECT_EQ(q.n_bytes, 20u);
  const auto v = g.dequantize(q);
  for (int j = 0; j < 16; ++j) {  // y[j] = (qs[j] & 0xF)·d + m, y[j+16] = (qs[j] >> 4)·d + m
    EXPECT_EQ(v[j], j * 0.5f - 1.0f) << j;
    EXPECT_EQ(v[j + 16], (15 - j) * 0.5f - 1.0f) << j;
  }
  const Tensor n = g.tensor_f32("n");
  EXPECT_EQ(n.shape, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(n.origin, "mem.gguf:n");
  const float* nf = reinterpret_cast<const float*>(n.bytes.data());
  EXPECT_EQ(nf[1], -2.5f);
  EXPECT_EQ(nf[3], 3e-8f);
}

TEST(Gguf, Q8_0AndQ6_KByHand) {
  // Q8_0: d = 0.25, q = -128..127 step 8
  std::vector<std::uint8_t> blk(34);
  const std::uint16_t d = 0x3400;  // 0.25
  std::memcpy(blk.data(), &d, 2);
  for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(-128 + 8 * j));
  std::vector<float> y(32);
  dequantize_row(GgmlType::Q8_0, blk.data(), y.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (-128 + 8 * j) * 0.25f);
  // Q6_K: all ql = 0x21, qh = 0b11100100, scales[i] = i - 8, d = 1 → element value from ggml's formula
  std::vector<std::uint8_t> k(210);
  std::fill(k.begin(), k.begin() + 128, 0x21);
  std::fill(k.begin() + 128, k.begin() + 192, 0xE4);
  for (int i = 0; i < 16; ++i) k[192 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(i - 8));
  const std::uint16_t one = 0x3C00;
  std::memcpy(k.data() + 208, &one, 2);
  std::vector<float> z(256);
  dequantize_row(GgmlType::Q6_K, k.data(), z.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const int r = i % 128, quarter = r / 32;     // l, l+32, l+64, l+96
    const int lo = quarter < 2 ? 0x1 : 0x2;      // low nibble (q1, q2) or high (q3, q4) of 0x21
    const int hi = (0xE4 >> (2 * quarter)) & 3;  // 2 bits of qh
    const int sc = (i / 128) * 8 + (r % 32) / 16 + 2 * quarter;  // scale index
    EXPECT_EQ(z[i], static_cast<float>(sc - 8) * static_cast<float>((lo | hi << 4) - 32)) << i;
  }
}

TEST(Gguf, HalfToFloatMatchesNumericCodecForAllCodes) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float a = half_to_float(static_cast<std::uint16_t>(h));
    const float b = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << h;
    } else {
      EXPECT_EQ(std::memcmp(&a, &b, 4), 0) << h;
    }
  }
}

TEST(Gguf, ErrorMessagesNameFileFieldAndExpectation) {
  auto bytes = sample();
  auto bad = bytes;
  std::memcpy(bad.data(), "GGML", 4);
  EXPECT_EQ(message_of([&] { GgufFile::parse(bad, "m.gguf"); }),
            "m.gguf: magic: expected \"GGUF\" (a GGUF file), got \"GGML\"");
  bad = bytes;
  bad[4] = 1;
  EXPECT_EQ(message_of([&] { GgufFile::parse(bad, "m.gguf"); }), "m.gguf: version: expected 2 or 3, got 1");
  bad = std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 30);
  EXPECT_EQ(message_of([&] { GgufFile::parse(bad, "m.gguf"); }),
            "m.gguf: metadata_kv_count: expected at most 0 for a file of 30 bytes, got 3");
  bad = bytes;
  bad[24 + 2] = 1;  // first key's length: 17 + 65536
  EXPECT_EQ(message_of([&] { GgufFile::parse(bad, "m.gguf"); }),
            fmt::format(
                "m.gguf: metadata key #0: expected a string length of at most {} (bytes left) at offset 24, "
                "got 65553",
                bytes.size() - 32));
  const auto g = GgufFile::parse(bytes, "m.gguf");
  EXPECT_EQ(message_of([&] { g.get_string("general.alignment"); }),
            "m.gguf: metadata 'general.alignment': expected a STRING, got UINT32 32");
  EXPECT_EQ(message_of([&] { g.get_uint("nope"); }),
            "m.gguf: metadata 'nope': expected a non-negative integer, got no such key");
  EXPECT_EQ(message_of([&] {
              g.expect_tensor("q", {32, 1});
            }),
            "m.gguf: tensor 'q' shape: expected [32, 1], got [1, 32]");
  // Q3_K needs 256-element rows: a 32-wide Q3_K is refused at parse time; a known type without a kernel
  // (Q8_K = 15, rows of 256) only when dequantized.
  auto q3 = sample(11);
  EXPECT_EQ(message_of([&] { GgufFile::parse(q3, "m.gguf"); }),
            "m.gguf: tensor 'q' ne[0]: expected a multiple of 256 (the Q3_K block size), got 32");
  auto unk = sample(99);
  EXPECT_EQ(message_of([&] { GgufFile::parse(unk, "m.gguf"); }),
            "m.gguf: tensor 'q' type: expected a ggml type id (0..41, e.g. 0 F32, 3 Q4_1), got 99");
  // A known type without a kernel reads fine and fails when dequantized, naming tensor, type and list.
  Writer w;
  w.b = {'G', 'G', 'U', 'F'};
  w.put<std::uint32_t>(2);
  w.put<std::uint64_t>(1);
  w.put<std::uint64_t>(0);
  w.str("blk.3.attn_q.weight");
  w.put<std::uint32_t>(1);
  w.put<std::uint64_t>(256);
  w.put<std::uint32_t>(11);  // Q3_K
  w.put<std::uint64_t>(0);
  w.pad(32);
  w.b.resize(w.b.size() + 110);
  const auto q3k = GgufFile::parse(w.b, "m.gguf");
  EXPECT_EQ(
      message_of([&] { q3k.tensor_f32("blk.3.attn_q.weight"); }),
      "m.gguf: tensor 'blk.3.attn_q.weight' type: expected a supported type (F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, "
      "Q8_0, Q4_K, Q5_K, Q6_K, BF16), got Q3_K");
  w.b.pop_back();  // one byte short of the data
  EXPECT_EQ(message_of([&] { GgufFile::parse(w.b, "m.gguf"); }),
            "m.gguf: tensor 'blk.3.attn_q.weight' data: expected 110 bytes at data offset 0 within the 109 "
            "bytes of "
            "tensor data, got a range past the end of the file");
}

TEST(Gguf, EveryTruncationThrowsAndNeverReadsOutOfBounds) {
  const auto bytes = sample();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes: ASan would flag a read past it.
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      GgufFile::parse(cut, "cut.gguf");
      // Only the padding after the last tensor (n >= end of "n"'s data) may be cut without error.
      EXPECT_GE(n, bytes.size()) << n;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.gguf: ", 0), 0u) << e.what();
    }
  }
}

TEST(Gguf, SmolLM2FileIfPresent) {
  const char* env = std::getenv("KC_SMOLLM2_GGUF");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string path = env ? env : home + "/.cache/kerncheck/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (scripts/fetch_smollm2.sh)";
  const auto g = GgufFile::open(path);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(g.get_uint("llama.embedding_length"), 576u);
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(g.tensors().size(), 272u);
  EXPECT_EQ(g.expect_tensor("token_embd.weight", {49152, 576}).type, GgmlType::Q8_0);
  EXPECT_EQ(g.expect_tensor("blk.3.attn_q.weight", {576, 576}).type, GgmlType::Q4_1);
  EXPECT_EQ(g.expect_tensor("blk.3.attn_k.weight", {192, 576}).type, GgmlType::Q4_1);
  EXPECT_EQ(g.expect_tensor("output_norm.weight", {576}).type, GgmlType::F32);
}

// ------------------------------------------------------------------------------ HF checkpoint
struct TmpDir {
  std::filesystem::path p;
  TmpDir() {
    p = std::filesystem::temp_directory_path() / ("kc_hf_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
  }
  ~TmpDir() { std::filesystem::remove_all(p); }
};

Tensor owned(DType dt, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes) {
  auto buf = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
  Tensor t;
  t.dtype = dt;
  t.shape = std::move(shape);
  t.bytes = *buf;
  t.owner = buf;
  t.origin = "<test>";
  return t;
}

TEST(HfCheckpoint, ShardedBf16AndF16ToF32WithErrors) {
  TmpDir d;
  std::ofstream(d.p / "config.json")
      << R"({"vocab_size": 8, "rms_norm_eps": 1e-5, "text_config": {"hidden_size": 4}})";
  // bf16 1.5 = 0x3FC0, f16 -2 = 0xC000
  std::vector<std::uint8_t> bf(2 * 6), f16(2 * 4);
  for (int i = 0; i < 6; ++i) bf[2 * i + 1] = 0x3F, bf[2 * i] = 0xC0;
  for (int i = 0; i < 4; ++i) f16[2 * i + 1] = 0xC0;
  write_safetensors((d.p / "model-00001-of-00002.safetensors").string(),
                    {{"a.weight", owned(DType::bfloat16, {2, 3}, bf)}});
  write_safetensors((d.p / "model-00002-of-00002.safetensors").string(),
                    {{"b.weight", owned(DType::float16, {4}, f16)}});
  std::ofstream(d.p / "model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                                             "b.weight": "model-00002-of-00002.safetensors"}})";
  const auto ck = HfCheckpoint::open(d.p.string());
  EXPECT_EQ(ck.tensor_names(), (std::vector<std::string>{"a.weight", "b.weight"}));
  EXPECT_EQ(ck.config_int("vocab_size"), 8);
  EXPECT_EQ(ck.config_int("text_config.hidden_size"), 4);
  EXPECT_DOUBLE_EQ(ck.config_float("rms_norm_eps"), 1e-5);
  EXPECT_EQ(ck.tensor_f32("a.weight", {2, 3}), std::vector<float>(6, 1.5f));
  EXPECT_EQ(ck.tensor_f32("b.weight"), std::vector<float>(4, -2.0f));
  const std::string cfg = (d.p / "config.json").string();
  EXPECT_EQ(message_of([&] { ck.config_int("rms_norm_eps"); }),
            cfg + ": rms_norm_eps: expected an integer, got 1e-05");
  EXPECT_EQ(message_of([&] { ck.config_int("num_layers"); }),
            cfg + ": num_layers: expected an integer, got no such key");
  EXPECT_EQ(
      message_of([&] { ck.tensor_f32("c.weight"); }),
      d.p.string() +
          ": tensor 'c.weight': expected a tensor of that name (the checkpoint has 2 tensors), got none");
  EXPECT_EQ(message_of([&] {
              ck.tensor_f32("a.weight", {3, 2});
            }),
            (d.p / "model-00001-of-00002.safetensors").string() +
                ": tensor 'a.weight' shape: expected [3, 2], got [2, 3]");
  // index naming a tensor its shard lacks; a shard path leaving the folder
  std::ofstream(d.p / "model.safetensors.index.json")
      << R"({"weight_map": {"x": "model-00001-of-00002.safetensors"}})";
  EXPECT_NE(
      message_of([&] { HfCheckpoint::open(d.p.string()); }).find("weight_map[\"x\"]: expected a tensor that"),
      std::string::npos);
  std::ofstream(d.p / "model.safetensors.index.json") << R"({"weight_map": {"x": "../evil.safetensors"}})";
  EXPECT_NE(message_of([&] {
              HfCheckpoint::open(d.p.string());
            }).find("expected a file name in the checkpoint folder"),
            std::string::npos);
}

}  // namespace
}  // namespace kc
