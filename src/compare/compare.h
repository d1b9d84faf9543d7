// Tensor-level comparison (docs/compare.md): eight methods, routed per output dtype.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/tensor.h"

namespace kc {

// The methods, in the order --help lists them. Each is defined (names, spec keys, default tolerances, dtype
// rules, pass function: a MethodDef, compare/methods.h) in its family's file; a new method is one word here
// plus that definition.
#define KC_COMPARE_METHODS(X) \
  X(mixed) X(stat_rel_err) X(close) X(cosine) X(binary) X(requant) X(quant) X(cross_check)

enum class Method : std::uint8_t {
#define KC_METHOD_ENUM(m) m,
  KC_COMPARE_METHODS(KC_METHOD_ENUM)
#undef KC_METHOD_ENUM
};

// CLI names and spec `standard` names (the seed's spellings, or the CLI name): the MethodDef's.
const char* method_name(Method m);
std::optional<Method> parse_method(std::string_view s);
std::optional<Method> parse_spec_standard(std::string_view s);

// Overrides of a method's default tolerances; unset fields take the dtype's defaults.
struct Tolerance {
  std::optional<double> rtol, atol, limit, threshold, ptol;
  std::optional<std::string> level;  // cross_check: "L0" | "L1" | "L2"
};

// Where a case's method and tolerances come from, highest priority first (docs/compare.md, "Routing").
struct RouteRequest {
  DType output_dtype = DType::float32;
  std::vector<DType> input_dtypes;           // for quant's check (≥ 1 float input); empty if unknown
  std::optional<Method> cli_method;          // --compare
  std::optional<Method> spec_method;         // spec tolerance[dtype].standard
  std::string spec_where;                    // "spec.toml [matmul.bfloat16]" for the report
  Tolerance spec_tol;                        // spec overrides
  Tolerance csv_tol;                         // legacy CSV fields (close, cosine only)
};

struct Route {
  Method method = Method::mixed;
  std::string source;  // "--compare", "spec.toml [op.dtype]", "auto: hifloat8 → requant", "default"
  Tolerance tol;       // the overrides that apply to `method`
};

// Applies the priority rules and the quant exception; throws kc::Error (exit 3) for quant without a
// spec-declared int4/int8 output and a float input, or for a method/dtype combination that cannot apply.
Route route(const RouteRequest& r);

// A number the verdict used, with its limit when it has one (limit_ok tells which side passes).
struct Figure {
  std::string name;
  double value = 0;
  std::optional<double> limit;
  std::string relation;  // "<=", "<", ">=": how value must stand to limit to pass
};

struct WorstElement {
  std::size_t index = 0;       // flat index
  double golden = 0, actual = 0;
  double abs_err = 0, rel_err = 0, ulp_err = 0;  // ulp_err in ULPs of the output dtype at golden
};

// Non-finite mismatches by class: golden NaN vs actual not NaN, actual NaN vs golden not, +inf/-inf
// mismatches …; each class counts all and keeps the first indices.
struct NonFiniteClass {
  std::string name;  // e.g. "golden NaN, actual finite"
  std::size_t count = 0;
  std::vector<std::size_t> first_indices;  // up to 10
};

struct CompareResult {
  Method method = Method::mixed;
  std::string route_source;
  DType dtype = DType::float32;  // output dtype the tolerances were taken for
  std::size_t numel = 0;
  bool pass = false;
  std::string reason;            // one line: why it failed (or "all criteria met")
  std::vector<Figure> figures;   // the figures the decision used, in decision order
  std::vector<WorstElement> worst;  // up to 10, largest error first
  std::vector<NonFiniteClass> nonfinite;
  std::size_t nonfinite_mismatches = 0;
  std::vector<std::uint64_t> log10_err_hist;  // counts of |a−g| in decades: [0]=exact, then ≤1e-12 …
  std::vector<std::string> log10_err_edges;   // labels of the buckets
  std::string min_passing;  // smallest tolerance that would have passed, e.g. "rtol=atol=3.1e-3"
  std::vector<std::string> notes;  // e.g. "cross_check: third's error is 0, divided by floor 1e-30"
  // Tolerance parameters the method applied (after defaults and overrides), e.g. {"rtol", 0.0009765625}.
  std::vector<std::pair<std::string, double>> params;
  // binary / requant / quant: the first differing (or out-of-tolerance) flat indices, ascending (≤ 20).
  std::vector<std::size_t> mismatch_indices;
};

// The method's default tolerances for an output dtype (seed tables A, B, close/cosine/requant/quant
// defaults, cross_check L1), as a Tolerance with every field the method reads set (MethodDef::defaults).
Tolerance default_tolerance(Method m, DType d);

struct CompareInputs {
  const Tensor* actual = nullptr;
  const Tensor* golden = nullptr;
  const Tensor* third = nullptr;  // cross_check only
  bool flat = false;  // compare the elements in order whatever the shapes (equal counts): `--flat`
};

// Runs route.method on the tensors. Shapes must be equal (else kc::Error naming both), or with flat only
// their element counts; dtype of actual vs golden must match for float methods (binary allows
// integer↔integer, refuses float↔integer).
CompareResult compare(const CompareInputs& in, const Route& route);

// torch.testing.assert_close's mismatch figures (compare/extremes.cpp): elements not within
// atol + rtol·|golden| (NaN pairs match only with equal_nan), and the greatest absolute and relative
// difference among them (flat indices; 0 mismatched: all zero).
struct Extremes {
  std::size_t numel = 0, mismatched = 0;
  double max_abs = 0, max_rel = 0;
  std::size_t max_abs_index = 0, max_rel_index = 0;
};
Extremes extremes(const Tensor& a, const Tensor& g, double rtol, double atol, bool equal_nan);

}  // namespace kc
