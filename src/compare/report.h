// Rendering of comparison results: text (terminal), JSON (machine-readable, keys documented in
// docs/compare.md) and JUnit XML (CI dashboards). Pure functions of the results: no I/O.
#pragma once
#include <string>
#include <vector>

#include "compare/compare.h"

namespace kc {

struct CaseResult {
  std::string name;  // case name, e.g. "matmul[0]:out0" or the golden file's name
  CompareResult result;
};

// One case: verdict, method and route, figures against limits, worst elements, NaN/Inf mismatch
// classes, |a−g| histogram, smallest passing tolerance, notes.
std::string render_text(const CaseResult& c);
// Every case, then the line "N passed, N failed".
std::string render_text_run(const std::vector<CaseResult>& cases);
// {"format": "kerncheck.compare", "version": 1, "summary": {...}, "cases": [...]} (docs/compare.md).
std::string render_json(const std::vector<CaseResult>& cases);
// <testsuites><testsuite name=suite …><testcase …>…; failures carry the reason and the text report.
std::string render_junit(const std::vector<CaseResult>& cases, const std::string& suite = "kerncheck.compare");

// Whether a figure meets its limit (true when it has none).
bool figure_ok(const Figure& f);

}  // namespace kc
