#include "compare/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/text_safe.h"
#include "numeric/dtype.h"

namespace kc {
namespace {

std::string num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{:.6g}", x);
}

// JSON has no NaN/inf: they become the strings "nan", "inf", "-inf"; other numbers stay exact doubles.
nlohmann::json jnum(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : (x > 0 ? "inf" : "-inf");
}

const char* verdict(bool pass) { return pass ? "PASS" : "FAIL"; }

}  // namespace

bool figure_ok(const Figure& f) {
  if (!f.limit) return true;
  const double v = f.value, l = *f.limit;
  if (f.relation == "<=") return v <= l;
  if (f.relation == "<") return v < l;
  if (f.relation == ">=") return v >= l;
  if (f.relation == ">") return v > l;
  return true;
}

std::string render_text(const CaseResult& c) {
  const CompareResult& r = c.result;
  std::string s = fmt::format("{}: {}  ({}, from {}; {}, {} elements)\n", c.name, verdict(r.pass),
                              method_name(r.method), r.route_source, dtype_name(r.dtype), r.numel);
  s += fmt::format("  reason: {}\n", r.reason);
  if (!r.params.empty()) {
    s += "  tolerances:";
    for (const auto& [k, v] : r.params) s += fmt::format(" {}={}", k, num(v));
    s += "\n";
  }
  if (!r.figures.empty()) {
    s += "  figures:\n";
    for (const auto& f : r.figures) {
      if (f.limit)
        s += fmt::format("    {:<22} {:>14}  {:<2} {:<14} {}\n", f.name, num(f.value), f.relation, num(*f.limit),
                         figure_ok(f) ? "ok" : "FAIL");
      else
        s += fmt::format("    {:<22} {:>14}\n", f.name, num(f.value));
    }
  }
  if (!r.nonfinite.empty()) {
    s += fmt::format("  NaN/Inf mismatches: {}\n", r.nonfinite_mismatches);
    for (const auto& k : r.nonfinite) {
      s += fmt::format("    {:<28} {:>10}  first at", k.name, k.count);
      for (auto i : k.first_indices) s += fmt::format(" {}", i);
      s += "\n";
    }
  }
  if (!r.worst.empty()) {
    s += fmt::format("  worst elements:\n    {:>12} {:>14} {:>14} {:>12} {:>12} {:>10}\n", "index", "golden", "actual",
                     "abs_err", "rel_err", "ulp");
    for (const auto& w : r.worst)
      s += fmt::format("    {:>12} {:>14} {:>14} {:>12} {:>12} {:>10}\n", w.index, num(w.golden), num(w.actual),
                       num(w.abs_err), num(w.rel_err), num(w.ulp_err));
  }
  if (!r.mismatch_indices.empty()) {
    s += "  first differing indices:";
    for (auto i : r.mismatch_indices) s += fmt::format(" {}", i);
    s += "\n";
  }
  std::uint64_t hmax = 0;
  for (auto v : r.log10_err_hist) hmax = std::max(hmax, v);
  if (hmax) {
    s += "  |a-g| histogram:\n";
    for (std::size_t i = 0; i < r.log10_err_hist.size(); ++i) {
      const auto v = r.log10_err_hist[i];
      if (!v) continue;
      const int bar = static_cast<int>(std::ceil(40.0 * static_cast<double>(v) / static_cast<double>(hmax)));
      s += fmt::format("    {:>8} {:>12} {}\n", i < r.log10_err_edges.size() ? r.log10_err_edges[i] : "?", v,
                       std::string(static_cast<std::size_t>(bar), '#'));
    }
  }
  if (!r.min_passing.empty()) s += fmt::format("  min passing tolerance: {}\n", r.min_passing);
  for (const auto& n : r.notes) s += fmt::format("  note: {}\n", n);
  return s;
}

std::string render_text_run(const std::vector<CaseResult>& cases) {
  std::string s;
  std::size_t passed = 0;
  for (const auto& c : cases) {
    s += render_text(c);
    s += "\n";
    passed += c.result.pass;
  }
  s += fmt::format("{} passed, {} failed\n", passed, cases.size() - passed);
  return s;
}

std::string render_json(const std::vector<CaseResult>& cases) {
  using nlohmann::json;
  json jc = json::array();
  std::size_t passed = 0;
  for (const auto& c : cases) {
    const CompareResult& r = c.result;
    passed += r.pass;
    json figs = json::array();
    for (const auto& f : r.figures) {
      json jf = {{"name", f.name}, {"value", jnum(f.value)}, {"ok", figure_ok(f)}};
      jf["limit"] = f.limit ? jnum(*f.limit) : json(nullptr);
      jf["relation"] = f.limit ? json(f.relation) : json(nullptr);
      figs.push_back(jf);
    }
    json params = json::object();
    for (const auto& [k, v] : r.params) params[k] = jnum(v);
    json worst = json::array();
    for (const auto& w : r.worst)
      worst.push_back({{"index", w.index}, {"golden", jnum(w.golden)}, {"actual", jnum(w.actual)},
                       {"abs_err", jnum(w.abs_err)}, {"rel_err", jnum(w.rel_err)}, {"ulp_err", jnum(w.ulp_err)}});
    json classes = json::array();
    for (const auto& k : r.nonfinite)
      classes.push_back({{"name", k.name}, {"count", k.count}, {"first_indices", k.first_indices}});
    jc.push_back({
        {"name", c.name},
        {"verdict", verdict(r.pass)},
        {"pass", r.pass},
        {"method", method_name(r.method)},
        {"route_source", r.route_source},
        {"dtype", dtype_name(r.dtype)},
        {"numel", r.numel},
        {"reason", r.reason},
        {"params", params},
        {"figures", figs},
        {"worst", worst},
        {"nonfinite", {{"mismatches", r.nonfinite_mismatches}, {"classes", classes}}},
        {"mismatch_indices", r.mismatch_indices},
        {"histogram", {{"edges", r.log10_err_edges}, {"counts", r.log10_err_hist}}},
        {"min_passing", r.min_passing},
        {"notes", r.notes},
    });
  }
  json root = {{"format", "kerncheck.compare"},
               {"version", 1},
               {"summary", {{"total", cases.size()}, {"passed", passed}, {"failed", cases.size() - passed}}},
               {"cases", jc}};
  // Replace invalid UTF-8 instead of throwing: names and notes may carry file names from anywhere.
  return root.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string render_junit(const std::vector<CaseResult>& cases, const std::string& suite) {
  std::size_t failures = 0;
  for (const auto& c : cases) failures += !c.result.pass;
  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += fmt::format("<testsuites tests=\"{}\" failures=\"{}\" errors=\"0\">\n", cases.size(), failures);
  s += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n",
                   xml_escape(suite), cases.size(), failures);
  for (const auto& c : cases) {
    const CompareResult& r = c.result;
    s += fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", xml_escape(suite), xml_escape(c.name));
    const std::string text = render_text(c);
    if (!r.pass)
      s += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml_escape(r.reason),
                       method_name(r.method), xml_escape(text));
    s += fmt::format("      <system-out>{}</system-out>\n", xml_escape(text));
    s += "    </testcase>\n";
  }
  s += "  </testsuite>\n</testsuites>\n";
  return s;
}

}  // namespace kc
