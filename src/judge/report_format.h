// Number formatting shared by the text and JSON reports (judge, sweep, demo): one rule for NaN and ±inf.
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace kc::report {

// Three significant digits; "-" for NaN (no value), "inf"/"-inf".
inline std::string g3(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.3g}", v);
}

// Five significant digits: perplexities of variants differ in the fourth.
inline std::string g5(double v) { return std::isfinite(v) ? fmt::format("{:.5g}", v) : g3(v); }

// JSON number; null for NaN, the strings "inf"/"-inf" for infinities (JSON has neither).
inline nlohmann::ordered_json num(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

}  // namespace kc::report
