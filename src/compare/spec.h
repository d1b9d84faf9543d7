// Tolerance spec files (`--spec FILE.toml`): per operator, per output dtype, the comparison standard and
// its overrides. Example:
//
//   [matmul.bfloat16]
//   standard = "mix_tolerance"   # mix_tolerance | stat_rel_err | binary_equal | quant | cross_check
//   rtol = 0.004                 #   (the CLI names mixed, close, cosine, binary, requant are accepted too)
//
//   [per_token_quant.int8]
//   standard = "quant"
//   ptol = 0.001
//
// Overrides each standard accepts (MethodDef::keys, compare/methods.h): mix_tolerance rtol atol limit;
// stat_rel_err threshold; close rtol atol ptol; cosine rtol; requant ptol; quant ptol; cross_check level
// ("L0" | "L1" | "L2"); binary_equal none.
// Numbers are finite and ≥ 0 (ptol ≤ 1). quant only for int4/int8 tables, cross_check only for float16,
// bfloat16, float32. Anything else (unknown key, standard, dtype, wrong type) is a kc::Error naming the
// file, the table path and the expected value.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "compare/compare.h"

namespace kc {

struct SpecEntry {
  std::string op;
  DType dtype = DType::float32;
  Method method = Method::mixed;
  Tolerance tol;
  std::string where;  // "spec.toml [matmul.bfloat16]": RouteRequest::spec_where
};

struct Spec {
  std::string path;
  std::vector<SpecEntry> entries;  // in file order
  // The entry for an operator and output dtype, or nullptr.
  const SpecEntry* find(std::string_view op, DType dtype) const;
};

Spec load_spec(const std::string& path);
// Parses TOML text; `path` names the source in messages (also the fuzz entry point).
Spec parse_spec(std::string_view text, const std::string& path);

}  // namespace kc
