// CSV case files: RFC 4180 parsing, column checks, errors with FILE:LINE:COLUMN, op-mode rows and
// deterministic input generation.
#include "opmode/cases.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "numeric/formats.h"

namespace kc {
namespace {

std::string error_of(std::string_view csv) {
  try {
    parse_cases_csv(csv, "c.csv", "/data");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Csv, QuotingPerRfc4180) {
  auto recs =
      parse_csv("a,b,c\r\n\"x, y\",\"say \"\"hi\"\"\",\"two\nlines\"\n  plain  , \" kept \",\n", "t.csv");
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[1].fields, (std::vector<std::string>{"x, y", "say \"hi\"", "two\nlines"}));
  EXPECT_EQ(recs[1].line, 2u);
  EXPECT_EQ(recs[2].fields,
            (std::vector<std::string>{"plain", " kept ", ""}));  // unquoted fields are trimmed
  EXPECT_EQ(recs[2].line, 4u);
  EXPECT_EQ(recs[2].columns, (std::vector<std::size_t>{1, 11, 21}));
  // The record after a quoted line break starts on line 4 (2 + one embedded break).
  auto r2 = parse_csv("a,b\n\"1\n2\",3\nz,w", "t.csv");
  ASSERT_EQ(r2.size(), 3u);
  EXPECT_EQ(r2[2].line, 4u);
  EXPECT_EQ(r2[2].fields, (std::vector<std::string>{"z", "w"}));
}

TEST(Csv, BlankLinesCommentsBomAndTrailingEmptyField) {
  auto recs = parse_csv("\xEF\xBB\xBFh1,h2\n\n# a comment, with commas\n  \n1,\n", "t.csv");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].fields[0], "h1");
  EXPECT_EQ(recs[1].fields, (std::vector<std::string>{"1", ""}));
  EXPECT_EQ(recs[1].line, 5u);
}

TEST(Csv, MalformedQuotesNameLineAndColumn) {
  auto msg = [](std::string_view t) {
    try {
      parse_csv(t, "t.csv");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg("a,b\n1,\"open\n"),
            "t.csv:2:3: quoted field: expected a closing '\"', got the end of the file");
  EXPECT_EQ(msg("a,b\n1,\"x\"y\n"),
            "t.csv:2:6: expected ',' or the end of the line after a closing '\"', got 'y'");
  EXPECT_EQ(msg("a,b\n1,x\"y\n"),
            "t.csv:2:4: expected a field without '\"' (quote the whole field and write \"\" for a quote), "
            "got '\"'");
  EXPECT_NE(msg(std::string_view("a,b\n1,\0\n", 8)).find("t.csv:2:3: expected text, got a NUL byte"),
            std::string::npos);
}

TEST(Cases, FileRowsResolvePathsAndLegacyFields) {
  auto cases = parse_cases_csv(
      "name,actual,golden,dtype,compare,op,precision_tolerances,absolute_precision\n"
      "add,out/a.npy,/abs/g.npy,bf16,close,add,\"((0.002, 0.001),)\",1e-6\n",
      "c.csv", "/data");
  ASSERT_EQ(cases.size(), 1u);
  const Case& c = cases[0];
  EXPECT_FALSE(c.op_mode);
  EXPECT_EQ(c.actual, "/data/out/a.npy");
  EXPECT_EQ(c.golden, "/abs/g.npy");
  EXPECT_EQ(c.dtype, DType::bfloat16);
  EXPECT_EQ(c.compare, Method::close);
  EXPECT_EQ(c.op, "add");
  ASSERT_EQ(c.precision_tolerances.size(), 1u);
  EXPECT_EQ(c.precision_tolerances[0], (std::pair<double, double>{0.002, 0.001}));
  EXPECT_EQ(c.absolute_precision, 1e-6);
  EXPECT_EQ(c.where(), "c.csv:2");
}

TEST(Cases, ErrorsNameFileLineColumnAndField) {
  EXPECT_EQ(
      error_of("actual,golden,colour\na,b,red\n"),
      "c.csv:1:15: header: expected column names among name, actual, golden, third, dtype, shape, flat, compare, "
      "op, "
      "precision_tolerances, absolute_precision, shapes, seed, dist, candidate, reference, params (a header "
      "row is required), got \"colour\"");
  EXPECT_EQ(error_of("actual,golden\na.npy,b.npy\nc.npy\n"),
            "c.csv:3: fields: expected 2 (as in the header), got 1");
  EXPECT_EQ(error_of("actual,golden,absolute_precision\na,b,1e-x\n"),
            "c.csv:2:5: column absolute_precision: expected a number >= 0 like 1e-8, got \"1e-x\"");
  EXPECT_EQ(error_of("op,shapes,seed\nmatmul,2x3;3x4,-1\n"),
            "c.csv:2:16: column seed: expected an unsigned 64-bit integer (decimal or 0x hex), got \"-1\"");
  EXPECT_NE(error_of("actual,golden,dtype\na,b,float7\n").find("c.csv:2:5: column dtype: expected a dtype"),
            std::string::npos);
  EXPECT_NE(error_of("actual,golden,compare\na,b,fuzzy\n").find("c.csv:2:5: column compare: expected one of"),
            std::string::npos);
  EXPECT_NE(error_of("actual,golden,compare\na,b,quant\n").find("quant is declared only in a spec"),
            std::string::npos);
  EXPECT_EQ(error_of("actual,golden\na,\n"),
            "c.csv:2:3: column golden: expected a golden tensor path (the row has an "
            "actual), got \"\"");
  EXPECT_NE(
      error_of("actual,golden,precision_tolerances\na,b,\"((0.1,),)\"\n").find("column precision_tolerances"),
      std::string::npos);
  EXPECT_NE(error_of("actual,golden,seed\na,b,3\n").find("column seed: expected empty on a file row"),
            std::string::npos);
  EXPECT_EQ(error_of("actual,actual\na,b\n"),
            "c.csv:1:8: header: expected each column once, got \"actual\" twice");
  EXPECT_EQ(error_of("name\nx\n"),
            "c.csv:1: header: expected an actual column (file cases) or an op column (op "
            "cases), got name");
  EXPECT_EQ(error_of("actual,golden\n"),
            "c.csv: rows: expected at least one case after the header, got none");
  EXPECT_EQ(error_of(""),
            "c.csv: header: expected a header row (name, actual, golden, third, dtype, shape, flat, compare, "
            "op, precision_tolerances, absolute_precision, shapes, seed, dist, candidate, reference, "
            "params), got an empty file");
}

TEST(Cases, OpRowsAreCheckedAgainstTheRegistry) {
  auto cases = parse_cases_csv(
      "op,shapes,dtype,seed,dist,candidate,reference,params\n"
      "attention,2x16;64x16;64x8,,0x10,\"normal(0,2);uniform(-1,1);const(1)\",p_fp8x448,p_f32,block=16;"
      "causal=1\n"
      "matmul,4x8;8x2,float16,,,,,\n",
      "c.csv", "");
  ASSERT_EQ(cases.size(), 2u);
  const Case& a = cases[0];
  EXPECT_TRUE(a.op_mode);
  EXPECT_EQ(a.seed, 16u);
  EXPECT_EQ(a.dists.size(), 3u);
  EXPECT_EQ(a.dtype, DType::bfloat16);  // the op's default output
  EXPECT_EQ(a.params.get("block", 0), 16);
  EXPECT_EQ(a.name, "attention/p_fp8x448");
  EXPECT_EQ(cases[1].candidate, "f32acc");  // the first registered candidate
  EXPECT_EQ(cases[1].dtype, DType::float16);

  EXPECT_EQ(error_of("op,shapes\nmatmul,4x8;9x2\n"),
            "c.csv:2:8: op matmul: input b: expected 8xN (K of a), got 9x2");
  EXPECT_NE(error_of("op,shapes\nconv,4x8\n")
                .find("c.csv:2:1: column op: expected a built-in op (attention, cast, "),
            std::string::npos);
  EXPECT_NE(error_of("op,shapes,candidate\nmatmul,4x8;8x2,fast\n")
                .find("column candidate: expected a candidate of "
                      "matmul (bf16acc, f32acc)"),
            std::string::npos);
  EXPECT_NE(error_of("op,shapes\nmatmul,4x0;0x2\n").find("column shapes: expected sizes >= 1"),
            std::string::npos);
  EXPECT_NE(error_of("op,shapes\nmatmul,4xx8;8x2\n").find("column shapes"), std::string::npos);
  EXPECT_NE(error_of("op,shapes\ncast,100000x100000\n").find("at most 33554432 elements"), std::string::npos);
  EXPECT_NE(error_of("op,shapes,params\nmatmul,4x8;8x2,block=3\n").find("column params: expected no params"),
            std::string::npos);
  EXPECT_NE(error_of("op,shapes,dist\nmatmul,4x8;8x2,\"normal(0,1);normal(0,1);normal(0,1)\"\n")
                .find("column dist: expected one distribution, or one per input (2)"),
            std::string::npos);
  EXPECT_NE(
      error_of("op,shapes,dtype\nper_token_quant,4x8,bfloat16\n").find("dtype: expected int8"),
      std::string::npos);
  EXPECT_NE(error_of("op,shapes,golden\nmatmul,4x8;8x2,g.npy\n")
                .find("column golden: expected empty on an op-mode row"),
            std::string::npos);
}

TEST(Cases, SameSeedSameBytesOtherSeedOtherBytes) {
  auto cases = parse_cases_csv(
      "name,op,shapes,seed,candidate\n"
      "a,attention,4x32;100x32;100x16,5,p_fp8\n"
      "b,attention,4x32;100x32;100x16,5,p_fp8\n"
      "c,attention,4x32;100x32;100x16,6,p_fp8\n",
      "c.csv", "");
  auto bytes = [](const Tensor& t) { return std::vector<std::uint8_t>(t.bytes.begin(), t.bytes.end()); };
  CaseTensors a = materialize(cases[0]), b = materialize(cases[1]), c = materialize(cases[2]);
  ASSERT_EQ(a.inputs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bytes(a.inputs[i]), bytes(b.inputs[i]));
    EXPECT_NE(bytes(a.inputs[i]), bytes(c.inputs[i]));
    EXPECT_EQ(a.inputs[i].dtype, DType::bfloat16);
  }
  EXPECT_EQ(bytes(a.actual), bytes(b.actual));
  EXPECT_EQ(bytes(a.golden), bytes(b.golden));
  EXPECT_EQ(a.actual.dtype, DType::bfloat16);
  EXPECT_EQ(a.golden.dtype, DType::float64);  // run_case rounds it to the output dtype
  EXPECT_EQ(a.actual.shape, (std::vector<std::int64_t>{4, 16}));
}

TEST(Cases, RunCaseRoutesAndRowCompareYieldsToCli) {
  auto cases = parse_cases_csv(
      "op,shapes,seed,candidate,compare\n"
      "matmul,8x64;64x8,1,f32acc,cosine\n"
      "matmul,8x64;64x8,1,bf16acc,\n"
      "per_token_quant,8x64,1,scale_f16,\n",
      "c.csv", "");
  RunOptions opt;
  auto o = run_case(cases[0], opt);
  EXPECT_EQ(o.route.method, Method::cosine);
  EXPECT_EQ(o.route.source, "c.csv:2 compare column");
  EXPECT_TRUE(o.result.pass);
  EXPECT_EQ(o.tensors.golden.dtype, DType::bfloat16);
  opt.cli_method = Method::stat_rel_err;
  EXPECT_EQ(run_case(cases[0], opt).route.method, Method::stat_rel_err);
  opt.cli_method.reset();
  EXPECT_FALSE(run_case(cases[1], opt).result.pass);
  // int8 routes to binary without a spec; with a quant spec entry it passes.
  auto q = run_case(cases[2], opt);
  EXPECT_EQ(q.route.method, Method::binary);
  EXPECT_FALSE(q.result.pass);
  opt.spec = [](const std::string& op, RouteRequest& req) {
    if (op == "per_token_quant") {
      req.spec_method = Method::quant;
      req.spec_where = "test spec";
    }
  };
  q = run_case(cases[2], opt);
  EXPECT_EQ(q.route.method, Method::quant);
  EXPECT_TRUE(q.result.pass);
}

TEST(Cases, MissingFileErrorNamesTheRow) {
  auto cases = parse_cases_csv("actual,golden\nnope.npy,nope2.npy\n", "dir/c.csv", "dir");
  try {
    run_case(cases[0], {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("dir/c.csv:2: dir/nope.npy", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace kc
