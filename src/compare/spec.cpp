#include "compare/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <span>
#include <sstream>
#include <toml++/toml.h>

#include "compare/methods.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/suggest.h"

namespace kc {
namespace {

// "mix_tolerance, stat_rel_err, binary_equal, quant, cross_check (or a CLI method name)"
std::string standards_text() {
  std::string s;
  for (const MethodDef* m : methods())
    if (m->standard) s += (s.empty() ? "" : ", ") + std::string(m->standard);
  return s + " (or a CLI method name)";
}

// Every spelling `standard` accepts, for "did you mean".
std::vector<std::string_view> standard_spellings() {
  std::vector<std::string_view> v;
  for (const MethodDef* m : methods()) {
    if (m->standard) v.push_back(m->standard);
    v.push_back(m->name);
  }
  return v;
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

std::string join(std::span<const std::string_view> v) {
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
      const std::string standards = standards_text();
      if (!std_node) throw_input_error(path, table + " standard", fmt::format("one of {}", standards), "nothing");
      if (!std_node->is_string())
        throw_input_error(path, table + " standard", fmt::format("a string, one of {}", standards),
                          describe(*std_node));
      const std::string sname = *std_node->value<std::string>();
      const auto m = parse_spec_standard(sname);
      if (!m)
        throw_input_error(path, table + " standard", fmt::format("one of {}", standards),
                          "\"" + sname + "\"" + did_you_mean(sname, standard_spellings()));
      e.method = *m;
      const MethodDef& def = method_def(*m);
      if (!def.spec_tables.admits(*dt))
        throw_input_error(path, table + " standard", fmt::format("{} only in {}", def.name, def.spec_tables.expected),
                          fmt::format("{} for {}", def.name, dtype_name(*dt)));
      const auto allowed = def.keys;
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
          const auto f = tolerance_field(k);
          KC_ASSERT(f, "{}: spec key {} has no Tolerance field", def.name, k);
          e.tol.*f = number(k_node, path, field, INFINITY);
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
