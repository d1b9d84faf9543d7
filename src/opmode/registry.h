// Built-in ops for op mode (`kerncheck compare -i cases.csv` rows that name an op instead of files).
//
// Each op has one f64 reference and any number of named candidates (the implementations under test:
// today C++ twins of real kernels' precision choices; later CUDA kernels and Python plugins). Ops work on
// plain f64 arrays with shapes and know nothing of files or comparison methods: the runner in
// opmode/cases.cpp generates the inputs, rounds them to the op's input dtype, calls reference and candidate,
// encodes the candidate's output to the row's dtype and compares.
//
// Registering a candidate is one line:
//   reg.add_candidate("matmul", "bf16_f16acc", [](auto in, auto& p, DType out) { … return Array{…}; });
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numeric/dtype.h"

namespace kc::ops {

using Shape = std::vector<std::int64_t>;

// A row-major array of f64 values.
struct Array {
  Shape shape;
  std::vector<double> values;
};

std::size_t shape_numel(const Shape& s);
std::string shape_text(const Shape& s);  // "64x128"

// Named numeric op parameters from the CSV `params` column ("block=64;eps=1e-6").
struct Params {
  std::map<std::string, double> values;
  double get(const std::string& key, double fallback) const;
};

using ReferenceFn = std::function<Array(std::span<const Array> inputs, const Params& p)>;
// The candidate's output, in f64. The runner encodes it to `out` (RNE), so a candidate that keeps its
// result in f32 gets exactly one final rounding to the output dtype, like a kernel's epilogue.
using CandidateFn = std::function<Array(std::span<const Array> inputs, const Params& p, DType out)>;
// Checks the input shapes and returns the output shape; throws kc::Error("expected …, got …").
using ShapeFn = std::function<Shape(std::span<const Shape> inputs, const Params& p)>;

struct OpDef {
  std::string name;
  std::string summary;                   // one line for docs and `--list-ops`
  std::vector<std::string> input_names;  // with shapes, e.g. "a [M, K]"
  std::vector<std::string> param_names;  // accepted `params` keys, e.g. "block" (others are refused)
  ShapeFn output_shape;
  // Generated inputs are rounded to this dtype before reference and candidate see them (both see the
  // same values, so the comparison measures the op, not the input rounding). nullopt: the row's dtype.
  std::optional<DType> input_dtype;
  // Output dtypes the op accepts (DKind::floating / integer …) and the default when the row leaves
  // dtype empty.
  std::vector<DKind> output_kinds = {DKind::floating};
  std::vector<DType> output_dtypes;  // if non-empty, exactly these (overrides output_kinds)
  DType default_output = DType::bfloat16;
  ReferenceFn reference;
  std::map<std::string, CandidateFn> candidates;
  std::string default_candidate;
  std::map<std::string, std::string> candidate_summaries;

  bool accepts_output(DType d) const;
  std::string accepted_outputs_text() const;
};

class Registry {
 public:
  OpDef& add_op(OpDef def);
  void add_candidate(const std::string& op, const std::string& name, CandidateFn fn,
                     std::string summary = {});
  const OpDef* find(std::string_view name) const;
  std::vector<std::string> names() const;
  std::string names_text() const;  // "attention, cast, matmul, …"

 private:
  std::map<std::string, OpDef, std::less<>> ops_;
};

// The process-wide registry, holding the built-in ops (registered on first use).
Registry& registry();

// Built-in op families (one file each); registry() calls them.
void register_matmul(Registry& r);
void register_softmax(Registry& r);
void register_rmsnorm(Registry& r);
void register_attention(Registry& r);
void register_cast(Registry& r);
void register_quant(Registry& r);

// Rounds every value to dtype d (encode then decode; floats RNE, hifloat8 half away from zero).
void round_to(DType d, std::span<double> values);
double round_to(DType d, double x);

}  // namespace kc::ops
