// The lab's precision variants (src/model/variant.h, docs/lab.md): syntax and canonical form, bad input,
// P rounding against per-element codec calls over every e4m3 code, and apply_variant on a real model (the
// llama-tiny fixture): bf16 weights, which tensors the hook rounds and how, round: terms, usage checks.
#include "model/variant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc {
namespace {

std::string canon(std::string_view s) { return to_string(parse_variant(s)); }

TEST(VariantParse, CanonicalForm) {
  EXPECT_EQ(canon(""), "f32");
  EXPECT_EQ(canon("f32"), "f32");
  EXPECT_EQ(canon("bf16"), "bf16");
  EXPECT_EQ(canon("p=fp8x448+bf16+round:mlp.out=5"), "bf16+p=fp8x448+round:mlp.out=5");
  EXPECT_EQ(canon("round:mlp.out=5+p=fp8x448+bf16"), "bf16+p=fp8x448+round:mlp.out=5");
  EXPECT_EQ(canon("bf16+attn=flash"), "attn=flash+bf16");
  EXPECT_EQ(canon("gdn=fla+bf16"), "bf16+gdn=fla");
  EXPECT_EQ(canon("gdn=f32"), "f32");
  EXPECT_EQ(canon("bf16+p=f32+attn=exact+kv=f32"), "bf16");  // defaults drop out
  EXPECT_EQ(canon("f32+p=bf16"), "p=bf16");
  EXPECT_EQ(canon("kv=fp8+bf16"), "bf16+kv=fp8");
  EXPECT_EQ(canon("kv=e4m3"), "kv=fp8");
  EXPECT_EQ(canon("kv=e5m2"), "kv=float8_e5m2");
  EXPECT_EQ(canon("kv=bfloat16"), "kv=bf16");
  EXPECT_EQ(canon("round:hidden=7+round:attn.out@12=3+round:attn.out@3=4"),
            "round:attn.out@12=3+round:attn.out@3=4+round:hidden=7");
  EXPECT_EQ(canon("round:gdn.state=23"), "round:gdn.state=23");  // a sweep's end point stays visible
  EXPECT_EQ(canon("order=3+bf16"), "bf16+order=3");
  EXPECT_EQ(canon("order=0"), "f32");
  EXPECT_EQ(canon("bf16+order=0+attn=flash"), "attn=flash+bf16");
  EXPECT_EQ(canon("p=fp8+order=2+bf16"), "bf16+order=2+p=fp8");
  EXPECT_EQ(canon("logits=bf16+bf16+order=1"), "bf16+logits=bf16+order=1");
  EXPECT_EQ(canon("logits=f32"), "f32");
  EXPECT_EQ(canon("logits=f16"), "logits=f16");
  EXPECT_EQ(canon("bug:kv_k=4+bf16"), "bf16+bug:kv_k=4");
  EXPECT_EQ(canon("bug:attn_scale=0.020+bug:deep_score=-0.5+bf16"),
            "bf16+bug:attn_scale=0.02+bug:deep_score=-0.5");
  // The depth bug's start: written when it is not the default 256, dropped when it is.
  EXPECT_EQ(canon("bug:deep_score@1500=0.50+bf16"), "bf16+bug:deep_score@1500=0.5");
  EXPECT_EQ(canon("bug:deep_score@256=0.5"), "bug:deep_score=0.5");
  EXPECT_EQ(canon(canon("bf16+bug:deep_score@2048=-1")), "bf16+bug:deep_score@2048=-1");
  EXPECT_EQ(parse_variant("bug:deep_score@1500=0.5").bugs[0].from, 1500);
  EXPECT_EQ(parse_variant("bug:deep_score=0.5").bugs[0].from, -1);
  for (const char* s :
       {"bf16+p=fp8x256+kv=f16+attn=flash+round:attn.out@2=9", "p=fp8", "p=f16+round:x_y.z=0"})
    EXPECT_EQ(canon(canon(s)), canon(s)) << s;
}

TEST(VariantParse, Fields) {
  Variant v = parse_variant("round:attn.out@3=7+bf16+p=fp8+kv=f16+attn=flash");
  EXPECT_TRUE(v.bf16_base);
  EXPECT_EQ(v.p, "fp8");
  EXPECT_EQ(v.kv, DType::float16);
  EXPECT_EQ(v.attention, engine::AttentionKernel::flash);
  ASSERT_EQ(v.round.size(), 1u);
  EXPECT_EQ(v.round[0].name, "attn.out");
  EXPECT_EQ(v.round[0].layer, 3);
  EXPECT_EQ(v.round[0].bits, 7);
  EXPECT_EQ(parse_variant("round:hidden=0").round[0].layer, -1);
}

TEST(VariantParse, IsReference) {
  for (const char* s : {"", "f32", "p=f32", "attn=exact", "kv=f32", "round:attn.out=23"})
    EXPECT_TRUE(parse_variant(s).is_reference()) << s;
  for (const char* s : {"bf16", "p=bf16", "attn=flash", "kv=bf16", "round:attn.out=22", "order=1", "logits=bf16",
                        "bug:norm_eps=10"})
    EXPECT_FALSE(parse_variant(s).is_reference()) << s;
}

TEST(VariantParse, BadInputNamesFieldAndTerm) {
  const std::pair<const char*, const char*> bad[] = {
      {"bf16+", "empty term"},
      {"+bf16", "empty term"},
      {"p=fp4", "unknown P precision"},
      {"order=-1", "SEED must be an integer"},
      {"order=x", "SEED must be an integer"},
      {"order=", "SEED must be an integer"},
      {"order=1+order=2", "order= given twice"},
      {"logits=fp8", "unknown logits dtype"},
      {"bug:nope=1", "unknown bug 'nope'"},
      {"bug:kv_k", "missing =STRENGTH"},
      {"bug:kv_k=23", "mantissa width"},
      {"bug:kv_k=3.5", "mantissa width"},
      {"bug:gemm_acc=0", "integer ≥ 1"},
      {"bug:attn_scale=0", "real number ≠ 0"},
      {"bug:attn_scale=abc", "real number ≠ 0"},
      {"bug:norm_eps=1", "factor > 0"},
      {"bug:kv_k=3+bug:kv_k=4", "given twice"},
      {"bug:deep_score@=0.5", "start depth D after '@'"},
      {"bug:deep_score@0=0.5", "start depth D after '@'"},
      {"bug:deep_score@-5=0.5", "start depth D after '@'"},
      {"bug:deep_score@1.5=0.5", "start depth D after '@'"},
      {"bug:deep_score@2147483649=0.5", "start depth D after '@'"},
      {"bug:kv_k@100=3", "no start depth"},
      {"bug:deep_score@300=0.5+bug:deep_score=0.1", "given twice"},
      {"gdn=bf16", "unknown GDN prefill"},
      {"gdn=fla+gdn=f32", "gdn= given twice"},
      {"p=", "unknown P precision"},
      {"round:attn.out=24", "BITS must be an integer 0…23"},
      {"round:attn.out=-1", "BITS must be an integer 0…23"},
      {"round:attn.out=5x", "BITS must be an integer 0…23"},
      {"round:attn.out", "missing =BITS"},
      {"round:=3", "NAME must be a hook name"},
      {"round:attn out=3", "NAME must be a hook name"},
      {"round:attn.out@x=3", "LAYER after '@'"},
      {"round:attn.out@-2=3", "LAYER after '@'"},
      {"round:attn.out=3+round:attn.out=4", "rounded twice"},
      {"bf16+bf16", "given twice"},
      {"p=bf16+p=fp8", "p= given twice"},
      {"kv=int8", "float dtype"},
      {"kv=e8m0", "float dtype"},
      {"kv=nope", "float dtype"},
      {"attn=fast", "unknown attention kernel"},
      {"fp16", "unknown term"},
      {"f32+bf16", "expected one base (f32 or bf16), got both"},
  };
  for (const auto& [spec, why] : bad) {
    try {
      parse_variant(spec, "--my-flag");
      ADD_FAILURE() << spec << " was accepted";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--my-flag: '"), std::string::npos) << m;
      EXPECT_NE(m.find(why), std::string::npos) << spec << ": " << m;
    }
  }
}

// ---------------------------------------------------------------------------------------- P rounding
// Inputs covering every e4m3 code in [0, 1]: each code's value, the midpoints between neighbours (ties to
// even), values just either side of the midpoints, and random p; checked against encode8/decode8 per element.
std::vector<float> p_inputs() {
  std::vector<double> codes;
  for (int c = 0; c < 0x7F; ++c) {
    const double v = decode8(DType::float8_e4m3fn, static_cast<std::uint8_t>(c));
    if (v <= 1.0) codes.push_back(v);
  }
  std::vector<float> x;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    x.push_back(static_cast<float>(codes[i]));
    if (i + 1 < codes.size()) {
      const float mid = static_cast<float>((codes[i] + codes[i + 1]) / 2);
      x.push_back(mid), x.push_back(std::nextafter(mid, 0.0f)), x.push_back(std::nextafter(mid, 2.0f));
      // The same points scaled by 1/448 and 1/256, so that p·s hits every code and midpoint.
      for (float s : {448.0f, 256.0f}) x.push_back(static_cast<float>(codes[i] / s)), x.push_back(mid / s);
    }
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 4000; ++i) {
    const float r = u(rng);
    x.push_back(r), x.push_back(r * r * r * r);  // many small p, where fp8 direct underflows
  }
  x.push_back(0.0f), x.push_back(1.0f);
  return x;
}

TEST(VariantP, MatchesPerElementCodecs) {
  const std::vector<float> x = p_inputs();
  const auto e4m3 = [](double v) { return decode8(DType::float8_e4m3fn, encode8(DType::float8_e4m3fn, v)); };
  for (const char* p : {"f32", "bf16", "f16", "fp8", "fp8x448", "fp8x256"}) {
    std::vector<float> got = x;
    round_attention_p(p, got.data(), got.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::string_view ps = p;
      float want = x[i];
      if (ps == "bf16") want = bf16_to_f32(f32_to_bf16(x[i]));
      if (ps == "f16") want = f16_to_f32(f32_to_f16(x[i]));
      if (ps == "fp8") want = static_cast<float>(e4m3(x[i]));
      if (ps == "fp8x448")
        want = static_cast<float>(e4m3(x[i] * 448.0f)) / 448.0f;  // f32 product, as the seed
      if (ps == "fp8x256") want = static_cast<float>(e4m3(x[i] * 256.0f)) / 256.0f;
      ASSERT_EQ(got[i], want) << p << " x = " << x[i];
    }
  }
}

// The seed's reason for scaling: e4m3's smallest subnormal is 2^-9 ≈ 0.00195, so direct fp8 flushes
// p < 2^-10 to zero, while ×448 keeps p down to ~2^-10/448 ≈ 2.2e-6.
TEST(VariantP, DirectFp8UnderflowsScaledDoesNot) {
  float a[] = {0.0009f, 0.0011f, 3e-6f}, b[] = {0.0009f, 0.0011f, 3e-6f};
  round_attention_p("fp8", a, 3);
  round_attention_p("fp8x448", b, 3);
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_EQ(a[1], std::ldexp(1.0f, -9));
  EXPECT_EQ(a[2], 0.0f);
  EXPECT_GT(b[0], 0.0f);
  EXPECT_NEAR(b[0], 0.0009f, 0.0009f / 16);  // 3 mantissa bits: relative error ≤ 2^-4
  EXPECT_GT(b[2], 0.0f);
}

// ---------------------------------------------------------------------------------------- apply_variant
std::string tiny() { return std::string(KC_TEST_DATA) + "/fixtures/llama-tiny"; }

const std::vector<std::int32_t> kTokens = {1,  17, 300, 42,  99, 5,  411, 250, 8, 77,
                                           63, 2,  128, 256, 3,  90, 31,  500, 7, 44};

std::vector<float> logits_of(const CausalLM& m) {
  auto st = m.new_state();
  std::vector<float> out;
  m.prefill(*st, kTokens, [&](std::size_t, std::size_t, std::span<const float> lg) {
    out.insert(out.end(), lg.begin(), lg.end());
  });
  std::vector<float> d = m.decode(*st, 11);
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

bool is_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)) == x; }
bool is_e4m3(float x) {
  return decode8(DType::float8_e4m3fn, encode8(DType::float8_e4m3fn, x)) == static_cast<double>(x);
}
int mantissa_bits_used(float x) {  // trailing zero bits of the 23-bit fraction → bits in use
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0x7FFFFF;
  if (u == 0) return 0;
  int tz = 0;
  while (!(u & 1)) u >>= 1, ++tz;
  return 23 - tz;
}

TEST(VariantApply, ReferenceIsBitwiseThePlainEngine) {
  auto a = load_causal_lm(tiny()), b = load_causal_lm(tiny());
  apply_variant(*b, parse_variant("f32"));
  EXPECT_EQ(logits_of(*a), logits_of(*b));
  apply_variant(*b, parse_variant("round:hidden=23+p=f32"));  // no-op terms: a hook that changes nothing
  EXPECT_EQ(logits_of(*a), logits_of(*b));
}

TEST(VariantApply, Bf16RoundsEveryWeightOnce) {
  auto a = load_causal_lm(tiny()), b = load_causal_lm(tiny());
  std::map<std::string, std::vector<float>> orig;
  a->for_each_weight([&](const std::string& n, std::span<float> w) { orig[n].assign(w.begin(), w.end()); });
  apply_variant(*b, parse_variant("bf16"));
  std::size_t tensors = 0, changed = 0;
  b->for_each_weight([&](const std::string& n, std::span<float> w) {
    ++tensors;
    const auto& o = orig.at(n);
    ASSERT_EQ(o.size(), w.size()) << n;
    for (std::size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(w[i], bf16_to_f32(f32_to_bf16(o[i]))) << n << "[" << i << "]";
      changed += w[i] != o[i];
    }
  });
  EXPECT_EQ(tensors, orig.size());
  EXPECT_GT(changed, 1000u);  // the fixture's weights are f32: most change
}

// What the inner hook sees after the variant's rounding, per name.
struct Seen {
  std::mutex mu;
  std::map<std::string, std::size_t> total, bf16, e4m3;
  std::map<std::pair<std::string, int>, int> max_bits;
  engine::TensorHook hook() {
    return [this](const engine::TensorEvent& ev) {
      std::size_t nb = 0, ne = 0;
      int mb = 0;
      for (float x : ev.data) nb += is_bf16(x), ne += is_e4m3(x), mb = std::max(mb, mantissa_bits_used(x));
      std::lock_guard<std::mutex> g(mu);
      const std::string n(ev.name);
      total[n] += ev.data.size(), bf16[n] += nb, e4m3[n] += ne;
      auto& m = max_bits[{n, ev.layer}];
      m = std::max(m, mb);
    };
  }
};

TEST(VariantApply, HookRoundsActivationsPAndKv) {
  auto m = load_causal_lm(tiny());
  Seen s;
  apply_variant(*m, parse_variant("bf16+p=fp8x448+kv=fp8"), s.hook());
  logits_of(*m);
  for (const char* n : {"embed", "attn.norm", "attn.q", "attn.ctx", "attn.out", "mlp.norm", "mlp.gate",
                        "mlp.up", "mlp.act", "mlp.out", "hidden", "final.norm"}) {
    ASSERT_GT(s.total[n], 0u) << n;
    EXPECT_EQ(s.bf16[n], s.total[n]) << n << " not all bf16";
  }
  // K and V: bf16 first, then e4m3 (saturating) as they enter the cache.
  for (const char* n : {"attn.k", "attn.v"}) EXPECT_EQ(s.e4m3[n], s.total[n]) << n;
  // P itself: see PRoundingIsIdempotentOnWhatTheHookLeaves.
  EXPECT_LT(s.bf16["logits"], s.total["logits"]);  // logits stay f32
  EXPECT_LT(s.bf16["attn.p"], s.total["attn.p"]);  // p is not bf16-rounded by the base
}

TEST(VariantApply, PRoundingIsIdempotentOnWhatTheHookLeaves) {
  for (const char* p : {"bf16", "f16", "fp8", "fp8x448", "fp8x256"}) {
    auto m = load_causal_lm(tiny());
    std::mutex mu;
    std::size_t n = 0, bad = 0;
    const std::string ps = p;
    apply_variant(*m, parse_variant(std::string("p=") + p), [&](const engine::TensorEvent& ev) {
      if (ev.name != "attn.p") return;
      std::vector<float> again(ev.data.begin(), ev.data.end());
      round_attention_p(ps, again.data(), again.size());
      std::lock_guard<std::mutex> g(mu);
      n += again.size();
      for (std::size_t i = 0; i < again.size(); ++i) bad += again[i] != ev.data[i];
    });
    logits_of(*m);
    EXPECT_GT(n, 0u) << p;
    EXPECT_EQ(bad, 0u) << p;
  }
}

TEST(VariantApply, RoundTermsHitTheirTensorAndLayerOnly) {
  auto m = load_causal_lm(tiny());
  Seen s;
  apply_variant(*m, parse_variant("round:mlp.out@1=5+round:attn.ctx=2"), s.hook());
  logits_of(*m);
  EXPECT_LE((s.max_bits[{"mlp.out", 1}]), 5);
  EXPECT_GT((s.max_bits[{"mlp.out", 0}]), 5);
  EXPECT_GT((s.max_bits[{"mlp.out", 2}]), 5);
  for (int l = 0; l < 3; ++l) EXPECT_LE((s.max_bits[{"attn.ctx", l}]), 2) << l;
  EXPECT_GT((s.max_bits[{"attn.out", 0}]), 5);
}

TEST(VariantApply, FlashIsCloseButNotBitwise) {
  auto a = load_causal_lm(tiny()), b = load_causal_lm(tiny());
  apply_variant(*b, parse_variant("attn=flash"));
  const auto la = logits_of(*a), lb = logits_of(*b);
  double d = 0, n = 0;
  for (std::size_t i = 0; i < la.size(); ++i)
    d += std::pow(double(la[i]) - lb[i], 2), n += double(la[i]) * la[i];
  EXPECT_LT(std::sqrt(d / n), 1e-5);
  EXPECT_NE(la, lb);
}

// gdn=fla switches the hybrid's chunked prefill to FLA's bf16 casts (logits move, a little); on a model
// without GDN layers it changes nothing.
TEST(VariantApply, GdnFlaCastsReachTheHybridOnly) {
  std::vector<std::int32_t> toks(150);
  for (std::size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<std::int32_t>((i * 37 + 5) % 200);
  auto run = [&](const CausalLM& m) {  // prefill of 150 tokens: three 64-token chunks
    auto st = m.new_state();
    std::vector<float> out;
    m.prefill(*st, toks, [&](std::size_t, std::size_t, std::span<const float> lg) {
      out.insert(out.end(), lg.begin(), lg.end());
    });
    return out;
  };
  const std::string hybrid = std::string(KC_TEST_DATA) + "/fixtures/qwen3_5-tiny";
  auto a = load_causal_lm(hybrid), b = load_causal_lm(hybrid);
  apply_variant(*b, parse_variant("gdn=fla"));
  const auto la = run(*a), lb = run(*b);
  double d = 0, n = 0;
  for (std::size_t i = 0; i < la.size(); ++i)
    d += std::pow(double(la[i]) - lb[i], 2), n += double(la[i]) * la[i];
  EXPECT_GT(std::sqrt(d / n), 1e-6);  // bf16 casts: far above f32 rounding
  EXPECT_LT(std::sqrt(d / n), 1e-1);
  auto c = load_causal_lm(tiny()), e = load_causal_lm(tiny());
  apply_variant(*e, parse_variant("gdn=fla"));
  EXPECT_EQ(logits_of(*c), logits_of(*e));
}

// order=SEED: other summation orders, same precision, on the Llama and the hybrid engine: close to f32
// rounding, bitwise different between seeds, seed 0 bitwise the default, the same bits for any thread count.
std::vector<std::int32_t> long_tokens(std::size_t n, std::int32_t vocab) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::int32_t>((i * 37 + 5) % vocab);
  return t;
}
// Prefill logits of toks, then 3 decode steps.
std::vector<float> run_long(const CausalLM& m, const std::vector<std::int32_t>& toks) {
  auto st = m.new_state();
  std::vector<float> out;
  m.prefill(*st, toks, [&](std::size_t, std::size_t, std::span<const float> lg) {
    out.insert(out.end(), lg.begin(), lg.end());
  });
  for (std::int32_t t : {3, 9, 27}) {
    const auto d = m.decode(*st, t);
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::pow(double(a[i]) - b[i], 2), n += double(b[i]) * b[i];
  return std::sqrt(d / n);
}

TEST(VariantApply, OrderSeedsAreEquallyCorrectImplementations) {
  const std::string hybrid = std::string(KC_TEST_DATA) + "/models/hybrid-tiny";
  for (const std::string& path : {tiny(), hybrid}) {
    const auto toks = long_tokens(300, 200);
    auto run = [&](const std::string& v, int threads) {
      set_thread_count(threads);
      auto m = load_causal_lm(path);
      apply_variant(*m, parse_variant(v));
      auto out = run_long(*m, toks);
      set_thread_count(0);
      return out;
    };
    const auto d = run("f32", 2), z = run("order=0", 2), s1 = run("order=1", 2), s2 = run("order=2", 2);
    EXPECT_EQ(d, z) << path;
    EXPECT_NE(s1, d) << path;
    EXPECT_NE(s1, s2) << path;
    EXPECT_LT(rel_err(s1, d), 1e-5) << path;  // f32 rounding of other sums
    EXPECT_LT(rel_err(s2, d), 1e-5) << path;
    EXPECT_EQ(run("order=1", 1), s1) << path;
    EXPECT_EQ(run("order=1", 3), s1) << path;
    // on the bf16 base: bf16 noise between seeds (activations rounded after other sums), same bits per seed
    const auto b = run("bf16", 2), b3 = run("bf16+order=3", 2), b4 = run("bf16+order=4+attn=flash", 2);
    EXPECT_NE(b3, b) << path;
    EXPECT_NE(b3, b4) << path;
    EXPECT_LT(rel_err(b3, b), 5e-2) << path;
    EXPECT_LT(rel_err(b4, b), 5e-2) << path;
    EXPECT_EQ(run("bf16+order=3", 1), b3) << path;
    EXPECT_EQ(run("bf16+order=3", 3), b3) << path;
  }
}

TEST(VariantApply, LogitsBf16RoundsTheLogitsOnly) {
  auto a = load_causal_lm(tiny()), b = load_causal_lm(tiny());
  apply_variant(*b, parse_variant("logits=bf16"));
  const auto la = logits_of(*a), lb = logits_of(*b);
  for (std::size_t i = 0; i < la.size(); ++i) ASSERT_EQ(lb[i], bf16_to_f32(f32_to_bf16(la[i]))) << i;
}

// Each bug changes the bf16 engine's logits; the depth bug only past key 256, the decode bug only in decode.
TEST(VariantApply, BugsChangeLogitsWhereTheyLive) {
  const auto toks = long_tokens(300, 200);
  auto run = [&](const std::string& v) {
    auto m = load_causal_lm(tiny());
    apply_variant(*m, parse_variant(v));
    return run_long(*m, toks);
  };
  const auto base = run("bf16");
  const std::size_t V = base.size() / (toks.size() + 3);
  for (const char* bug : {"attn_scale=0.05", "deep_score=0.05", "kv_k=3", "kv_v=3", "decode_kv=2", "rope=8",
                          "norm_rsqrt=5", "norm_eps=10000", "gemm_acc=16", "silu=4", "logits_scale=0.05"}) {
    const auto x = run(std::string("bf16+bug:") + bug);
    EXPECT_NE(x, base) << bug;
    EXPECT_TRUE(std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); })) << bug;
    const bool same_first_256 = std::equal(x.begin(), x.begin() + 256 * V, base.begin());
    const bool same_prefill = std::equal(x.begin(), x.begin() + toks.size() * V, base.begin());
    if (std::string(bug).rfind("deep_score", 0) == 0) {
      EXPECT_TRUE(same_first_256) << bug;
      EXPECT_FALSE(same_prefill) << bug;
    } else if (std::string(bug).rfind("decode_kv", 0) == 0) {
      EXPECT_TRUE(same_prefill) << bug;
    } else {
      EXPECT_FALSE(same_first_256) << bug;
    }
  }
}

// bug:deep_score@D=S acts from key position D on in every attention kernel (exact grouped prefill, exact
// per head under order=, flash, decode): the logits of positions before D are the bf16 engine's bits, the
// position at D (its own key is the first one scaled) and every later one differ.
TEST(VariantApply, DeepBugStartsAtItsDepth) {
  const auto toks = long_tokens(300, 200);
  for (const std::string base : {"bf16", "bf16+order=3", "bf16+attn=flash"}) {
    auto run = [&](const std::string& v) {
      auto m = load_causal_lm(tiny());
      apply_variant(*m, parse_variant(v));
      return run_long(*m, toks);
    };
    const auto ref = run(base);
    const std::size_t V = ref.size() / (toks.size() + 3);
    for (std::size_t D : {100, 150, 299}) {
      const auto x = run(base + "+bug:deep_score@" + std::to_string(D) + "=0.5");
      const auto row_same = [&](std::size_t i) {
        return std::equal(x.begin() + i * V, x.begin() + (i + 1) * V, ref.begin() + i * V);
      };
      for (std::size_t i = 0; i < D; ++i) ASSERT_TRUE(row_same(i)) << base << " D " << D << " row " << i;
      for (std::size_t i = D; i < toks.size() + 3; ++i) EXPECT_FALSE(row_same(i)) << base << " D " << D << " row " << i;
    }
  }
}

TEST(VariantApply, UnmatchedRoundTermAndBadLayerAreErrors) {
  auto m = load_causal_lm(tiny());
  auto usage = apply_variant(*m, parse_variant("round:mlp.otu=5"));
  usage->check();  // nothing seen yet: nothing to say
  logits_of(*m);
  try {
    usage->check("--round");
    ADD_FAILURE() << "an unmatched round: term passed";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("--round: round:mlp.otu=5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mlp.out"), std::string::npos) << msg;  // lists the names the model has
  }
  auto ok = apply_variant(*m, parse_variant("round:mlp.out@2=5"));
  logits_of(*m);
  ok->check();
  EXPECT_THROW(apply_variant(*m, parse_variant("round:mlp.out@3=5")), Error);  // 3 layers: 0 … 2
}

}  // namespace
}  // namespace kc
