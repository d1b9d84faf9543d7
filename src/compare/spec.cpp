#include "compare/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/suggest.h"

namespace kc {
namespace {

const char* kStandards = "mix_tolerance, stat_rel_err, binary_equal, quant, cross_check (or a CLI method name)";

// Keys each standard reads (besides `standard`).
std::vector<std::string_view> allowed_keys(Method m) {
  switch (m) {
    case Method::mixed: return {"rtol", "atol", "limit"};
    case Method::stat_rel_err: return {"threshold"};
    case Method::close: return {"rtol", "atol", "ptol"};
    case Method::cosine: return {"rtol"};
    case Method::requant:
    case Method::quant: return {"ptol"};
    case Method::cross_check: return {"level"};
    case Method::binary: return {};
  }
  return {};
}

std::string describe(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return fmt::format("string \"{}\"", *n.value<std::string>());
    case toml::node_type::integer: return fmt::format("integer {}", *n.value<std::int64_t>());
    case toml::node_type::floating_point: return fmt::format("float {}", *n.value<double>());
    case toml::node_type::boolean: return fmt::format("boolean {}", *n.value<bool>());
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (auto k : v) s += (s.empty() ? "" : ", ") + std::string(k);
  return s.empty() ? "(none)" : s;
}

double number(const toml::node& n, const std::string& path, const std::string& field, double max) {
  std::optional<double> v;
  if (n.is_floating_point()) v = *n.value<double>();
  if (n.is_integer()) v = static_cast<double>(*n.value<std::int64_t>());
  const std::string expected = max < INFINITY ? fmt::format("a number in [0, {}]", max) : "a finite number >= 0";
  if (!v) throw_input_error(path, field, expected, describe(n));
  if (!std::isfinite(*v) || *v < 0 || *v > max) throw_input_error(path, field, expected, fmt::format("{}", *v));
  return *v;
}

}  // namespace

const SpecEntry* Spec::find(std::string_view op, DType dtype) const {
  for (const auto& e : entries)
    if (e.op == op && e.dtype == dtype) return &e;
  return nullptr;
}

Spec parse_spec(std::string_view text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    fail("{}:{}:{}: TOML syntax: expected valid TOML, got error: {}", path, b.line, b.column, e.description());
  }
  Spec spec;
  spec.path = path;
  for (auto&& [op_key, op_node] : root) {
    const std::string op(op_key.str());
    const auto* op_table = op_node.as_table();
    if (!op_table)
      throw_input_error(path, fmt::format("[{}]", op), "a table of output dtypes ([op.dtype])", describe(op_node));
    for (auto&& [dt_key, dt_node] : *op_table) {
      const std::string dts(dt_key.str());
      const std::string table = fmt::format("[{}.{}]", op, dts);
      const auto dt = parse_dtype(dts);
      if (!dt) throw_input_error(path, table, fmt::format("a dtype name ({})", dtype_names_list()), dts);
      const auto* t = dt_node.as_table();
      if (!t) throw_input_error(path, table, "a table with standard = \"…\"", describe(dt_node));
      SpecEntry e;
      e.op = op;
      e.dtype = *dt;
      e.where = fmt::format("{} {}", path, table);
      const toml::node* std_node = t->get("standard");
      if (!std_node) throw_input_error(path, table + " standard", fmt::format("one of {}", kStandards), "nothing");
      if (!std_node->is_string())
        throw_input_error(path, table + " standard", fmt::format("a string, one of {}", kStandards),
                          describe(*std_node));
      const std::string sname = *std_node->value<std::string>();
      const auto m = parse_spec_standard(sname);
      if (!m) throw_input_error(path, table + " standard", fmt::format("one of {}", kStandards), "\"" + sname + "\"");
      e.method = *m;
      if (*m == Method::quant && *dt != DType::int8 && *dt != DType::int4)
        throw_input_error(path, table + " standard", "quant only in an int4 or int8 table",
                          fmt::format("quant for {}", dtype_name(*dt)));
      if (*m == Method::cross_check && *dt != DType::float16 && *dt != DType::bfloat16 && *dt != DType::float32)
        throw_input_error(path, table + " standard", "cross_check only in a float16, bfloat16 or float32 table",
                          fmt::format("cross_check for {}", dtype_name(*dt)));
      const auto allowed = allowed_keys(*m);
      for (auto&& [k_key, k_node] : *t) {
        const std::string k(k_key.str());
        if (k == "standard") continue;
        const std::string field = fmt::format("{} {}", table, k);
        if (std::find(allowed.begin(), allowed.end(), k) == allowed.end())
          throw_input_error(path, field, fmt::format("a key that {} reads: {}", sname, join(allowed)),
                            "unknown key \"" + k + "\"" + did_you_mean(k, allowed));
        if (k == "level") {
          const auto s = k_node.value<std::string>();
          if (!k_node.is_string() || (*s != "L0" && *s != "L1" && *s != "L2"))
            throw_input_error(path, field, "\"L0\", \"L1\" or \"L2\"", describe(k_node));
          e.tol.level = *s;
        } else if (k == "ptol") {
          e.tol.ptol = number(k_node, path, field, 1.0);
        } else {
          const double v = number(k_node, path, field, INFINITY);
          if (k == "rtol") e.tol.rtol = v;
          if (k == "atol") e.tol.atol = v;
          if (k == "limit") e.tol.limit = v;
          if (k == "threshold") e.tol.threshold = v;
        }
      }
      spec.entries.push_back(std::move(e));
    }
  }
  return spec;
}

Spec load_spec(const std::string& path) {
  return parse_spec(read_text_file(path, kConfigTextCap, "a spec file"), path);
}

}  // namespace kc
