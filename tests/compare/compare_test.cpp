// Routing priority (incl. the quant exception), spec parsing and its errors, special values, reports.
// The formulas themselves are checked against numpy in tests/py/test_compare_methods.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "compare/report.h"
#include "compare/spec.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/tensor.h"

namespace kc {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(std::vector<double> v, std::string name = "<t>") {
  return make_tensor_f64(DType::float32, {static_cast<std::int64_t>(v.size())}, v, name);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// --- routing ---------------------------------------------------------------------------------------------

TEST(Route, PriorityCliOverSpecOverAutoOverDefault) {
  RouteRequest r;
  r.output_dtype = DType::bfloat16;
  EXPECT_EQ(route(r).method, Method::mixed);
  EXPECT_EQ(route(r).source, "default");
  r.output_dtype = DType::int32;
  EXPECT_EQ(route(r).method, Method::binary);
  EXPECT_EQ(route(r).source, "auto: int32 → binary");
  r.spec_method = Method::stat_rel_err;
  r.spec_where = "s.toml [add.int32]";
  EXPECT_EQ(route(r).method, Method::stat_rel_err);
  EXPECT_EQ(route(r).source, "s.toml [add.int32]");
  r.cli_method = Method::cosine;
  EXPECT_EQ(route(r).method, Method::cosine);
  EXPECT_EQ(route(r).source, "--compare");
}

TEST(Route, AutomaticByDtype) {
  const std::pair<DType, Method> cases[] = {
      {DType::hifloat8, Method::requant}, {DType::float4_e2m1, Method::binary}, {DType::int4, Method::binary},
      {DType::float8_e8m0, Method::binary}, {DType::uint8, Method::binary},    {DType::boolean, Method::binary},
      {DType::int64, Method::binary},     {DType::float8_e4m3fn, Method::mixed}, {DType::float8_e5m2, Method::mixed},
      {DType::float16, Method::mixed},    {DType::hifloat32, Method::mixed},    {DType::float64, Method::mixed}};
  for (auto [d, m] : cases) {
    RouteRequest r;
    r.output_dtype = d;
    EXPECT_EQ(route(r).method, m) << dtype_name(d);
  }
}

TEST(Route, QuantOnlyFromSpecAndNotOverriddenByFloatMethods) {
  RouteRequest r;
  r.output_dtype = DType::int8;
  r.cli_method = Method::quant;
  EXPECT_NE(error_of([&] { route(r); }).find("quant is declared only in a spec"), std::string::npos);

  r.cli_method.reset();
  r.spec_method = Method::quant;
  r.spec_where = "q.toml [per_token_quant.int8]";
  r.input_dtypes = {DType::bfloat16, DType::float32};
  r.spec_tol.ptol = 0.001;
  Route rt = route(r);
  EXPECT_EQ(rt.method, Method::quant);
  EXPECT_EQ(*rt.tol.ptol, 0.001);
  for (Method m : {Method::mixed, Method::stat_rel_err, Method::close, Method::cosine, Method::requant}) {
    r.cli_method = m;
    EXPECT_EQ(route(r).method, Method::quant) << method_name(m);
    EXPECT_NE(route(r).source.find("quant kept over --compare"), std::string::npos);
  }
  r.cli_method = Method::binary;  // exact comparison may still be forced
  EXPECT_EQ(route(r).method, Method::binary);

  r.cli_method.reset();
  r.input_dtypes = {DType::int8};
  EXPECT_NE(error_of([&] { route(r); }).find("at least one floating input"), std::string::npos);
  r.input_dtypes = {DType::float32};
  r.output_dtype = DType::int32;
  EXPECT_NE(error_of([&] { route(r); }).find("int4 or int8"), std::string::npos);
}

TEST(Route, SpecOverridesAndCsvFields) {
  RouteRequest r;
  r.output_dtype = DType::float16;
  r.spec_method = Method::mixed;
  r.spec_tol.rtol = 0.004;
  r.csv_tol.rtol = 0.5;  // mixed does not read the CSV fields
  EXPECT_EQ(*route(r).tol.rtol, 0.004);
  r.cli_method = Method::close;  // close reads the CSV (rtol, ptol) and atol, not the mixed spec
  r.csv_tol.ptol = 0.01;
  r.csv_tol.atol = 1e-5;
  Route rt = route(r);
  EXPECT_EQ(*rt.tol.rtol, 0.5);
  EXPECT_EQ(*rt.tol.atol, 1e-5);
  r.cli_method = Method::cosine;  // cosine reads only rtol
  rt = route(r);
  EXPECT_EQ(*rt.tol.rtol, 0.5);
  EXPECT_FALSE(rt.tol.atol.has_value());
}

TEST(Route, MethodDtypeCombinationsRefused) {
  RouteRequest r;
  r.output_dtype = DType::float64;
  r.cli_method = Method::cross_check;
  EXPECT_NE(error_of([&] { route(r); }).find("float16, bfloat16 or float32"), std::string::npos);
  r.cli_method = Method::requant;
  EXPECT_NE(error_of([&] { route(r); }).find("8-bit"), std::string::npos);
}

TEST(Method, NamesRoundTrip) {
  for (auto m : {Method::mixed, Method::stat_rel_err, Method::close, Method::cosine, Method::binary, Method::requant,
                 Method::quant, Method::cross_check})
    EXPECT_EQ(parse_method(method_name(m)), m);
  EXPECT_EQ(parse_spec_standard("mix_tolerance"), Method::mixed);
  EXPECT_EQ(parse_spec_standard("binary_equal"), Method::binary);
  EXPECT_FALSE(parse_method("mix_tolerance").has_value());
  EXPECT_FALSE(parse_spec_standard("fuzzy").has_value());
}

// --- spec ---------------------------------------------------------------------------------------------------

TEST(Spec, ParsesTablesAndOverrides) {
  Spec s = parse_spec(R"(
[matmul.bfloat16]
standard = "mix_tolerance"
rtol = 0.004
atol = 1
[matmul.float32]
standard = "stat_rel_err"
threshold = 0.002
[add.bfloat16]
standard = "cross_check"
level = "L2"
[per_token_quant.int8]
standard = "quant"
ptol = 0.001
)",
                      "s.toml");
  ASSERT_EQ(s.entries.size(), 4u);
  const SpecEntry* e = s.find("matmul", DType::bfloat16);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->method, Method::mixed);
  EXPECT_EQ(*e->tol.rtol, 0.004);
  EXPECT_EQ(*e->tol.atol, 1.0);
  EXPECT_EQ(e->where, "s.toml [matmul.bfloat16]");
  EXPECT_EQ(*s.find("matmul", DType::float32)->tol.threshold, 0.002);
  EXPECT_EQ(*s.find("add", DType::bfloat16)->tol.level, "L2");
  EXPECT_EQ(s.find("per_token_quant", DType::int8)->method, Method::quant);
  EXPECT_EQ(s.find("add", DType::float16), nullptr);
}

TEST(Spec, ErrorsNameFileTableAndExpectation) {
  auto err = [](const char* text) { return error_of([&] { parse_spec(text, "bad.toml"); }); };
  EXPECT_EQ(err("[mm.float32]\nstandard = \"mix_tolerance\"\nthreshold = 0.1\n"),
            "bad.toml: [mm.float32] threshold: expected a key that mix_tolerance reads: rtol, atol, limit, got "
            "unknown key \"threshold\"");
  EXPECT_EQ(err("[mm.float32]\nstandard = \"fuzzy\"\n"),
            "bad.toml: [mm.float32] standard: expected one of mix_tolerance, stat_rel_err, binary_equal, quant, "
            "cross_check (or a CLI method name), got \"fuzzy\"");
  EXPECT_EQ(err("[mm.float32]\nstandard = \"mix_tolerance\"\nrtol = \"big\"\n"),
            "bad.toml: [mm.float32] rtol: expected a finite number >= 0, got string \"big\"");
  EXPECT_EQ(err("[mm.float32]\nstandard = \"mix_tolerance\"\nrtol = -1\n"),
            "bad.toml: [mm.float32] rtol: expected a finite number >= 0, got -1");
  EXPECT_EQ(err("[mm.float32]\nstandard = \"close\"\nptol = 2\n"),
            "bad.toml: [mm.float32] ptol: expected a number in [0, 1], got 2");
  EXPECT_EQ(err("[mm.float32]\nrtol = 0.1\n"),
            "bad.toml: [mm.float32] standard: expected one of mix_tolerance, stat_rel_err, binary_equal, quant, "
            "cross_check (or a CLI method name), got nothing");
  EXPECT_NE(err("[mm.float33]\nstandard = \"binary_equal\"\n").find("bad.toml: [mm.float33]: expected a dtype name"),
            std::string::npos);
  EXPECT_EQ(err("[mm.float32]\nstandard = \"quant\"\n"),
            "bad.toml: [mm.float32] standard: expected quant only in an int4 or int8 table, got quant for float32");
  EXPECT_EQ(err("[mm.float32]\nstandard = \"cross_check\"\nlevel = \"L3\"\n"),
            "bad.toml: [mm.float32] level: expected \"L0\", \"L1\" or \"L2\", got string \"L3\"");
  EXPECT_EQ(err("mm = 3\n"), "bad.toml: [mm]: expected a table of output dtypes ([op.dtype]), got integer 3");
  EXPECT_EQ(err("[mm]\nfloat32 = 1\n"), "bad.toml: [mm.float32]: expected a table with standard = \"…\", got integer 1");
  EXPECT_NE(err("[mm.float32\n").find("bad.toml:1:"), std::string::npos);
  EXPECT_NE(error_of([] { load_spec("/nonexistent/x.toml"); }).find("/nonexistent/x.toml"), std::string::npos);
}

// --- compare --------------------------------------------------------------------------------------------------

Route by(Method m) {
  Route r;
  r.method = m;
  r.source = "test";
  return r;
}

TEST(Compare, SpecialValuesEqualAndMismatchClasses) {
  Tensor g = f32({kNaN, kInf, -kInf, 1, 2, kNaN, 3, kInf});
  Tensor a = f32({kNaN, kInf, -kInf, 1, 2, 5, kNaN, -kInf});
  for (Method m : {Method::mixed, Method::stat_rel_err, Method::close, Method::cosine}) {
    CompareResult r = compare({&a, &g, nullptr}, by(m));
    EXPECT_FALSE(r.pass) << method_name(m);
    EXPECT_EQ(r.nonfinite_mismatches, 3u);
    ASSERT_EQ(r.nonfinite.size(), 3u);
    EXPECT_EQ(r.nonfinite[0].name, "golden NaN, actual not NaN");
    EXPECT_EQ(r.nonfinite[0].first_indices, std::vector<std::size_t>{5});
    EXPECT_EQ(r.nonfinite[1].name, "actual NaN, golden not NaN");
    EXPECT_EQ(r.nonfinite[2].name, "inf of opposite sign");
  }
  Tensor g2 = f32({kNaN, kInf, -kInf, 1, 2});
  Tensor a2 = f32({kNaN, kInf, -kInf, 1, 2});
  for (Method m : {Method::mixed, Method::stat_rel_err, Method::close, Method::cosine, Method::binary})
    EXPECT_TRUE(compare({&a2, &g2, nullptr}, by(m)).pass) << method_name(m);
}

TEST(Compare, MixedWorstListIsOrderedAndDeterministic) {
  std::vector<double> gv(100000), av(100000);
  for (std::size_t i = 0; i < gv.size(); ++i) {
    gv[i] = std::sin(0.001 * static_cast<double>(i)) + 2;
    av[i] = gv[i] * (1 + 1e-4 * std::cos(0.37 * static_cast<double>(i)));
  }
  av[77777] = gv[77777] + 0.5;
  Tensor g = f32(gv), a = f32(av);
  set_thread_count(1);
  CompareResult r1 = compare({&a, &g, nullptr}, by(Method::mixed));
  set_thread_count(2);
  CompareResult r2 = compare({&a, &g, nullptr}, by(Method::mixed));
  set_thread_count(0);
  EXPECT_EQ(render_json({{"x", r1}}), render_json({{"x", r2}}));
  ASSERT_EQ(r1.worst.size(), 10u);
  EXPECT_EQ(r1.worst[0].index, 77777u);
  EXPECT_FALSE(r1.pass);  // 0.5 > limit 1e-2 and > 32 ULP
  std::uint64_t total = 0;
  for (auto c : r1.log10_err_hist) total += c;
  EXPECT_EQ(total, 100000u);
}

TEST(Compare, InputChecks) {
  Tensor a = f32({1, 2, 3}, "a.npy"), g = f32({1, 2}, "g.npy");
  EXPECT_EQ(error_of([&] { compare({&a, &g, nullptr}, by(Method::mixed)); }),
            "a.npy: shape: expected [2] like the golden g.npy (--flat compares the elements in order), got [3]");
  EXPECT_EQ(error_of([&] { compare({&a, &g, nullptr, true}, by(Method::mixed)); }),
            "a.npy: element count: expected 2 (golden g.npy has shape [2]), got 3 (shape [3])");
  // Same count, another layout: refused unless flat.
  Tensor a34 = make_tensor_f64(DType::float32, {3, 4}, std::vector<double>(12, 1.0), "a34.npy");
  Tensor g43 = make_tensor_f64(DType::float32, {4, 3}, std::vector<double>(12, 1.0), "g43.npy");
  EXPECT_NE(error_of([&] { compare({&a34, &g43, nullptr}, by(Method::mixed)); }).find("shape: expected [4, 3]"),
            std::string::npos);
  EXPECT_TRUE(compare({&a34, &g43, nullptr, true}, by(Method::mixed)).pass);
  Tensor i8 = make_tensor_f64(DType::int8, {3}, std::vector<double>{1, 2, 3}, "i.npy");
  EXPECT_NE(error_of([&] { compare({&i8, &a, nullptr}, by(Method::binary)); }).find("two integer types"),
            std::string::npos);
  EXPECT_NE(error_of([&] { compare({&a, &a, nullptr}, by(Method::cross_check)); }).find("third-party"),
            std::string::npos);
}

TEST(Compare, WiderGoldenUsesTheOutputDtypesTolerances) {
  // An f64 golden (never rounded to bf16) against a bf16 output: bf16's table A row applies (rtol=atol=2^-6),
  // and the figures equal those against the same golden stored in f32 (exactly representable values).
  std::vector<double> gv, av;
  for (int i = 0; i < 4096; ++i) {
    double g = std::sin(0.37 * i) * 3.0;
    gv.push_back(g);
    av.push_back(g * (1 + ((i % 50) ? 1.0 / 512 : 1.0 / 16)));  // 2% of elements off by 2^-4 relative
  }
  Tensor a = make_tensor_f64(DType::bfloat16, {4096}, av, "a.npy");
  std::vector<double> g32;
  for (double g : gv) g32.push_back(static_cast<float>(g));
  Tensor g64 = make_tensor_f64(DType::float64, {4096}, g32, "g64.npy");
  Tensor gf = make_tensor_f64(DType::float32, {4096}, g32, "g32.npy");
  CompareResult r64 = compare({&a, &g64, nullptr}, by(Method::mixed));
  CompareResult r32 = compare({&a, &gf, nullptr}, by(Method::mixed));
  EXPECT_EQ(r64.dtype, DType::bfloat16);
  ASSERT_EQ(r64.params.size(), r32.params.size());
  EXPECT_EQ(r64.params[0].second, std::ldexp(1.0, -6));  // bf16 rtol, not f64's
  for (size_t i = 0; i < r64.figures.size(); ++i) EXPECT_EQ(r64.figures[i].value, r32.figures[i].value);
  EXPECT_EQ(r64.pass, r32.pass);
  // Code-level methods still need equal dtypes.
  EXPECT_NE(error_of([&] { compare({&a, &gf, nullptr}, by(Method::requant)); }).find("dtype"), std::string::npos);
}

TEST(Compare, Int4PackedBinaryAndQuant) {
  Tensor g = make_tensor_f64(DType::int4, {5}, std::vector<double>{-8, -1, 0, 3, 7}, "g");
  Tensor a = make_tensor_f64(DType::int4, {5}, std::vector<double>{-8, 0, 0, 3, 5}, "a");
  CompareResult b = compare({&a, &g, nullptr}, by(Method::binary));
  EXPECT_FALSE(b.pass);
  EXPECT_EQ(b.mismatch_indices, (std::vector<std::size_t>{1, 4}));
  Route q = by(Method::quant);
  CompareResult r = compare({&a, &g, nullptr}, q);
  EXPECT_FALSE(r.pass);  // element 4 is off by 2 LSB, ptol 0
  EXPECT_EQ(r.mismatch_indices, std::vector<std::size_t>{4});
  q.tol.ptol = 0.2;
  EXPECT_TRUE(compare({&a, &g, nullptr}, q).pass);
}

// --- reports --------------------------------------------------------------------------------------------------

TEST(Report, TextJsonJunit) {
  Tensor g = f32({1, 2, kNaN}), a = f32({1, 2.5, 0});
  CompareResult r = compare({&a, &g, nullptr}, by(Method::mixed));
  std::vector<CaseResult> cases{{"a<b>&\"c\"\x01", r}, {"ok", compare({&g, &g, nullptr}, by(Method::mixed))}};
  const std::string text = render_text_run(cases);
  EXPECT_NE(text.find("1 passed, 1 failed\n"), std::string::npos);
  EXPECT_NE(text.find("golden NaN, actual not NaN"), std::string::npos);
  const std::string junit = render_junit(cases);
  EXPECT_NE(junit.find("name=\"a&lt;b&gt;&amp;&quot;c&quot;\xEF\xBF\xBD\""), std::string::npos);
  EXPECT_NE(junit.find("tests=\"2\" failures=\"1\""), std::string::npos);
  EXPECT_EQ(junit.find('\x01'), std::string::npos);
  const std::string json = render_json(cases);
  EXPECT_NE(json.find("\"max_abs_error\""), std::string::npos);
  EXPECT_NE(json.find("\"value\": \"inf\""), std::string::npos);
  EXPECT_NE(json.find("\"failed\": 1"), std::string::npos);
}

}  // namespace
}  // namespace kc
