#include "judge/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace kc::svg {

namespace {

constexpr double kMarginLinearShare = 0.6;  // share of the axis for margins in [0, 1]

struct Frame {
  double left = 66, right = 14, top = 46, bottom = 46;
};

// Maps a value to [0, 1] along an axis (NaN when it cannot be drawn).
struct Mapper {
  Scale scale;
  double lo, hi;
  double operator()(double v) const {
    if (!std::isfinite(v)) return NAN;
    switch (scale) {
      case Scale::linear:
        return (v - lo) / (hi - lo);
      case Scale::log10:
        if (v <= 0) return NAN;
        return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
      case Scale::margin:
        if (v <= 1) return kMarginLinearShare * std::max(v, 0.0);
        return kMarginLinearShare + (1 - kMarginLinearShare) * std::log10(v) / std::log10(hi);
    }
    return NAN;
  }
};

void data_range(const Plot& p, bool x_axis, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  const Axis& a = x_axis ? p.x : p.y;
  for (auto& s : p.series) {
    auto scan = [&](const std::vector<double>& v) {
      for (double d : v) {
        if (!std::isfinite(d) || (a.scale == Scale::log10 && d <= 0)) continue;
        lo = std::min(lo, d);
        hi = std::max(hi, d);
      }
    };
    scan(x_axis ? s.x : s.y);
    if (!x_axis) scan(s.y_lo), scan(s.y_hi);
    if (!x_axis && s.mark == Mark::bars && a.scale == Scale::linear) lo = std::min(lo, 0.0);
  }
}

Mapper make_mapper(const Plot& p, bool x_axis) {
  const Axis& a = x_axis ? p.x : p.y;
  if (x_axis && !p.x_categories.empty()) return {Scale::linear, -0.5, p.x_categories.size() - 0.5};
  double lo, hi;
  data_range(p, x_axis, lo, hi);
  if (!std::isfinite(lo)) lo = a.scale == Scale::linear ? 0 : 1e-6, hi = 1;
  switch (a.scale) {
    case Scale::linear: {
      if (hi == lo) hi = lo + 1;
      double pad = 0.04 * (hi - lo);
      if (lo != 0) lo -= pad;
      hi += pad;
      break;
    }
    case Scale::log10:
      lo = std::pow(10.0, std::floor(std::log10(lo)));
      hi = std::pow(10.0, std::ceil(std::log10(hi)));
      if (hi <= lo) hi = lo * 10;
      break;
    case Scale::margin:
      lo = 0;
      hi = std::max(10.0, std::pow(10.0, std::ceil(std::log10(std::max(hi, 1.0)))));
      break;
  }
  if (std::isfinite(a.lo)) lo = a.lo;
  if (std::isfinite(a.hi)) hi = a.hi;
  return {a.scale, lo, hi};
}

std::vector<double> ticks(const Mapper& m) {
  std::vector<double> t;
  switch (m.scale) {
    case Scale::linear: {
      double raw = (m.hi - m.lo) / 5;
      double mag = std::pow(10.0, std::floor(std::log10(raw)));
      double step = mag * (raw / mag >= 5 ? 5 : raw / mag >= 2 ? 2 : 1);
      for (double v = std::ceil(m.lo / step) * step; v <= m.hi + 1e-9 * step; v += step)
        t.push_back(std::abs(v) < 1e-12 * step ? 0 : v);
      break;
    }
    case Scale::log10: {
      int a = static_cast<int>(std::ceil(std::log10(m.lo) - 1e-9)),
          b = static_cast<int>(std::floor(std::log10(m.hi) + 1e-9));
      int every = std::max(1, (b - a + 7) / 8);
      for (int e = a; e <= b; ++e)
        if ((e - a) % every == 0) t.push_back(std::pow(10.0, e));
      break;
    }
    case Scale::margin: {
      for (double v : {0.0, 0.25, 0.5, 0.75, 1.0}) t.push_back(v);
      for (double v = 10; v <= m.hi * (1 + 1e-9); v *= 10) t.push_back(v);
      break;
    }
  }
  return t;
}

}  // namespace

const std::vector<std::string>& palette() {
  static const std::vector<std::string> p = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                             "#56B4E9", "#D55E00", "#F0E442", "#000000"};
  return p;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  double a = std::abs(v);
  if (a >= 1e-3 && a < 1e4) {
    std::string s = fmt::format("{:.4g}", v);
    return s;
  }
  int e = static_cast<int>(std::floor(std::log10(a)));
  double m = v / std::pow(10.0, e);
  if (std::abs(m - std::round(m)) < 1e-9) {
    if (std::round(m) == 1) return fmt::format("1e{}", e);
    return fmt::format("{}e{}", static_cast<int>(std::round(m)), e);
  }
  return fmt::format("{:.2g}", v);
}

std::string decade_label(double v) {
  int e = static_cast<int>(std::lround(std::log10(v)));
  if (e >= -2 && e <= 2) return tick_label(std::pow(10.0, e));
  return fmt::format("1e{}", e);
}

namespace {

// Label text width in px at font-size 11 (sans-serif averages ~6.2 px a character; digits a bit less).
double text_width(std::string_view t) {
  std::size_t chars = 0;
  for (unsigned char c : t) chars += (c & 0xC0) != 0x80;  // UTF-8 code points
  return 6.2 * static_cast<double>(chars);
}

std::string dash_of(const Series& se) {
  std::string d = !se.dasharray.empty() ? se.dasharray : se.dashed ? "5,3" : "";
  return d.empty() ? "" : fmt::format(" stroke-dasharray=\"{}\"", escape(d));
}

}  // namespace

std::string render(const Plot& p) {
  Frame fr;
  const double W = p.width, H = p.height;
  // Legend: entries left to right under the title, wrapping; the plot area starts below its rows.
  struct LegendItem {
    std::size_t series;
    double x;
    int row;
  };
  std::vector<LegendItem> items;
  {
    double x = fr.left;
    int row = 0;
    for (std::size_t i = 0; i < p.series.size(); ++i) {
      if (p.series[i].name.empty()) continue;
      double w = 26 + text_width(p.series[i].name);
      if (x > fr.left && x + w > W - fr.right) x = fr.left, ++row;
      items.push_back({i, x, row});
      x += w + 12;
    }
    if (!items.empty()) fr.top = 40 + 14 * items.back().row;
  }
  const double pw = W - fr.left - fr.right, ph = H - fr.top - fr.bottom;
  Mapper mx = make_mapper(p, true), my = make_mapper(p, false);
  auto X = [&](double v) { return fr.left + mx(v) * pw; };
  auto Y = [&](double v) { return fr.top + (1 - my(v)) * ph; };
  static int clip_counter = 0;  // plots without an id still get a clip id unique within the process
  std::string clip = p.id.empty() ? fmt::format("clip{}", ++clip_counter) : "clip-" + p.id;

  std::string s;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\"{} width=\"{}\" height=\"{}\" viewBox=\"0 0 "
      "{} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      p.id.empty() ? "" : fmt::format(" id=\"{}\"", escape(p.id)), W, H, W, H);
  s += fmt::format("<title>{}</title>\n", escape(p.title));
  s += fmt::format(
      "<defs><clipPath id=\"{}\"><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"/>"
      "</clipPath></defs>\n",
      clip, fr.left - 4, fr.top - 4, pw + 8, ph + 8);
  s += fmt::format(
      "<text class=\"plot-title\" x=\"{:.1f}\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
      fr.left, escape(p.title));
  // Grey band for the log part of a margin axis.
  if (p.x.scale == Scale::margin)
    s +=
        fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#eeeeee\"/>\n",
                    X(1.0), fr.top, fr.left + pw - X(1.0), ph);
  // Axes and ticks.
  s += fmt::format(
      "<g class=\"axes\" stroke=\"#444\" stroke-width=\"1\">"
      "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\"/>"
      "<line x1=\"{0:.1f}\" y1=\"{3:.1f}\" x2=\"{0:.1f}\" y2=\"{1:.1f}\"/></g>\n",
      fr.left, fr.top + ph, fr.left + pw, fr.top);
  s += "<g class=\"ticks\" fill=\"#333\">\n";
  if (!p.x_categories.empty()) {
    // Labels wider than their slot alternate between two rows, so neighbours never overlap.
    double slot = pw / std::max<std::size_t>(p.x_categories.size(), 1), widest = 0;
    for (auto& c : p.x_categories) widest = std::max(widest, text_width(c));
    bool stagger = widest + 4 > slot;
    for (std::size_t i = 0; i < p.x_categories.size(); ++i)
      s += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       X(static_cast<double>(i)), fr.top + ph + 14 + (stagger && i % 2 ? 12 : 0),
                       escape(p.x_categories[i]));
  } else {
    // Every tick gets its mark; a label is skipped when it would touch the previous one.
    double last_right = -1e9;
    for (double t : ticks(mx)) {
      double x = X(t);
      if (!std::isfinite(x) || x < fr.left - 0.5 || x > fr.left + pw + 0.5) continue;
      std::string label = mx.scale == Scale::log10 ? decade_label(t) : tick_label(t);
      double half = text_width(label) / 2;
      bool show = x - half >= last_right + 4;
      if (show) last_right = x + half;
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#444\"/>",
                       x, fr.top + ph, fr.top + ph + 4);
      if (show)
        s += fmt::format("<text class=\"xtick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                         x, fr.top + ph + 15, escape(label));
      s += "\n";
    }
  }
  double last_y = 1e9;
  for (double t : ticks(my)) {
    double y = Y(t);
    if (!std::isfinite(y) || y < fr.top - 0.5 || y > fr.top + ph + 0.5) continue;
    bool show = last_y - y >= 13;  // ticks come bottom-up: one text line apart at least
    if (show) last_y = y;
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>",
                     fr.left, y, fr.left + pw);
    if (show)
      s +=
          fmt::format("<text class=\"ytick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                      fr.left - 5, y + 4, escape(my.scale == Scale::log10 ? decade_label(t) : tick_label(t)));
    s += "\n";
  }
  s += "</g>\n";
  s += fmt::format(
      "<text class=\"axis-label x-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
      fr.left + pw / 2, H - 8, escape(p.x.label));
  s += fmt::format(
      "<text class=\"axis-label y-label\" transform=\"translate(14,{:.1f}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      fr.top + ph / 2, escape(p.y.label));

  // Series.
  int n_bars = 0;
  for (auto& se : p.series) n_bars += se.mark == Mark::bars;
  double bar_w = p.x_categories.empty() ? 8 : 0.8 * pw / p.x_categories.size() / std::max(1, n_bars);
  s += fmt::format("<g clip-path=\"url(#{})\">\n", clip);
  std::size_t color_i = 0;
  std::vector<std::string> colors;
  for (auto& se : p.series) {
    std::string color = se.color.empty() ? palette()[color_i++ % palette().size()] : se.color;
    colors.push_back(color);
    std::string cls = se.css_class.empty() ? "" : fmt::format(" class=\"{}\"", escape(se.css_class));
    std::string dash = dash_of(se);
    std::size_t n = std::min(se.x.size(), se.y.size());
    auto title = [&](std::size_t i) {
      return i < se.titles.size() ? fmt::format("<title>{}</title>", escape(se.titles[i])) : std::string();
    };
    if (se.mark == Mark::band) {
      // One polygon per run of finite bounds: along y_hi, back along y_lo.
      std::size_t m = std::min({se.x.size(), se.y_lo.size(), se.y_hi.size()});
      std::vector<std::pair<double, double>> up, down;
      auto flush = [&] {
        if (up.size() >= 2) {
          std::string pts;
          for (auto& [x, y] : up) pts += fmt::format("{:.1f},{:.1f} ", x, y);
          for (std::size_t k = down.size(); k-- > 0;)
            pts += fmt::format("{:.1f},{:.1f} ", down[k].first, down[k].second);
          s += fmt::format("<polygon{} fill=\"{}\" fill-opacity=\"0.22\" stroke=\"none\" points=\"{}\"/>\n",
                           cls, color, pts);
        }
        up.clear(), down.clear();
      };
      for (std::size_t i = 0; i < m; ++i) {
        double x = X(se.x[i]), y0 = Y(se.y_lo[i]), y1 = Y(se.y_hi[i]);
        if (!std::isfinite(x) || !std::isfinite(y0) || !std::isfinite(y1)) {
          flush();
          continue;
        }
        up.emplace_back(x, y1), down.emplace_back(x, y0);
      }
      flush();
      continue;  // no error bars on a band
    }
    if (se.mark == Mark::line || se.mark == Mark::step) {
      std::string pts;
      double prev_y = NAN;
      auto flush = [&] {
        if (!pts.empty())
          s += fmt::format("<polyline{} fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\"{} points=\"{}\"/>\n",
                           cls, color, dash, pts);
        pts.clear();
        prev_y = NAN;
      };
      for (std::size_t i = 0; i < n; ++i) {
        double x = X(se.x[i]), y = Y(se.y[i]);
        if (!std::isfinite(x) || !std::isfinite(y)) {
          flush();
          continue;
        }
        if (se.mark == Mark::step && std::isfinite(prev_y)) pts += fmt::format("{:.1f},{:.1f} ", x, prev_y);
        pts += fmt::format("{:.1f},{:.1f} ", x, y);
        prev_y = y;
      }
      flush();
    } else if (se.mark == Mark::points) {
      for (std::size_t i = 0; i < n; ++i) {
        double x = X(se.x[i]), y = Y(se.y[i]);
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        s += fmt::format(
            "<circle{} cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" fill-opacity=\"0.75\">{}</circle>\n",
            cls, x, y, se.radius, color, title(i));
      }
    } else {  // bars
      double base = Y(p.y.scale == Scale::log10 ? my.lo : std::max(my.lo, 0.0));
      for (std::size_t i = 0; i < n; ++i) {
        double xc = X(se.x[i]) + se.bar_offset * bar_w, y = Y(se.y[i]);
        if (!std::isfinite(xc)) continue;
        if (!std::isfinite(y)) y = base;
        s += fmt::format(
            "<rect{} x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">{}</rect>\n",
            cls, xc - bar_w / 2, std::min(y, base), bar_w, std::abs(base - y), color, title(i));
      }
    }
    if (!se.y_lo.empty() && se.y_lo.size() == se.y.size() && se.y_hi.size() == se.y.size()) {
      for (std::size_t i = 0; i < n; ++i) {
        double x = X(se.x[i]) + (se.mark == Mark::bars ? se.bar_offset * bar_w : 0);
        double y0 = Y(se.y_lo[i]), y1 = Y(se.y_hi[i]);
        if (!std::isfinite(x)) continue;
        if (!std::isfinite(y0)) y0 = fr.top + ph;  // e.g. a lower bound of 0 on a log axis
        if (!std::isfinite(y1)) continue;
        s += fmt::format(
            "<path class=\"errbar\" "
            "d=\"M{0:.1f},{1:.1f}V{2:.1f}M{3:.1f},{1:.1f}H{4:.1f}M{3:.1f},{2:.1f}H{4:.1f}\" "
            "stroke=\"#222\" stroke-width=\"1\" fill=\"none\"/>\n",
            x, y0, y1, x - 3, x + 3);
      }
    }
  }
  s += "</g>\n";
  // Legend: each swatch drawn as its series is (line with its dash, point, bar, band), not only its colour.
  s += "<g class=\"legend\">\n";
  for (const LegendItem& it : items) {
    const Series& se = p.series[it.series];
    const std::string& c = colors[it.series];
    double y = 30 + 14 * it.row;  // text baseline; the swatch is centred on y - 4
    switch (se.mark) {
      case Mark::line:
      case Mark::step:
        s += fmt::format(
            "<line class=\"swatch\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
            "stroke-width=\"2\"{}/>",
            it.x, y - 4, it.x + 20, y - 4, c, dash_of(se));
        break;
      case Mark::points:
        s += fmt::format(
            "<circle class=\"swatch\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
            "fill-opacity=\"0.75\"/>",
            it.x + 10, y - 4, std::clamp(se.radius, 2.0, 4.0), c);
        break;
      case Mark::bars:
        s += fmt::format(
            "<rect class=\"swatch\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"9\" fill=\"{}\"/>",
            it.x + 3, y - 9, c);
        break;
      case Mark::band:
        s += fmt::format(
            "<rect class=\"swatch\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"20\" height=\"9\" fill=\"{}\" "
            "fill-opacity=\"0.22\"/>",
            it.x, y - 9, c);
        break;
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", it.x + 26, y, escape(se.name));
  }
  s += "</g>\n";
  s += "</svg>\n";
  return s;
}

std::string table_page_head(std::string_view title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n"
         "<style>body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;"
         "max-width:1320px;color:#1f2328;padding:0 "
         "12px}table{border-collapse:collapse;font-size:13px;display:block;"
         "max-width:100%;overflow-x:auto}svg{max-width:100%;height:auto}td,th{border:1px solid "
         "#d0d7de;padding:3px "
         "8px;text-align:right}th{background:#f6f8fa}td.l{text-align:left}.FAIL{color:#cf222e;"
         "font-weight:600}.PASS{color:#1a7f37;font-weight:600}.INCONCLUSIVE{color:#9a6700}</style></head>"
         "<body>\n";
}

}  // namespace kc::svg
