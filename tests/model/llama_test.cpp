// The Llama-family engine against transformers' f32 logits on the tiny fixtures (made by
// /work/shared/tools/make_models.py, committed under tests/data/fixtures/): prefill and cached decode,
// determinism across thread counts and prefill chunking, the tensor hook, and bad checkpoints.
#include "model/llama.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/parallel.h"
#include "io/safetensors.h"
#include "model/variant.h"
#include "reference_util.h"

namespace kc {
namespace {

namespace fs = std::filesystem;

class TinyFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyFixture, PrefillAndCachedDecodeMatchTransformers) {
  const auto dir = fixture(GetParam());
  const auto model = LlamaModel::load(dir);
  const auto ref = read_reference(dir);
  const std::size_t V = model.config().n_vocab, T = ref.ids.size();
  ASSERT_EQ(ref.logits.size(), T * V);

  LlamaState st(model.config());
  const auto logits = model.prefill(st, ref.ids);
  EXPECT_LE(worst_ratio(logits, ref.logits), 1.0);
  EXPECT_EQ(st.pos, T);

  // Cached decode as transformers ran it: prefill [0, P), then one token at a time.
  const std::size_t P = ref.decode_start + 1, n = ref.decode_logits.size() / V;
  LlamaState ds(model.config());
  const auto pre = model.prefill(ds, std::span(ref.ids).first(P));
  std::vector<float> dec(pre.end() - V, pre.end());  // row P-1 predicts token P
  for (std::size_t t = P; t < P + n - 1; ++t) {
    const auto row = model.decode(ds, ref.ids[t]);
    dec.insert(dec.end(), row.begin(), row.end());
  }
  EXPECT_LE(worst_ratio(dec, ref.decode_logits), 1.0);
  // prefill and decode paths agree to f32 rounding
  EXPECT_LE(worst_ratio(dec, std::span(logits).subspan((P - 1) * V, n * V)), 0.1);
}

// qwen2-tiny: q/k/v biases and an untied lm_head (scripts/make_qwen2_fixture.py).
INSTANTIATE_TEST_SUITE_P(Fixtures, TinyFixture, ::testing::Values("llama-tiny", "qwen3-tiny", "qwen2-tiny"));

TEST(Llama, ConfigFromFixtures) {
  const auto l = LlamaModel::load(fixture("llama-tiny")).config();
  EXPECT_EQ(l.arch, LlamaArch::llama);
  EXPECT_EQ(l.head_dim, 16u);
  EXPECT_TRUE(l.tied_embeddings);
  EXPECT_FALSE(l.qk_norm);
  const auto q = LlamaModel::load(fixture("qwen3-tiny")).config();
  EXPECT_EQ(q.arch, LlamaArch::qwen3);
  EXPECT_EQ(q.head_dim, 32u);  // explicit head_dim ≠ hidden/heads (16)
  EXPECT_TRUE(q.qk_norm);
  EXPECT_DOUBLE_EQ(q.rope.theta, 10000.0);
}

// Bitwise the same logits for any thread count, and for one prefill or the same tokens split over calls
// at chunk boundaries (the KV cache carries the state).
TEST(Llama, DeterministicAcrossThreadsAndCalls) {
  const auto model = LlamaModel::load(fixture("qwen3-tiny"));
  std::vector<std::int32_t> ids(LlamaModel::kPrefillChunk + 44);  // a full chunk and a part
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 13) % 512);
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    set_thread_count(threads);
    LlamaState st(model.config());
    const auto l = model.prefill(st, ids);
    if (first.empty()) first = l;
    ASSERT_EQ(0, std::memcmp(l.data(), first.data(), l.size() * sizeof(float))) << "threads " << threads;
  }
  set_thread_count(0);
  LlamaState st(model.config());
  auto a = model.prefill(st, std::span(ids).first(LlamaModel::kPrefillChunk));
  const auto b = model.prefill(st, std::span(ids).subspan(LlamaModel::kPrefillChunk));
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(0, std::memcmp(a.data(), first.data(), a.size() * sizeof(float)));
}

// decode_batch: each row is bitwise decode() of its sequence alone, on every fixture (biases, q/k-norm, an
// untied head) and under every kind of variant (bf16 hook rounding, other orders, flash attention, P and KV
// rounding, a round: term, kernel- and hook-side bugs; deep_score acts past key 256, which the 270-token
// prompt reaches).
TEST(Llama, DecodeBatchRowsAreBitwiseSingleDecodes) {
  const std::size_t prompts[] = {5, 33, 270, 64};
  for (const char* fx : {"llama-tiny", "qwen2-tiny", "qwen3-tiny"})
    expect_decode_batch_bitwise(LlamaModel::load(fixture(fx)), prompts, 5, fx);
  for (const char* v : {"bf16", "bf16+order=3", "bf16+attn=flash", "bf16+attn=flash+order=2", "bf16+p=fp8",
                        "kv=fp8", "bf16+round:attn.out=4", "bf16+bug:decode_kv=3", "bf16+bug:deep_score=0.05",
                        "bf16+bug:gemm_acc=16", "bf16+logits=bf16+bug:attn_scale=0.02"}) {
    auto m = LlamaModel::load(fixture("qwen3-tiny"));
    apply_variant(m, parse_variant(v));
    expect_decode_batch_bitwise(m, prompts, 4, v);
  }
}

// An empty sink (generate's prompt) skips the LM head but leaves the same cache: the next decode gives the
// same bits as after a prefill that produced every logit.
TEST(Llama, EmptySinkSkipsLogitsOnly) {
  auto model = LlamaModel::load(fixture("llama-tiny"));
  std::vector<std::int32_t> ids(40);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>((i * 31 + 7) % 256);
  LlamaState full(model.config()), bare(model.config());
  std::size_t rows = 0;
  model.prefill(full, ids, [&](std::size_t, std::size_t r, std::span<const float>) { rows += r; });
  EXPECT_EQ(rows, ids.size());
  bool saw_logits = false;
  model.set_hook([&](const engine::TensorEvent& e) { saw_logits |= e.name == "logits"; });
  model.prefill(bare, ids, LogitsSink{});
  model.set_hook(nullptr);
  EXPECT_FALSE(saw_logits);
  EXPECT_EQ(bare.position(), ids.size());
  EXPECT_EQ(model.decode(full, 5), model.decode(bare, 5));
}

TEST(Llama, HookSeesNamedTensorsAndCanChangeThem) {
  auto model = LlamaModel::load(fixture("qwen3-tiny"));
  const std::vector<std::int32_t> ids{1, 2, 3, 4, 5};
  std::set<std::pair<std::string, int>> seen;
  std::mutex mu;
  model.set_hook([&](const engine::TensorEvent& e) {
    std::lock_guard<std::mutex> g(mu);
    seen.insert({std::string(e.name), e.layer});
    EXPECT_EQ(e.data.size(), e.rows * e.cols);
    if (e.name == "final.norm") std::fill(e.data.begin(), e.data.end(), 0.0f);  // → logits all zero
  });
  LlamaState st(model.config());
  const auto logits = model.prefill(st, ids);
  for (float x : logits) ASSERT_EQ(x, 0.0f);
  for (int l = 0; l < 3; ++l)
    for (const char* n : {"attn.norm", "attn.q", "attn.k", "attn.v", "attn.p", "attn.ctx", "attn.out",
                          "mlp.norm", "mlp.gate", "mlp.up", "mlp.act", "mlp.out", "hidden"})
      EXPECT_TRUE(seen.count({n, l})) << n << " layer " << l;
  for (const char* n : {"embed", "final.norm", "logits"}) EXPECT_TRUE(seen.count({n, -1})) << n;
}

// Matrices are held packed (engine::PackedMatrix); for_each_weight must still hand out the HF row-major
// values, and what the visitor writes must be what the model then computes with.
TEST(Llama, ForEachWeightVisitsHfRowMajorValuesAndRepacksChanges) {
  for (const char* fx : {"llama-tiny", "qwen2-tiny", "qwen3-tiny"}) {  // tied / untied lm_head, biases
    auto m = LlamaModel::load(fixture(fx));
    const auto f = SafetensorsFile::open(fixture(fx) + "/model.safetensors");
    std::size_t visited = 0;
    m.for_each_weight([&](const std::string& name, std::span<float> w) {
      ++visited;
      const Tensor t = f.tensor(name);
      ASSERT_EQ(t.dtype, DType::float32) << fx << " " << name;
      ASSERT_EQ(t.numel(), w.size()) << fx << " " << name;
      ASSERT_EQ(0, std::memcmp(t.bytes.data(), w.data(), t.bytes.size())) << fx << " " << name;
    });
    EXPECT_EQ(visited, f.names().size()) << fx;
  }
  auto model = LlamaModel::load(fixture("qwen2-tiny"));

  // Doubling down_proj doubles mlp.out exactly (a power-of-two scale of every product and partial sum).
  const std::vector<std::int32_t> ids{3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<float> before, after;
  auto run = [&](std::vector<float>& out) {
    model.set_hook([&](const engine::TensorEvent& e) {
      if (e.name == "mlp.out" && e.layer == 1) out.assign(e.data.begin(), e.data.end());
    });
    LlamaState st(model.config());
    model.prefill(st, ids);
  };
  run(before);
  model.for_each_weight([](const std::string& name, std::span<float> w) {
    if (name == "model.layers.1.mlp.down_proj.weight")
      for (auto& x : w) x *= 2.0f;
  });
  run(after);
  ASSERT_EQ(before.size(), after.size());
  ASSERT_FALSE(before.empty());
  for (std::size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], 2.0f * before[i]) << i;
}

// ---------------------------------------------------------------------------------------------- bad input
// A copy of llama-tiny with its config edited or a tensor dropped / reshaped.
struct BadCheckpoint {
  fs::path dir = fs::temp_directory_path() / ("kc_llama_bad_" + std::to_string(::getpid()));
  BadCheckpoint() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy(fixture("llama-tiny") + "/config.json", dir / "config.json");
    fs::copy(fixture("llama-tiny") + "/model.safetensors", dir / "model.safetensors");
  }
  ~BadCheckpoint() { fs::remove_all(dir); }
  void edit_config(const std::string& from, const std::string& to) {
    std::ifstream in(dir / "config.json");
    std::string s((std::istreambuf_iterator<char>(in)), {});
    const auto at = s.find(from);
    ASSERT_NE(at, std::string::npos);
    s.replace(at, from.size(), to);
    std::ofstream(dir / "config.json") << s;
  }
  void rewrite_tensors(const std::string& drop, const std::string& reshape) {
    const auto f = SafetensorsFile::open(fixture("llama-tiny") + "/model.safetensors");
    std::vector<NamedTensor> out;
    for (const auto& n : f.names()) {
      if (n == drop) continue;
      Tensor t = f.tensor(n);
      if (n == reshape) t.shape = {t.shape[1], t.shape[0]};
      out.push_back({n, t});
    }
    write_safetensors((dir / "model.safetensors").string(), out);
  }
  std::string load_error() {
    try {
      LlamaModel::load(dir.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST(LlamaBadInput, UnsupportedArchitecture) {
  BadCheckpoint b;
  b.edit_config("\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"");
  const auto msg = b.load_error();
  EXPECT_NE(
      msg.find(
          "config.json: model_type: expected a supported architecture (llama, qwen2, qwen3), got 'gpt2'"),
      std::string::npos)
      << msg;
}

TEST(LlamaBadInput, MissingTensor) {
  BadCheckpoint b;
  b.rewrite_tensors("model.layers.1.mlp.up_proj.weight", "");
  const auto msg = b.load_error();
  EXPECT_NE(
      msg.find("tensor 'model.layers.1.mlp.up_proj.weight': expected present (llama checkpoint, shape [160, "
               "64]), got missing"),
      std::string::npos)
      << msg;
}

TEST(LlamaBadInput, WrongShape) {
  BadCheckpoint b;
  b.rewrite_tensors("", "model.layers.2.self_attn.k_proj.weight");
  const auto msg = b.load_error();
  EXPECT_NE(
      msg.find("tensor 'model.layers.2.self_attn.k_proj.weight': shape: expected [32, 64], got [64, 32]"),
      std::string::npos)
      << msg;
}

TEST(LlamaBadInput, ConfigFields) {
  BadCheckpoint b;
  b.edit_config("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3");
  EXPECT_NE(b.load_error().find("num_key_value_heads: expected a divisor of num_attention_heads 4, got 3"),
            std::string::npos);
  EXPECT_THROW(llama_config_from_hf_json("{\"model_type\": \"llama\"}", "x.json"), Error);
  EXPECT_THROW(llama_config_from_hf_json("not json", "x.json"), Error);
  EXPECT_THROW(LlamaModel::load("/nonexistent/model.gguf"), Error);
}

TEST(LlamaBadInput, TokenOutOfRange) {
  const auto model = LlamaModel::load(fixture("llama-tiny"));
  LlamaState st(model.config());
  const std::vector<std::int32_t> ids{1, 512};
  try {
    model.prefill(st, ids);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokens: token 1: expected an id in [0, 512), got 512");
  }
}

}  // namespace
}  // namespace kc
