// The Gated DeltaNet hybrids (src/model/hybrid.*) against transformers' f32 logits committed with the
// fixtures (Qwen3.5 text, Qwen3-Next dense and MoE): prefill and cached decode within 1e-4·(1+|logit|);
// prefill in blocks agrees with one piece to f32 rounding; the "gdn.state" hook is reported where the
// state is stored and its changes flow into the forward; broken checkpoints are refused naming the tensor.
#include "model/hybrid.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/parallel.h"
#include "io/safetensors.h"
#include "numeric/formats.h"
#include "model/variant.h"
#include "reference_util.h"

namespace kc {
namespace {

class HybridFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(HybridFixture, PrefillAndCachedDecodeMatchTransformers) {
  const std::string dir = fixture(GetParam());
  const auto m = load_causal_lm(dir);
  const Reference r = read_reference(dir);
  const std::size_t V = m->vocab_size();
  auto st = m->new_state();
  std::vector<float> logits(r.ids.size() * V);
  m->prefill(*st, r.ids, [&](std::size_t p0, std::size_t, std::span<const float> l) {
    std::copy(l.begin(), l.end(), logits.begin() + p0 * V);
  });
  EXPECT_LE(worst_ratio(logits, r.logits), 1.0);

  const std::size_t P = r.decode_start + 1, n = r.decode_logits.size() / V;
  auto sd = m->new_state();
  std::vector<float> dec;
  m->prefill(*sd, std::span(r.ids).first(P), [&](std::size_t p0, std::size_t rows, std::span<const float> l) {
    if (p0 + rows == P) dec.assign(l.end() - V, l.end());
  });
  for (std::size_t t = P; t < P + n - 1; ++t) {
    const auto row = m->decode(*sd, r.ids[t]);
    dec.insert(dec.end(), row.begin(), row.end());
  }
  EXPECT_LE(worst_ratio(dec, r.decode_logits), 1.0);
}

TEST_P(HybridFixture, PrefillInBlocksAgreesToF32Rounding) {
  const auto m = HybridModel::load(fixture(GetParam()));
  const Reference r = read_reference(fixture(GetParam()));
  HybridState one(m.config()), blk(m.config());
  const auto a = m.prefill(one, r.ids);
  std::vector<float> b;
  for (std::size_t i = 0; i < r.ids.size(); i += 16) {
    const auto part =
        m.prefill(blk, std::span(r.ids).subspan(i, std::min<std::size_t>(16, r.ids.size() - i)));
    b.insert(b.end(), part.begin(), part.end());
  }
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * (1 + std::abs(a[i])));
  for (std::size_t il = 0; il < one.S.size(); ++il)
    for (std::size_t i = 0; i < one.S[il].size(); ++i) ASSERT_NEAR(one.S[il][i], blk.S[il][i], 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridFixture,
                         ::testing::Values("qwen3_5-tiny", "qwen3_next-tiny-dense", "qwen3_next-tiny-moe",
                                           "qwen3_5_moe-tiny"));

// Rounding "gdn.state" (where the state is stored) leaves a one-block prefill bit-identical and changes
// what comes after the state was stored: the next prefill block and the decode steps.
TEST(Hybrid, StateHookIsWhereTheStateIsStoredAndFlowsIntoTheForward) {
  auto m = HybridModel::load(fixture("qwen3_5-tiny"));
  const Reference r = read_reference(fixture("qwen3_5-tiny"));
  const std::span<const std::int32_t> ids(r.ids);
  auto run = [&](bool round) {
    std::vector<std::string> names;
    m.set_hook([&](const engine::TensorEvent& e) {
      if (e.name.starts_with("gdn.state"))
        names.push_back(std::string(e.name) + "@" + std::to_string(e.layer));
      if (round && e.name == "gdn.state") round_mantissa_inplace(e.data.data(), e.data.size(), 4);
    });
    HybridState st(m.config());
    auto a = m.prefill(st, ids.first(40));
    auto b = m.prefill(st, ids.subspan(40, 4));
    auto c = m.decode(st, ids[44]);
    m.set_hook(nullptr);
    return std::make_tuple(a, b, c, names);
  };
  const auto [a0, b0, c0, n0] = run(false);
  const auto [a1, b1, c1, n1] = run(true);
  EXPECT_EQ(a0, a1);  // within one prefill call the state is never stored
  EXPECT_NE(b0, b1);
  EXPECT_NE(c0, c1);
  // 3 GDN layers × (end of prefill call 1, end of call 2, decode step)
  EXPECT_EQ(n0.size(), 9u);
  EXPECT_EQ(n0[0], "gdn.state@0");
}

// A prefill without a sink skips the LM head (generate's prompt) and leaves the state exactly as with one.
TEST(Hybrid, EmptySinkSkipsLogitsOnly) {
  auto m = HybridModel::load(fixture("qwen3_5-tiny"));
  const Reference r = read_reference(fixture("qwen3_5-tiny"));
  const std::span<const std::int32_t> ids(r.ids);
  HybridState full(m.config()), bare(m.config());
  std::size_t rows = 0;
  m.prefill(full, ids.first(40), [&](std::size_t, std::size_t n, std::span<const float>) { rows += n; });
  EXPECT_EQ(rows, 40u);
  bool saw_logits = false;
  m.set_hook([&](const engine::TensorEvent& e) { saw_logits |= e.name == "logits"; });
  m.prefill(bare, ids.first(40), LogitsSink{});
  m.set_hook(nullptr);
  EXPECT_FALSE(saw_logits);
  EXPECT_EQ(m.decode(full, ids[40]), m.decode(bare, ids[40]));
}

// Without a hook the prefill fuses pointwise epilogues into GEMM tiles (silu·up into gate/up, the residual
// adds into down_proj, out_proj and o_proj); with one, the same tiles and kernels run one op at a time so
// that every tensor can be reported and changed. Same bits either way, for 1, 2 and 3 threads, across a
// prefill-chunk boundary (kPrefillChunk + 88 rows) and for short pieces; qwen3_next-tiny-moe keeps its MoE
// FFN unfused.
TEST(Hybrid, FusedPrefillIsBitwiseTheHookedOneForAnyThreadCount) {
  const std::size_t n = HybridModel::kPrefillChunk + 88;
  for (const char* name : {"qwen3_5-tiny", "qwen3_next-tiny-moe"}) {
    auto m = HybridModel::load(fixture(name));
    const std::size_t V = m.config().n_vocab;
    std::vector<std::int32_t> ids(n);
    for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((i * 7919 + 101) % V);
    auto run = [&](bool hooked, int threads) {
      set_thread_count(threads);
      std::size_t events = 0;
      if (hooked) m.set_hook([&](const engine::TensorEvent&) { ++events; });
      HybridState st(m.config());
      auto out = m.prefill(st, std::span(ids).first(n - 9));
      const auto more = m.prefill(st, std::span(ids).subspan(n - 9, 7));  // a short second call
      out.insert(out.end(), more.begin(), more.end());
      const auto dec = m.decode(st, ids[n - 2]);
      out.insert(out.end(), dec.begin(), dec.end());
      m.set_hook(nullptr);
      set_thread_count(0);
      EXPECT_EQ(hooked, events > 0);
      return out;
    };
    const auto ref = run(false, 1);
    ASSERT_EQ(ref.size(), (n - 1) * V);
    for (int threads : {1, 2, 3}) {
      EXPECT_EQ(run(true, threads), ref) << name << " hooked, " << threads << " threads";
      if (threads > 1) {
        EXPECT_EQ(run(false, threads), ref) << name << " fused, " << threads << " threads";
      }
    }
  }
}

// decode_batch (the default: one sequence after another, since the hybrid's one-row GEMV rounds unlike its
// GEMM tiles) keeps each row bitwise a single decode, with and without FLA casts.
TEST(Hybrid, DecodeBatchRowsAreBitwiseSingleDecodes) {
  const std::size_t prompts[] = {4, 70, 19};
  expect_decode_batch_bitwise(HybridModel::load(fixture("qwen3_5-tiny")), prompts, 4, "qwen3_5-tiny");
  auto m = HybridModel::load(fixture("qwen3_5-tiny"));
  apply_variant(m, parse_variant("bf16+gdn=fla"));
  expect_decode_batch_bitwise(m, prompts, 4, "qwen3_5-tiny bf16+gdn=fla");
}

TEST(Hybrid, ArchitectureAndDispatch) {
  EXPECT_EQ(load_causal_lm(fixture("qwen3_5-tiny"))->architecture(), "qwen3_5");
  EXPECT_EQ(load_causal_lm(fixture("qwen3_next-tiny-moe") + "/config.json")->architecture(), "qwen3_next");
  EXPECT_EQ(load_causal_lm(fixture("llama-tiny"))->architecture(), "llama");
}

// A copy of a fixture with config.json replaced by `edit(text)`.
std::string broken(const std::string& name, const std::function<std::string(std::string)>& edit) {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("kc_hybrid_" + name + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  fs::copy_file(fixture(name) + "/model.safetensors", d / "model.safetensors");
  std::ifstream in(fixture(name) + "/config.json");
  std::string cfg((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(d / "config.json") << edit(cfg);
  return d.string();
}

void expect_error(const std::string& dir, const std::string& needle) {
  try {
    load_causal_lm(dir);
    ADD_FAILURE() << "loaded " << dir;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Hybrid, BadCheckpointsAreRefused) {
  auto replace = [](std::string from, std::string to) {
    return [=](std::string s) { return s.replace(s.find(from), from.size(), to); };
  };
  expect_error(broken("qwen3_5-tiny", replace("\"linear_attention\",\n    \"full", "\"mamba\",\n    \"full")),
               "layer_types[1]");
  expect_error(broken("qwen3_5-tiny", replace("\"linear_key_head_dim\": 16", "\"linear_key_head_dim\": 8")),
               "in_proj_qkv.weight': shape");
  expect_error(broken("qwen3_next-tiny-moe", replace("\"num_experts\": 4", "\"num_experts\": 5")),
               "mlp.gate.weight': shape");
}

}  // namespace
}  // namespace kc
