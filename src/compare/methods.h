// The table of comparison methods (docs/compare.md). Each method has one MethodDef, written beside its
// pass function in its family's file:
//   tolerance_methods.cpp  mixed, close         element-wise |a−g| ≤ atol + rtol·|g|, matched fraction
//   statistic_methods.cpp  stat_rel_err, cosine whole-tensor statistics (mean/max rel. error, cosine)
//   code_methods.cpp       binary, requant, quant  stored codes (bit-exact, 8-bit ULPs, ±1 LSB)
//   cross_check.cpp        cross_check          against a third-party result
// (the four value methods share one streaming pass, float_pass.cpp). Everything that names, parses,
// routes or validates methods reads this table: route() and compare(), spec and CSV validation,
// `kerncheck compare --help`, kerncheck._core.methods() and the Python names.
//
// Adding a method: a word in KC_COMPARE_METHODS (compare/compare.h) and its MethodDef + pass function in
// its family's file (a new file in src/compare/ is picked up by the build).
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "compare/compare.h"

namespace kc {

// Which dtypes a rule admits, and how messages name them.
struct DTypeRule {
  bool (*ok)(DType) = nullptr;     // nullptr: every dtype
  const char* expected = nullptr;  // e.g. "an output dtype of float16, bfloat16 or float32"
  bool admits(DType d) const { return !ok || ok(d); }
};

struct MethodDef {
  Method id;
  const char* name;      // --compare, the CSV compare column, Python's method=, reports
  const char* standard;  // the seed's spec spelling (mix_tolerance, binary_equal …); nullptr: only `name`
  bool cli;              // selectable by --compare / CSV / Python (false: declared only in a spec)
  // Spec overrides it reads (besides `standard`); legacy CSV fields it reads (precision_tolerances →
  // rtol, ptol; absolute_precision → atol).
  std::span<const std::string_view> keys, csv_keys;
  // Its default tolerances for an output dtype: every key in `keys` set.
  Tolerance (*defaults)(DType out);
  // Routed here by dtype (no --compare, CSV column or spec) for these outputs; nullptr: never.
  bool (*auto_for)(DType out);
  bool values;       // compares decoded values: the golden may be another real float type
  bool needs_third;  // reads CompareInputs::third (cross_check's b)
  DTypeRule outputs;      // output dtypes it can judge (checked by route() and compare())
  DTypeRule spec_tables;  // [op.dtype] tables a spec may declare it in (checked when the spec is read)
  // The verdict, on validated inputs (equal element counts, n ≥ 1, dtypes as `values` allows, third
  // present when needs_third) and tolerances merged with the defaults.
  CompareResult (*run)(const CompareInputs& in, const Tolerance& tol);
};

// The Tolerance field a numeric spec key sets (rtol, atol, limit, threshold, ptol); nullptr for any other
// key (`level` is a string).
std::optional<double> Tolerance::*tolerance_field(std::string_view key);
// Every numeric key: rtol, atol, limit, threshold, ptol.
std::span<const std::string_view> numeric_tolerance_keys();

// Every method, in the order --help lists them (KC_COMPARE_METHODS).
std::span<const MethodDef* const> methods();
const MethodDef& method_def(Method m);
// The method routed to when no rule applies (mixed).
const MethodDef& default_method();

// "mixed, stat_rel_err, …, cross_check": the names --compare, the CSV column and Python accept.
std::string cli_method_names();
// "quant": the methods only a spec declares.
std::string spec_only_method_names();
// " (did you mean \"mixed\"?)" for a misspelled method name (CLI names), else "".
std::string method_suggestion(std::string_view got);

}  // namespace kc
