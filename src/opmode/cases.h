// Cases for `kerncheck compare`: CSV case files (RFC 4180) and the runner that turns one case into a
// comparison. A case is either
//   - a file case: actual and golden tensors (npy, safetensors, raw) and optionally a third one, or
//   - an op case: a built-in op (opmode/registry.h), input shapes, a seed and a value distribution;
//     kerncheck generates the inputs, runs the op's f64 reference and a candidate, and compares them.
// A row is an op case when its `actual` cell is empty.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compare/compare.h"
#include "io/tensor.h"
#include "opmode/random.h"
#include "opmode/registry.h"

namespace kc {

// ---- CSV (RFC 4180) -----------------------------------------------------------------------------
// Records end at LF or CRLF; fields are separated by ','; a field that starts with '"' is quoted and may
// hold ',', '"' (written "") and line breaks. Unquoted fields are trimmed of spaces and tabs; quoted
// fields are kept as written. Blank lines and lines whose first character is '#' are skipped. A UTF-8
// BOM is skipped. Errors: "FILE:LINE:COLUMN: …" (1-based, COLUMN in bytes).
struct CsvRecord {
  std::size_t line = 0;  // line where the record starts
  std::vector<std::string> fields;
  std::vector<std::size_t> columns;  // byte column where each field starts
};
std::vector<CsvRecord> parse_csv(std::string_view text, std::string_view file);

// ---- cases --------------------------------------------------------------------------------------
struct Case {
  std::string file;      // CSV path, or "" for a case given on the command line
  std::size_t line = 0;  // CSV line of the row
  std::string name;
  bool op_mode = false;

  // File cases (paths already resolved against the CSV's folder).
  std::string actual, golden, third;
  std::optional<std::vector<std::int64_t>> shape;  // raw files' shape (`shape` column / --shape)
  bool flat = false;  // shapes may differ, element counts not (`flat` column / --flat)

  // Both kinds.
  std::optional<DType> dtype;     // raw files' dtype, npy void hint, output dtype for routing / the op
  std::optional<Method> compare;  // the row's `compare` column
  std::string op;                 // spec operator name (file cases) or built-in op (op cases)
  std::vector<std::pair<double, double>> precision_tolerances;  // legacy (rtol, ptol) per output
  std::optional<double> absolute_precision;                     // legacy global atol (close only)

  // Op cases.
  std::vector<ops::Shape> shapes;  // one per op input
  std::uint64_t seed = 0;
  std::vector<ops::Distribution> dists;  // one for all inputs, or one per input
  std::string candidate;                 // variant under test (default: the op's first)
  std::string reference;                 // "" = the f64 reference, else another candidate's name
  std::string third_candidate;           // op-mode `third`: a candidate used as cross_check's b
  ops::Params params;

  std::string where() const;  // "cases.csv:4" or "command line"
};

// The columns a case file may have, in documentation order.
const std::vector<std::string>& case_columns();

// Parses a whole case file; throws kc::Error "FILE:LINE:COLUMN: column NAME: expected …, got …" at the
// first bad row (nothing runs then). Paths are resolved against `base_dir`.
std::vector<Case> parse_cases_csv(std::string_view text, std::string_view file, std::string_view base_dir);
std::vector<Case> read_cases_csv(const std::string& path);

// Checks an op case against the registry (op, candidate names, shapes, params, output dtype) and fills
// defaults (dtype, candidate). Throws kc::Error naming the case's file:line.
void resolve_op_case(Case& c);

// ---- running ------------------------------------------------------------------------------------
// Fills the spec part of a route request (spec_method, spec_where, spec_tol) for operator `op` and the
// output dtype; may leave it untouched. Supplied by the CLI from `--spec` (compare/spec.h).
using SpecLookup = std::function<void(const std::string& op, RouteRequest& req)>;

struct RunOptions {
  std::optional<Method> cli_method;  // --compare (beats the row's compare column)
  SpecLookup spec;
  std::string save_dir;  // op cases: write inputs, golden and actual as .npy here
};

struct CaseTensors {
  Tensor actual, golden;
  std::optional<Tensor> third;
  std::vector<Tensor> inputs;       // op cases: the generated inputs (after rounding to the input dtype)
  std::vector<DType> input_dtypes;  // for quant's ≥ 1 float input check
  DType output_dtype = DType::float32;
  std::string describe;  // "matmul/f32acc vs f64 reference, 64x128;128x32, seed 1"
};

// Loads (file case) or generates (op case) the tensors of a case. Deterministic for a given case.
CaseTensors materialize(const Case& c);

struct CaseOutcome {
  Case c;
  CaseTensors tensors;
  Route route;
  CompareResult result;
};

// Routes and compares one case. Throws kc::Error (prefixed with the case's file:line) on bad input.
CaseOutcome run_case(const Case& c, const RunOptions& opt);

}  // namespace kc
