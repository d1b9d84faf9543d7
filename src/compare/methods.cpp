// The method table (compare/methods.h): the MethodDefs of the family files, in KC_COMPARE_METHODS order,
// and the names, parsing and defaults everything else reads from it.
#include "compare/methods.h"

#include <array>

#include "compare/compare_internal.h"
#include "core/error.h"
#include "core/suggest.h"

namespace kc {

namespace {

#define KC_METHOD_REF(m) &cmp::m##_method,
constexpr std::array kTable = {KC_COMPARE_METHODS(KC_METHOD_REF)};
#undef KC_METHOD_REF

// Methods are looked up by Method value: the table must be in enum order.
bool table_in_order() {
  for (std::size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<std::size_t>(kTable[i]->id) != i) return false;
  return true;
}

std::string join_names(bool cli) {
  std::string s;
  for (const MethodDef* m : kTable)
    if (m->cli == cli) s += (s.empty() ? "" : ", ") + std::string(m->name);
  return s;
}

}  // namespace

std::span<const MethodDef* const> methods() {
  static const bool ok = table_in_order();
  KC_ASSERT(ok, "method table out of KC_COMPARE_METHODS order");
  return kTable;
}

const MethodDef& method_def(Method m) {
  const auto t = methods();
  KC_ASSERT(static_cast<std::size_t>(m) < t.size(), "no such method: {}", static_cast<int>(m));
  return *t[static_cast<std::size_t>(m)];
}

const MethodDef& default_method() { return method_def(Method::mixed); }

const char* method_name(Method m) { return method_def(m).name; }

std::optional<Method> parse_method(std::string_view s) {
  for (const MethodDef* m : methods())
    if (s == m->name) return m->id;
  return std::nullopt;
}

std::optional<Method> parse_spec_standard(std::string_view s) {
  for (const MethodDef* m : methods())
    if (m->standard && s == m->standard) return m->id;
  return parse_method(s);
}

Tolerance default_tolerance(Method m, DType d) { return method_def(m).defaults(d); }

namespace {
struct NumericKey {
  std::string_view key;
  std::optional<double> Tolerance::*field;
};
constexpr NumericKey kNumericKeys[] = {{"rtol", &Tolerance::rtol},
                                       {"atol", &Tolerance::atol},
                                       {"limit", &Tolerance::limit},
                                       {"threshold", &Tolerance::threshold},
                                       {"ptol", &Tolerance::ptol}};
constexpr auto kNumericKeyNames = [] {
  std::array<std::string_view, std::size(kNumericKeys)> a{};
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = kNumericKeys[i].key;
  return a;
}();
}  // namespace

std::optional<double> Tolerance::*tolerance_field(std::string_view key) {
  for (const auto& k : kNumericKeys)
    if (k.key == key) return k.field;
  return nullptr;
}

std::span<const std::string_view> numeric_tolerance_keys() { return kNumericKeyNames; }

std::string cli_method_names() { return join_names(true); }
std::string spec_only_method_names() { return join_names(false); }

std::string method_suggestion(std::string_view got) {
  std::vector<std::string_view> names;
  for (const MethodDef* m : methods())
    if (m->cli) names.push_back(m->name);
  return did_you_mean(got, names);
}

}  // namespace kc
