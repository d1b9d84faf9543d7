// The method table (compare/methods.h) is consistent with what reads it: names parse back, every spec key
// has a place in Tolerance and a default, auto-routing claims each dtype at most once and route() follows
// it, and the spec parser accepts exactly each method's keys (with "did you mean" for a misspelled one).
// The seed's numbers themselves are checked against numpy in tests/py/test_compare_methods.py.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "compare/methods.h"
#include "compare/spec.h"
#include "core/error.h"

namespace kc {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The set fields of a Tolerance, by spec key.
std::set<std::string> set_keys(const Tolerance& t) {
  std::set<std::string> s;
  for (std::string_view k : numeric_tolerance_keys())
    if (t.*tolerance_field(k)) s.insert(std::string(k));
  if (t.level) s.insert("level");
  return s;
}

// A dtype of the spec tables the method may be declared in (and whose outputs it judges).
DType some_dtype(const MethodDef& m) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType d = static_cast<DType>(i);
    if (m.outputs.admits(d) && m.spec_tables.admits(d) && (!m.values || is_float(d))) return d;
  }
  ADD_FAILURE() << m.name << ": admits no dtype";
  return DType::float32;
}

TEST(MethodTable, InEnumOrderWithUniqueNamesThatParseBack) {
  const auto t = methods();
  for (const char* seed : {"mixed", "stat_rel_err", "close", "cosine", "binary", "requant", "quant", "cross_check"})
    EXPECT_TRUE(parse_method(seed)) << "seed 001's method " << seed << " is missing";
  std::set<std::string> names;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const MethodDef& m = *t[i];
    EXPECT_EQ(static_cast<std::size_t>(m.id), i) << m.name;
    EXPECT_EQ(&method_def(m.id), &m);
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    if (m.standard && std::string(m.standard) != m.name) {
      EXPECT_TRUE(names.insert(m.standard).second) << m.standard;
    }
    EXPECT_EQ(parse_method(m.name), m.id);
    EXPECT_EQ(parse_spec_standard(m.name), m.id);
    if (m.standard) {
      EXPECT_EQ(parse_spec_standard(m.standard), m.id);
    }
    EXPECT_STREQ(method_name(m.id), m.name);
    EXPECT_TRUE(m.run && m.defaults) << m.name;
    EXPECT_EQ(!m.outputs.ok, !m.outputs.expected) << m.name << ": a dtype rule needs its wording";
    EXPECT_EQ(!m.spec_tables.ok, !m.spec_tables.expected) << m.name;
  }
  EXPECT_EQ(parse_method("mix_tolerance"), std::nullopt);  // a spec spelling, not a CLI name
  EXPECT_EQ(default_method().id, Method::mixed);
}

TEST(MethodTable, NameListsComeFromTheTable) {
  std::vector<std::string> cli, spec_only;
  for (const MethodDef* m : methods()) (m->cli ? cli : spec_only).push_back(m->name);
  EXPECT_EQ(cli_method_names(), fmt::format("{}", fmt::join(cli, ", ")));
  EXPECT_EQ(spec_only_method_names(), fmt::format("{}", fmt::join(spec_only, ", ")));
  EXPECT_EQ(cli_method_names(), "mixed, stat_rel_err, close, cosine, binary, requant, cross_check");
  EXPECT_EQ(method_suggestion("stat_rel_eror"), " (did you mean \"stat_rel_err\"?)");
  EXPECT_EQ(method_suggestion("zzzzzzzz"), "");
}

TEST(MethodTable, DefaultsSetExactlyTheKeysForEveryAdmittedDtype) {
  for (const MethodDef* m : methods()) {
    const std::set<std::string> keys(m->keys.begin(), m->keys.end());
    for (std::string_view k : m->keys) EXPECT_TRUE(tolerance_field(k) || k == "level") << m->name << " " << k;
    for (std::string_view k : m->csv_keys) EXPECT_TRUE(keys.count(std::string(k))) << m->name << " csv " << k;
    for (int i = 0; i < kDTypeCount; ++i) {
      const DType d = static_cast<DType>(i);
      if (!m->outputs.admits(d) || !m->spec_tables.admits(d)) continue;
      EXPECT_EQ(set_keys(m->defaults(d)), keys) << m->name << " " << dtype_name(d);
      EXPECT_EQ(set_keys(default_tolerance(m->id, d)), keys) << m->name << " " << dtype_name(d);
    }
  }
}

TEST(MethodTable, AutoRoutingClaimsEachDtypeOnceAndRouteFollowsIt) {
  for (int i = 0; i < kDTypeCount; ++i) {
    const DType d = static_cast<DType>(i);
    const MethodDef* claimed = nullptr;
    for (const MethodDef* m : methods())
      if (m->auto_for && m->auto_for(d)) {
        EXPECT_EQ(claimed, nullptr) << dtype_name(d) << " claimed by " << claimed->name << " and " << m->name;
        claimed = m;
        EXPECT_TRUE(m->outputs.admits(d)) << m->name << " routed for " << dtype_name(d) << " it cannot judge";
      }
    RouteRequest req;
    req.output_dtype = d;
    const Route r = route(req);
    EXPECT_EQ(r.method, claimed ? claimed->id : default_method().id) << dtype_name(d);
    EXPECT_EQ(r.source, claimed ? fmt::format("auto: {} → {}", dtype_name(d), claimed->name) : "default");
  }
}

TEST(MethodTable, SpecAcceptsEachKeyAndRefusesOthersWithASuggestion) {
  for (const MethodDef* m : methods()) {
    const std::string std_name = m->standard ? m->standard : m->name;
    const std::string table = fmt::format("[op.{}]\nstandard = \"{}\"\n", dtype_name(some_dtype(*m)), std_name);
    for (std::string_view k : m->keys) {
      const std::string value = k == "level" ? "\"L2\"" : "0.5";
      const Spec s = parse_spec(fmt::format("{}{} = {}\n", table, k, value), "s.toml");
      ASSERT_EQ(s.entries.size(), 1u);
      EXPECT_EQ(s.entries[0].method, m->id);
      EXPECT_EQ(set_keys(s.entries[0].tol), std::set<std::string>{std::string(k)}) << m->name;
    }
    // one letter doubled: refused, and the key is suggested
    for (std::string_view k : m->keys) {
      const std::string typo = std::string(k) + std::string(1, k.back());
      EXPECT_NE(error_of([&] { parse_spec(fmt::format("{}{} = 1\n", table, typo), "s.toml"); })
                    .find(fmt::format("got unknown key \"{}\" (did you mean \"{}\"?)", typo, k)),
                std::string::npos)
          << m->name << " " << typo;
    }
    std::vector<std::string_view> all(numeric_tolerance_keys().begin(), numeric_tolerance_keys().end());
    all.push_back("level");
    for (std::string_view other : all) {
      if (std::find(m->keys.begin(), m->keys.end(), other) != m->keys.end()) continue;
      EXPECT_NE(error_of([&] { parse_spec(fmt::format("{}{} = 1\n", table, other), "s.toml"); })
                    .find(fmt::format("expected a key that {} reads", std_name)),
                std::string::npos)
          << m->name << " " << other;
    }
  }
  EXPECT_NE(error_of([] { parse_spec("[op.float32]\nstandard = \"stat_rel_er\"\n", "s.toml"); })
                .find("got \"stat_rel_er\" (did you mean \"stat_rel_err\"?)"),
            std::string::npos);
}

}  // namespace
}  // namespace kc
