// Small, dependency-free SVG charts for the HTML reports (judge report now, sweep curves later):
// axes with ticks and labels, lines, steps, points and error bars, on linear, log or "margin" axes.
// Output is a standalone <svg> element (inline styles only, no scripts, no external references).
//
// **Example**:
//   svg::Plot p;
//   p.title = "KL vs mantissa bits";
//   p.x = {"mantissa bits", svg::Scale::linear};
//   p.y = {"median KL", svg::Scale::log10};
//   p.series.push_back({.name = "gdn.state", .x = {4, 7, 10, 16}, .y = {3e-2, 2e-3, 4e-4, 2.5e-4}});
//   std::string html = svg::render(p);   // "<svg …>…</svg>"
#pragma once
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace kc::svg {

enum class Scale {
  linear,
  log10,   // values ≤ 0 are not drawn
  margin,  // linear on [0, 1] (60 % of the width), log10 above 1 on a grey band (the seed's figure)
};

struct Axis {
  std::string label;
  Scale scale = Scale::linear;
  double lo = NAN, hi = NAN;  // NaN: from the data
};

// band: a shaded area between y_lo and y_hi (y unused), e.g. the noise runs' spread.
enum class Mark { line, step, points, bars, band };

struct Series {
  std::string name;  // legend text ("" = no legend entry)
  std::vector<double> x, y;
  Mark mark = Mark::line;
  std::string color = "";  // "" = next of the palette
  std::string css_class;   // class attribute on every mark (e.g. "flip"), for tests and styling
  double radius = 2.0;     // points
  bool dashed = false;     // the default dash pattern ("5,3")
  std::string dasharray;   // a stroke-dasharray of its own (overrides dashed), so lines of one colour differ
  std::vector<double> y_lo, y_hi;   // error bars (same length as y) or empty
  double bar_offset = 0;            // bars: horizontal offset in bar widths (side-by-side bars)
  std::vector<std::string> titles;  // per-mark tooltip (<title>), optional
};

struct Plot {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  std::vector<std::string> x_categories;  // non-empty: x is the category index 0..n-1 (bars)
  int width = 560, height = 340;
  std::string id;  // id attribute of the <svg>
};

std::string render(const Plot& plot);

// Text and attribute escaping for HTML/SVG.
std::string escape(std::string_view text);

// The head of a page of tables and plots (the demo's and the sweep's index pages), up to and with <body>.
std::string table_page_head(std::string_view title);

// "1e-3", "0.25", "12" — short numbers for tick labels.
std::string tick_label(double v);
// A decade on a log axis: "0.01" … "100" near 1, "1e-6", "1e5" beyond.
std::string decade_label(double v);

// The palette (colour-blind safe, Okabe–Ito).
const std::vector<std::string>& palette();

}  // namespace kc::svg
