// Built-in ops: each candidate against its f64 reference, with tolerances derived from the formats
// (f32 unit roundoff u = 2^-24, standard summation error bounds), and the attention P-rounding variants
// in the order SPEC §3 expects. Scalar twins: the bounds below are computed here from the inputs, not
// taken from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/error.h"
#include "numeric/formats.h"
#include "opmode/random.h"
#include "opmode/registry.h"

namespace kc::ops {
namespace {

constexpr double kU32 = 0x1p-24;  // f32 unit roundoff

Array make_input(Shape shape, std::uint64_t seed, std::size_t index, DType round, Distribution d = {}) {
  Array a{shape, std::vector<double>(shape_numel(shape))};
  generate(d, seed, index, a.values);
  round_to(round, a.values);
  return a;
}

const OpDef& op(const char* name) {
  const OpDef* d = registry().find(name);
  EXPECT_NE(d, nullptr) << name;
  return *d;
}

TEST(Registry, BuiltinsAndDefaults) {
  auto names = registry().names();
  for (const char* n : {"attention", "cast", "matmul", "per_token_quant", "rmsnorm", "softmax"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(op("matmul").default_candidate, "f32acc");
  EXPECT_EQ(op("attention").candidates.size(), 6u);
  EXPECT_TRUE(op("per_token_quant").accepts_output(DType::int8));
  EXPECT_FALSE(op("per_token_quant").accepts_output(DType::bfloat16));
  EXPECT_FALSE(op("matmul").accepts_output(DType::int8));
  EXPECT_TRUE(op("cast").accepts_output(DType::int8));
}

TEST(Registry, AddingACandidateIsOneLine) {
  Registry r;
  register_matmul(r);
  r.add_candidate("matmul", "zeros", [](auto in, auto&, DType) {
    return Array{{in[0].shape[0], in[1].shape[1]},
                 std::vector<double>(shape_numel({in[0].shape[0], in[1].shape[1]}))};
  });
  EXPECT_EQ(r.find("matmul")->candidates.size(), 3u);
}

TEST(Registry, ShapeErrorsNameOpAndInput) {
  Params p;
  std::vector<Shape> bad = {{4, 8}, {9, 2}};
  try {
    op("matmul").output_shape(bad, p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "op matmul: input b: expected 8xN (K of a), got 9x2");
  }
  std::vector<Shape> one = {{4, 8}};
  EXPECT_THROW(op("matmul").output_shape(one, p), Error);
  std::vector<Shape> att = {{2, 16}, {32, 16}, {31, 8}};
  EXPECT_THROW(op("attention").output_shape(att, p), Error);
}

// Matmul f32 accumulation: |ĉ − c| <= γ_K · Σ_k |a_ik||b_kj| with γ_K = K·u/(1 − K·u) (Higham, Thm 3.5).
TEST(Matmul, F32AccumulationWithinTheSummationBound) {
  const std::int64_t m = 17, k = 300, n = 23;
  std::vector<Array> in = {make_input({m, k}, 1, 0, DType::bfloat16),
                           make_input({k, n}, 1, 1, DType::bfloat16)};
  Params p;
  Array ref = op("matmul").reference(in, p);
  Array cand = op("matmul").candidates.at("f32acc")(in, p, DType::bfloat16);
  const double gamma = k * kU32 / (1 - k * kU32);
  double worst_ratio = 0, bf16_worst = 0;
  Array bad = op("matmul").candidates.at("bf16acc")(in, p, DType::bfloat16);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double absdot = 0, dot = 0;
      for (std::int64_t t = 0; t < k; ++t) {
        absdot += std::fabs(in[0].values[i * k + t] * in[1].values[t * n + j]);
        dot += in[0].values[i * k + t] * in[1].values[t * n + j];
      }
      EXPECT_DOUBLE_EQ(ref.values[i * n + j], dot);
      double err = std::fabs(cand.values[i * n + j] - dot);
      EXPECT_LE(err, gamma * absdot) << i << "," << j;
      worst_ratio = std::max(worst_ratio, err / (gamma * absdot));
      bf16_worst = std::max(bf16_worst, std::fabs(bad.values[i * n + j] - dot) / (gamma * absdot));
    }
  EXPECT_GT(worst_ratio, 0.0);   // f32 is not silently f64
  EXPECT_GT(bf16_worst, 100.0);  // a bf16 accumulator breaks the f32 bound by orders of magnitude
}

// Softmax in f32: each output within a small multiple of u relative (exp, sum of N terms, divide).
TEST(Softmax, F32WithinFormatBound) {
  std::vector<Array> in = {make_input({5, 777}, 2, 0, DType::bfloat16, {Distribution::Kind::normal, 0, 3})};
  Params p;
  Array ref = op("softmax").reference(in, p);
  Array cand = op("softmax").candidates.at("f32")(in, p, DType::float32);
  for (std::size_t r = 0; r < 5; ++r) {
    double sum = 0;
    for (std::size_t j = 0; j < 777; ++j) sum += ref.values[r * 777 + j];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // exp and divide: a few u each; the sum: (N − 1)·u relative (all terms positive).
  const double bound = (777 + 8) * kU32;
  for (std::size_t i = 0; i < ref.values.size(); ++i)
    EXPECT_LE(std::fabs(cand.values[i] - ref.values[i]), bound * ref.values[i]) << i;
  Array coarse = op("softmax").candidates.at("exp_bf16")(in, p, DType::float32);
  double worst = 0;
  for (std::size_t i = 0; i < ref.values.size(); ++i)
    worst = std::max(worst, std::fabs(coarse.values[i] - ref.values[i]) / ref.values[i]);
  EXPECT_GT(worst, 0x1p-10);  // bf16 rounding of exp shows (half a bf16 ULP is 2^-9 relative)
  EXPECT_LT(worst, 0x1p-7);
}

TEST(RmsNorm, F32WithinFormatBoundAndEpsApplies) {
  std::vector<Array> in = {make_input({3, 512}, 3, 0, DType::bfloat16),
                           make_input({512}, 3, 1, DType::bfloat16)};
  Params p;
  p.values["eps"] = 1e-5;
  Array ref = op("rmsnorm").reference(in, p);
  // Independent f64 twin.
  for (std::size_t r = 0; r < 3; ++r) {
    double ss = 0;
    for (std::size_t j = 0; j < 512; ++j) ss += in[0].values[r * 512 + j] * in[0].values[r * 512 + j];
    double inv = 1 / std::sqrt(ss / 512 + 1e-5);
    for (std::size_t j = 0; j < 512; ++j)
      EXPECT_NEAR(ref.values[r * 512 + j], in[0].values[r * 512 + j] * inv * in[1].values[j], 1e-12);
  }
  Array cand = op("rmsnorm").candidates.at("f32")(in, p, DType::bfloat16);
  for (std::size_t i = 0; i < ref.values.size(); ++i)
    EXPECT_LE(std::fabs(cand.values[i] - ref.values[i]), (512 + 8) * kU32 * std::fabs(ref.values[i]) + 1e-30);
  // normed_cast rounds x·rsqrt to bf16 before ·w: error up to half a bf16 ULP (u = 2^-8 relative) per
  // element.
  Array cast = op("rmsnorm").candidates.at("normed_cast")(in, p, DType::bfloat16);
  for (std::size_t i = 0; i < ref.values.size(); ++i)
    EXPECT_LE(std::fabs(cast.values[i] - ref.values[i]),
              (0x1p-8 + 600 * kU32) * std::fabs(ref.values[i]) + 1e-30);
}

// Relative RMS error of a candidate against the reference (before the output rounding).
double rel_rms(const Array& a, const Array& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.values.size(); ++i) {
    num += (a.values[i] - ref.values[i]) * (a.values[i] - ref.values[i]);
    den += ref.values[i] * ref.values[i];
  }
  return std::sqrt(num / den);
}

std::map<std::string, double> attention_errors(std::int64_t lk, std::uint64_t seed) {
  const std::int64_t lq = 8, d = 64;
  // Scores with std ~2 make the softmax peaked, like trained models, so most p are small at long context.
  Distribution qk{Distribution::Kind::normal, 0, 1.5};
  std::vector<Array> in = {make_input({lq, d}, seed, 0, DType::bfloat16, qk),
                           make_input({lk, d}, seed, 1, DType::bfloat16, qk),
                           make_input({lk, d}, seed, 2, DType::bfloat16)};
  Params p;
  Array ref = op("attention").reference(in, p);
  std::map<std::string, double> out;
  for (auto& [name, fn] : op("attention").candidates) out[name] = rel_rms(fn(in, p, DType::bfloat16), ref);
  return out;
}

TEST(Attention, ReferenceMatchesDirectSoftmax) {
  const std::int64_t lq = 3, lk = 70, d = 16, dv = 5;
  std::vector<Array> in = {make_input({lq, d}, 9, 0, DType::bfloat16),
                           make_input({lk, d}, 9, 1, DType::bfloat16),
                           make_input({lk, dv}, 9, 2, DType::bfloat16)};
  Params p;
  p.values["causal"] = 1;
  Array ref = op("attention").reference(in, p);
  for (std::int64_t i = 0; i < lq; ++i) {
    std::int64_t nk = lk - lq + i + 1;
    std::vector<double> s(nk);
    for (std::int64_t j = 0; j < nk; ++j) {
      for (std::int64_t t = 0; t < d; ++t) s[j] += in[0].values[i * d + t] * in[1].values[j * d + t];
      s[j] /= std::sqrt(double(d));
    }
    double mx = *std::max_element(s.begin(), s.end()), z = 0;
    for (auto& v : s) z += (v = std::exp(v - mx));
    for (std::int64_t t = 0; t < dv; ++t) {
      double o = 0;
      for (std::int64_t j = 0; j < nk; ++j) o += s[j] / z * in[2].values[j * dv + t];
      EXPECT_NEAR(ref.values[i * dv + t], o, 1e-12);
    }
  }
  // The online f32 candidate with tiny blocks equals the reference to f32 accuracy.
  p.values["block"] = 7;
  Array cand = op("attention").candidates.at("p_f32")(in, p, DType::bfloat16);
  for (std::size_t i = 0; i < ref.values.size(); ++i) EXPECT_NEAR(cand.values[i], ref.values[i], 1e-5);
}

TEST(Attention, PRoundingVariantsAreOrdered) {
  auto e = attention_errors(4096, 11);
  for (auto& [k, v] : e) RecordProperty(k, std::to_string(v));
  EXPECT_LT(e["p_f32"], 1e-5);
  EXPECT_LT(e["p_f32"], e["p_f16"]);
  EXPECT_LT(e["p_f16"], e["p_bf16"]);
  EXPECT_LT(e["p_bf16"], e["p_fp8x448"]);
  EXPECT_LT(e["p_fp8x448"], e["p_fp8"]);
  EXPECT_LT(e["p_fp8x256"], e["p_fp8"]);
  // fp8 direct gets worse with context length relative to fp8 scaled by 448 (underflow of small p).
  auto s = attention_errors(256, 11);
  EXPECT_GT(e["p_fp8"] / e["p_fp8x448"], s["p_fp8"] / s["p_fp8x448"]);
}

TEST(Cast, RoundsToNearestWithinHalfUlp) {
  Array x = make_input({4000}, 5, 0, DType::float64, {Distribution::Kind::normal, 0, 10});
  std::vector<Array> in = {x};
  Params p;
  for (DType d :
       {DType::float32, DType::bfloat16, DType::float16, DType::float8_e4m3fn, DType::float8_e5m2}) {
    Array y = op("cast").candidates.at("rne")(in, p, d);
    EXPECT_EQ(op("cast").reference(in, p).values, x.values);
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      if (std::fabs(x.values[i]) > max_finite(d)) continue;
      EXPECT_LE(std::fabs(y.values[i] - x.values[i]), 0.5 * ulp(d, y.values[i]) * (1 + 1e-12))
          << dtype_name(d) << " " << x.values[i];
    }
  }
  std::vector<Array> big = {Array{{2}, {1e6, -1e6}}};
  EXPECT_EQ(op("cast").candidates.at("saturate")(big, p, DType::float8_e4m3fn).values,
            (std::vector<double>{448, -448}));
}

// per_token_quant: q = round(x / (max|x|/127)); recompute in f64 here and check the candidates.
TEST(PerTokenQuant, ReferenceAndCandidatesWithinOneLsb) {
  std::vector<Array> in = {make_input({32, 300}, 6, 0, DType::bfloat16)};
  Params p;
  Array ref = op("per_token_quant").reference(in, p);
  for (std::size_t r = 0; r < 32; ++r) {
    double amax = 0;
    for (std::size_t j = 0; j < 300; ++j) amax = std::max(amax, std::fabs(in[0].values[r * 300 + j]));
    bool has127 = false;
    for (std::size_t j = 0; j < 300; ++j) {
      double q = std::nearbyint(in[0].values[r * 300 + j] / (amax / 127));
      EXPECT_EQ(ref.values[r * 300 + j], q);
      has127 |= std::fabs(q) == 127;
    }
    EXPECT_TRUE(has127);
  }
  std::size_t flips = 0;
  for (auto& [name, fn] : op("per_token_quant").candidates) {
    Array c = fn(in, p, DType::int8);
    for (std::size_t i = 0; i < ref.values.size(); ++i) {
      EXPECT_LE(std::fabs(c.values[i] - ref.values[i]), 1.0) << name;
      if (name == "scale_f16") flips += c.values[i] != ref.values[i];
    }
  }
  EXPECT_GT(flips, 0u);  // the f16 scale does move some elements by one LSB
}

TEST(Random, SplitMix64KnownSequence) {
  // Reference outputs of SplitMix64 (Vigna's splitmix64.c) for seed 1234567.
  SplitMix64 r(1234567);
  EXPECT_EQ(r.next(), 6457827717110365317ull);
  EXPECT_EQ(r.next(), 3203168211198807973ull);
  EXPECT_EQ(r.next(), 9817491932198370423ull);
}

TEST(Random, SameSeedSameValuesAndMoments) {
  std::vector<double> a(10001), b(10001), c(10001);
  Distribution n{Distribution::Kind::normal, 2, 3};
  generate(n, 42, 0, a);
  generate(n, 42, 0, b);
  generate(n, 42, 1, c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = std::accumulate(a.begin(), a.end(), 0.0) / a.size(), var = 0;
  for (double v : a) var += (v - mean) * (v - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 2, 5 * 3 / std::sqrt(10001.0));
  EXPECT_NEAR(var, 9, 9 * 5 * std::sqrt(2.0 / 10001));
  std::vector<double> u(1000);
  generate({Distribution::Kind::uniform, -2, 5}, 7, 0, u);
  for (double v : u) EXPECT_TRUE(v >= -2 && v < 5);
}

TEST(Random, ParseDistribution) {
  auto d = parse_distribution(" uniform( -1 , 2.5 ) ", "dist");
  EXPECT_EQ(d.kind, Distribution::Kind::uniform);
  EXPECT_EQ(d.a, -1);
  EXPECT_EQ(d.b, 2.5);
  EXPECT_EQ(parse_distribution("normal", "dist").b, 1);
  EXPECT_EQ(parse_distribution("const(3)", "dist").a, 3);
  for (const char* bad : {"normal(0)", "normal(0,-1)", "uniform(2,1)", "poisson(3)", "normal(0,1",
                          "normal(a,b)", "normal(0,inf)", ""})
    EXPECT_THROW(parse_distribution(bad, "dist"), Error) << bad;
}

}  // namespace
}  // namespace kc::ops
