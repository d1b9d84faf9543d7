// The quantized decode path (LlamaQuantWeights + quant_gemv) on a GGUF: llama-tiny's weights quantized
// here to Q4_1 (linear layers, Q/K rows permuted as llama.cpp's converter does) and Q8_0 (tied embedding),
// and SmolLM2's Q4_1 file when present. Its in-register weights are the model's f32 weights bit for bit in
// HF row order, decode agrees with the f32 prefill to f32 rounding, the thread count changes no bit, and
// for_each_weight switches it off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "model/llama.h"
#include "numeric/formats.h"
#include "gguf_test_writer.h"
#include "reference_util.h"

namespace kc {
namespace {

namespace fs = std::filesystem;

using Writer = test::GgufWriter;

void put_f16(std::vector<std::uint8_t>& out, float f) {
  const std::uint16_t h = f32_to_f16(f);
  out.push_back(static_cast<std::uint8_t>(h & 0xFF)), out.push_back(static_cast<std::uint8_t>(h >> 8));
}

// ggml's reference quantizers (quantize_row_q4_1_ref / q8_0_ref), up to rounding choices that do not matter
// here: the test compares against the loader's dequantization of these bytes, not against the input.
std::vector<std::uint8_t> quantize(GgmlType t, const std::vector<float>& x) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < x.size(); i += 32) {
    const float* v = &x[i];
    if (t == GgmlType::Q4_1) {
      float lo = v[0], hi = v[0];
      for (int j = 1; j < 32; ++j) lo = std::min(lo, v[j]), hi = std::max(hi, v[j]);
      const float d = (hi - lo) / 15.0f, id = d ? 1.0f / d : 0.0f;
      put_f16(out, d), put_f16(out, lo);
      for (int j = 0; j < 16; ++j) {
        auto q = [&](float f) { return std::min(15, static_cast<int>(std::lround((f - lo) * id))); };
        out.push_back(static_cast<std::uint8_t>(q(v[j]) | (q(v[j + 16]) << 4)));
      }
    } else {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(v[j]));
      const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
      put_f16(out, d);
      for (int j = 0; j < 32; ++j) out.push_back(static_cast<std::uint8_t>(std::lround(v[j] * id)));
    }
  }
  return out;
}

// GGUF row h·hd + 2i + two holds HF row h·hd + two·hd/2 + i (convert_hf_to_gguf's permute for llama).
std::vector<float> permute_rows(const std::vector<float>& w, std::size_t n_head, std::size_t hd,
                                std::size_t cols) {
  std::vector<float> out(w.size());
  for (std::size_t h = 0; h < n_head; ++h)
    for (std::size_t two = 0; two < 2; ++two)
      for (std::size_t i = 0; i < hd / 2; ++i)
        std::memcpy(&out[(h * hd + 2 * i + two) * cols], &w[(h * hd + two * hd / 2 + i) * cols],
                    cols * sizeof(float));
  return out;
}

// llama-tiny (HF fixture) written as a GGUF: linear layers Q4_1, tied embedding Q8_0, norms F32.
struct TinyGguf {
  fs::path path = fs::temp_directory_path() / ("kc_llama_quant_" + std::to_string(::getpid()) + ".gguf");
  TinyGguf() {
    const auto hf = LlamaModel::load(fixture("llama-tiny"));
    const auto& c = hf.config();
    const auto& w = hf.weights();
    struct T {
      std::string name;
      std::vector<std::uint64_t> ne;
      GgmlType type;
      std::vector<std::uint8_t> data;
    };
    std::vector<T> ts;
    auto f32 = [&](std::string name, const std::vector<float>& v) {
      std::vector<std::uint8_t> d(v.size() * 4);
      std::memcpy(d.data(), v.data(), d.size());
      ts.push_back({std::move(name), {v.size()}, GgmlType::F32, std::move(d)});
    };
    auto mat = [&](std::string name, const std::vector<float>& v, std::size_t rows, GgmlType t) {
      ts.push_back({std::move(name), {v.size() / rows, rows}, t, quantize(t, v)});
    };
    const std::size_t D = c.d_model, F = c.d_ff, hd = c.head_dim;
    mat("token_embd.weight", w.embed_f32(), c.n_vocab, GgmlType::Q8_0);
    f32("output_norm.weight", w.final_norm);
    for (std::size_t il = 0; il < c.n_layers; ++il) {
      const auto& l = w.layers[il];
      const std::string p = "blk." + std::to_string(il) + ".";
      f32(p + "attn_norm.weight", l.attn_norm);
      f32(p + "ffn_norm.weight", l.mlp_norm);
      mat(p + "attn_q.weight", permute_rows(l.wq.unpack(), c.n_heads, hd, D), c.n_heads * hd, GgmlType::Q4_1);
      mat(p + "attn_k.weight", permute_rows(l.wk.unpack(), c.n_kv_heads, hd, D), c.n_kv_heads * hd,
          GgmlType::Q4_1);
      mat(p + "attn_v.weight", l.wv.unpack(), c.n_kv_heads * hd, GgmlType::Q4_1);
      mat(p + "attn_output.weight", l.wo.unpack(), D, GgmlType::Q4_1);
      mat(p + "ffn_gate.weight", l.w_gate.unpack(), F, GgmlType::Q4_1);
      mat(p + "ffn_up.weight", l.w_up.unpack(), F, GgmlType::Q4_1);
      mat(p + "ffn_down.weight", l.w_down.unpack(), D, GgmlType::Q4_1);
    }
    Writer g;
    g.b = {'G', 'G', 'U', 'F'};
    g.put<std::uint32_t>(3);
    g.put<std::uint64_t>(ts.size());
    g.put<std::uint64_t>(8);
    g.str("general.architecture"), g.put<std::uint32_t>(8), g.str("llama");
    auto u32 = [&](const char* k, std::size_t v) {
      g.str(k), g.put<std::uint32_t>(4), g.put<std::uint32_t>(static_cast<std::uint32_t>(v));
    };
    auto f = [&](const char* k, float v) { g.str(k), g.put<std::uint32_t>(6), g.put<float>(v); };
    u32("llama.embedding_length", D), u32("llama.block_count", c.n_layers),
        u32("llama.feed_forward_length", F);
    u32("llama.attention.head_count", c.n_heads), u32("llama.attention.head_count_kv", c.n_kv_heads);
    f("llama.attention.layer_norm_rms_epsilon", c.rms_eps), f("llama.rope.freq_base", 10000.0f);
    std::uint64_t off = 0;
    for (const auto& t : ts) {
      g.str(t.name);
      g.put<std::uint32_t>(static_cast<std::uint32_t>(t.ne.size()));
      for (auto n : t.ne) g.put<std::uint64_t>(n);
      g.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
      g.put<std::uint64_t>(off);
      off = (off + t.data.size() + 31) / 32 * 32;
    }
    g.pad(32);
    for (const auto& t : ts) {
      g.b.insert(g.b.end(), t.data.begin(), t.data.end());
      g.pad(32);
    }
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(g.b.data()), g.b.size());
  }
  ~TinyGguf() { fs::remove(path); }
};

std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every element of the GEMV's in-register weights (read out with unit vectors x = e_j, which give
// fma(w, 1, 0) + zeros = w exactly) equals the model's f32 weight, in HF row order (row map applied).
void expect_gemv_reads_weights(const QuantMatrix& q, const std::vector<std::uint32_t>& map,
                               const std::vector<float>& w, const char* what,
                               std::size_t max_cols = 1 << 30) {
  ASSERT_NE(q.data, nullptr) << what;
  ASSERT_EQ(q.rows * q.cols, w.size()) << what;
  std::vector<float> x(q.cols, 0.0f), y(q.rows);
  const std::size_t step = q.cols <= max_cols ? 1 : q.cols / max_cols + 1;
  for (std::size_t j = 0; j < q.cols; j += step) {
    x[j] = 1.0f;
    quant_gemv(q, x.data(), y.data(), map.empty() ? nullptr : map.data());
    x[j] = 0.0f;
    for (std::size_t r = 0; r < q.rows; ++r) {
      const float ref = w[r * q.cols + j];
      if (ref == 0) {
        ASSERT_EQ(y[r], 0.0f) << what << " r " << r << " j " << j;
      } else {
        ASSERT_EQ(bits(y[r]), bits(ref)) << what << " r " << r << " j " << j;
      }
    }
  }
}

void expect_all_weights(const LlamaModel& m, std::size_t max_cols = 1 << 30) {
  const auto* q = m.quantized();
  ASSERT_NE(q, nullptr);
  const auto& w = m.weights();
  const std::vector<std::uint32_t> none;
  for (std::size_t il = 0; il < w.layers.size(); ++il) {
    const auto& l = w.layers[il];
    const auto& ql = q->layers[il];
    expect_gemv_reads_weights(ql.wq, q->q_rows, l.wq.unpack(), "wq", max_cols);
    expect_gemv_reads_weights(ql.wk, q->k_rows, l.wk.unpack(), "wk", max_cols);
    expect_gemv_reads_weights(ql.wv, none, l.wv.unpack(), "wv", max_cols);
    expect_gemv_reads_weights(ql.wo, none, l.wo.unpack(), "wo", max_cols);
    expect_gemv_reads_weights(ql.w_gate, none, l.w_gate.unpack(), "w_gate", max_cols);
    expect_gemv_reads_weights(ql.w_up, none, l.w_up.unpack(), "w_up", max_cols);
    expect_gemv_reads_weights(ql.w_down, none, l.w_down.unpack(), "w_down", max_cols);
  }
  expect_gemv_reads_weights(q->lm_head, none, w.lm_head.unpack(), "lm_head", max_cols);
}

std::vector<std::int32_t> sample_ids(std::size_t n, std::size_t vocab) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % vocab);
  return ids;
}

// Decode after prefilling ids[0, P): logits of tokens P … n-1, one row each.
std::vector<float> decode_rows(const LlamaModel& m, const std::vector<std::int32_t>& ids, std::size_t P) {
  LlamaState st(m.config());
  m.prefill(st, std::span(ids).first(P));
  std::vector<float> out;
  for (std::size_t t = P; t < ids.size(); ++t) {
    const auto row = m.decode(st, ids[t]);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(LlamaQuant, TinyGgufDecodeReadsTheSameWeights) {
  TinyGguf file;
  auto model = LlamaModel::load(file.path.string());
  const auto* q = model.quantized();
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->layers[0].wq.type, GgmlType::Q4_1);
  EXPECT_EQ(q->lm_head.type, GgmlType::Q8_0);
  EXPECT_EQ(q->q_rows.size(), 64u);
  expect_all_weights(model);

  const std::size_t V = model.config().n_vocab, P = 20;
  const auto ids = sample_ids(36, V);
  LlamaState st(model.config());
  const auto pre = model.prefill(st, ids);  // f32 GEMMs
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    set_thread_count(threads);
    const auto dec = decode_rows(model, ids, P);
    if (first.empty()) first = dec;
    ASSERT_EQ(0, std::memcmp(dec.data(), first.data(), dec.size() * sizeof(float))) << "threads " << threads;
  }
  set_thread_count(0);
  // prefill (f32 weights) and decode (blocks) agree to f32 rounding; a wrong row map or block formula
  // would not (the test's worst_ratio unit is 1e-4·(1 + |ref|)).
  EXPECT_LE(worst_ratio(first, std::span(pre).subspan(P * V)), 0.1);

  // for_each_weight: the f32 weights become the model; decode follows them.
  model.for_each_weight([](const std::string& name, std::span<float> w) {
    if (name == "model.embed_tokens.weight")
      for (auto& x : w) x *= 2.0f;
  });
  EXPECT_EQ(model.quantized(), nullptr);
  LlamaState st2(model.config());
  const auto pre2 = model.prefill(st2, ids);
  const auto dec2 = decode_rows(model, ids, P);
  EXPECT_LE(worst_ratio(dec2, std::span(pre2).subspan(P * V)), 0.1);
  EXPECT_GT(worst_ratio(dec2, first), 10.0);  // the doubled embedding changed the logits
}

// A batch of decode steps on the file's blocks (each row one quantized GEMV) equals single decodes bit for bit.
TEST(LlamaQuant, DecodeBatchOnBlocksIsBitwiseSingleDecodes) {
  TinyGguf file;
  const auto model = LlamaModel::load(file.path.string());
  ASSERT_NE(model.quantized(), nullptr);
  const std::size_t prompts[] = {3, 17, 40, 9, 1};
  expect_decode_batch_bitwise(model, prompts, 6, "Q4_1 + Q8_0 GGUF");
}

TEST(LlamaQuant, HfCheckpointKeepsF32Path) {
  EXPECT_EQ(LlamaModel::load(fixture("llama-tiny")).quantized(), nullptr);
}

TEST(LlamaQuant, SmolLM2IfPresent) {
  const char* env = std::getenv("KC_SMOLLM2_GGUF");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string path = env ? env : home + "/.cache/kerncheck/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " absent (scripts/fetch_smollm2.sh)";
  auto model = LlamaModel::load(path);
  const auto* q = model.quantized();
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->layers[3].w_down.type, GgmlType::Q4_1);
  EXPECT_EQ(q->lm_head.type, GgmlType::Q8_0);
  expect_all_weights(model, 12);  // 12 columns of every matrix (all 30 layers, the tied head)
  const std::size_t V = model.config().n_vocab, P = 6;
  const auto ids = sample_ids(10, V);
  LlamaState st(model.config());
  const auto pre = model.prefill(st, ids);
  const auto dec = decode_rows(model, ids, P);
  const double quant_vs_prefill = worst_ratio(dec, std::span(pre).subspan(P * V));
  model.for_each_weight([](const std::string&, std::span<float>) {});  // f32 decode from here
  ASSERT_EQ(model.quantized(), nullptr);
  const auto dec_f32 = decode_rows(model, ids, P);
  const double f32_vs_prefill = worst_ratio(dec_f32, std::span(pre).subspan(P * V));
  std::printf(
      "decode vs prefill, worst |diff| / 1e-4(1+|ref|): quantized %.4f, f32 %.4f; quantized vs f32 %.4f\n",
      quant_vs_prefill, f32_vs_prefill, worst_ratio(dec, dec_f32));
  // 30 layers of f32 rounding: the f32 decode is ~0.2 units from the prefill (2e-5 relative); the quantized
  // one must be as close (a wrong weight would be off by orders of magnitude).
  EXPECT_LE(quant_vs_prefill, 0.5);
  EXPECT_LE(worst_ratio(dec, dec_f32), 0.5);
}

}  // namespace
}  // namespace kc
