// Routing (docs/compare.md's priority rules), input checks, dispatch and the helpers every method shares. The methods
// (names, keys, defaults, dtype rules, pass functions) are the table of compare/methods.h.
#include "compare/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>

#include "compare/compare_internal.h"
#include "compare/methods.h"
#include "core/error.h"
#include "numeric/formats.h"

namespace kc {

namespace {
bool is_float_like(DType d) { return is_float(d) || is_complex(d); }
}  // namespace

// --- routing ------------------------------------------------------------------------------------------

namespace {

Tolerance merge_tol(const Tolerance& hi, const Tolerance& lo) {
  Tolerance t = hi;
  for (std::string_view k : numeric_tolerance_keys()) {
    const auto f = tolerance_field(k);
    if (!(t.*f)) t.*f = lo.*f;
  }
  if (!t.level) t.level = lo.level;
  return t;
}

// Legacy CSV fields (precision_tolerances → rtol, ptol; absolute_precision → atol): the ones the method
// reads (close: all three, cosine: rtol).
Tolerance csv_for(Method m, const Tolerance& csv) {
  Tolerance t;
  for (std::string_view k : method_def(m).csv_keys) t.*tolerance_field(k) = csv.*tolerance_field(k);
  return t;
}

void check_method_dtype(Method m, DType d, const std::string& where) {
  const MethodDef& def = method_def(m);
  if (!def.outputs.admits(d)) fail("{}: {}: expected {}, got {}", where, def.name, def.outputs.expected, dtype_name(d));
}

}  // namespace

Route route(const RouteRequest& r) {
  const DType out = r.output_dtype;
  const std::string spec_where = r.spec_where.empty() ? std::string("spec") : r.spec_where;
  if (r.cli_method == Method::quant)
    fail("--compare quant: expected a method other than quant (quant is declared only in a spec: "
         "standard = \"quant\" for an int4/int8 output), got quant");

  Route rt;
  if (r.spec_method == Method::quant) {
    if (out != DType::int8 && out != DType::int4)
      fail("{}: standard: expected quant only for an int4 or int8 output, got output dtype {}", spec_where,
           dtype_name(out));
    bool any_float = false;
    for (DType d : r.input_dtypes) any_float |= is_float_like(d);
    if (!r.input_dtypes.empty() && !any_float)
      fail("{}: standard: expected quant only for an operator with at least one floating input, got inputs "
           "that are all non-float",
           spec_where);
    // A float method from --compare does not override a quant declaration; binary (exact) does.
    if (!r.cli_method || *r.cli_method != Method::binary) {
      rt.method = Method::quant;
      rt.source = spec_where;
      if (r.cli_method) rt.source += fmt::format(" (quant kept over --compare {})", method_name(*r.cli_method));
      if (r.input_dtypes.empty()) rt.source += " (input dtypes unknown: float-input check skipped)";
      rt.tol = r.spec_tol;
      return rt;
    }
  }

  if (r.cli_method) {
    rt.method = *r.cli_method;
    rt.source = "--compare";
    // The spec's overrides still apply when it declares the same method.
    rt.tol = merge_tol(r.spec_method == rt.method ? r.spec_tol : Tolerance{}, csv_for(rt.method, r.csv_tol));
  } else if (r.spec_method) {
    rt.method = *r.spec_method;
    rt.source = spec_where;
    rt.tol = merge_tol(r.spec_tol, csv_for(rt.method, r.csv_tol));
  } else {
    const MethodDef* routed = nullptr;
    for (const MethodDef* m : methods())
      if (m->auto_for && m->auto_for(out)) {
        routed = m;
        break;
      }
    rt.method = routed ? routed->id : default_method().id;
    rt.source = routed ? fmt::format("auto: {} → {}", dtype_name(out), routed->name) : std::string("default");
    // mixed does not read the legacy CSV fields (seed: override it in a spec instead).
    rt.tol = csv_for(rt.method, r.csv_tol);
  }
  check_method_dtype(rt.method, out, rt.source);
  return rt;
}

// --- shared helpers -------------------------------------------------------------------------------------

namespace cmp {

const char* nf_class_name(int c) {
  static constexpr const char* kNames[kNfClasses] = {
      "golden NaN, actual not NaN", "actual NaN, golden not NaN", "golden inf, actual finite",
      "actual inf, golden finite", "inf of opposite sign"};
  return kNames[c];
}

void NonFiniteAcc::to_result(CompareResult& r) const {
  for (int c = 0; c < kNfClasses; ++c) {
    if (!count[c]) continue;
    r.nonfinite.push_back({nf_class_name(c), static_cast<std::size_t>(count[c]), first[c]});
  }
  r.nonfinite_mismatches = total();
  if (matched) r.notes.push_back(fmt::format("{} NaN/NaN or same-sign inf pairs counted as equal", matched));
}

namespace {
constexpr std::array<double, kHistBins - 2> kEdges = {1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5,
                                                      1e-4,  1e-3,  1e-2,  1e-1, 1e0,  1e1,  1e2};
}  // namespace

const std::vector<std::string>& hist_labels() {
  static const std::vector<std::string> labels = [] {
    std::vector<std::string> l{"0"};
    for (double e : kEdges) l.push_back(fmt::format("<={:g}", e));
    l.push_back(fmt::format(">{:g}", kEdges.back()));
    return l;
  }();
  return labels;
}

int hist_bucket(double d) {
  if (d == 0) return 0;
  if (std::isnan(d)) return kHistBins - 1;
  int k = 0;
  while (k < static_cast<int>(kEdges.size()) && d > kEdges[k]) ++k;
  return 1 + k;
}

double quantile_upper_edge(int bin) {
  if (bin == 0) return 0;
  if (bin == 1) return std::ldexp(1.0, kQMinExp);
  if (bin >= kQBins - 1) return std::numeric_limits<double>::infinity();
  const std::uint64_t key = static_cast<std::uint64_t>(bin - 2 + ((1023 + kQMinExp) << 4) + 1);
  return std::bit_cast<double>(key << 48);
}

double quantile_at_least(const std::vector<std::uint64_t>& hist, std::uint64_t k) {
  std::uint64_t cum = 0;
  for (int b = 0; b < static_cast<int>(hist.size()); ++b) {
    cum += hist[b];
    if (cum >= k) return quantile_upper_edge(b);
  }
  return std::numeric_limits<double>::infinity();
}

std::string fmt_g(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{}", x);
}

void add_figure(CompareResult& r, std::string name, double value, std::optional<double> limit,
                std::string relation) {
  r.figures.push_back({std::move(name), value, limit, std::move(relation)});
}

DType component_dtype(DType d) {
  switch (d) {
    case DType::complex32: return DType::float16;
    case DType::complex64: return DType::float32;
    case DType::complex128: return DType::float64;
    default: return d;
  }
}

double ulp_of(DType d, double x) {
  const DType c = component_dtype(d);
  if (!is_float(c)) return 1.0;
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  return ulp(c, x);
}

double value_at(const Tensor& t, std::size_t i) {
  if (is_complex(t.dtype)) {
    double v[2];
    decode_complex_block(t.dtype, t.bytes, i, 1, v);
    return std::hypot(v[0], v[1]);
  }
  double v;
  decode_block(t.dtype, t.bytes, i, 1, &v);
  return v;
}

void fill_worst(CompareResult& r, const TopK& top, const Tensor& a, const Tensor& g) {
  for (int k = 0; k < top.count; ++k) {
    const std::size_t i = top.items[k].index;
    WorstElement w;
    w.index = i;
    w.actual = value_at(a, i);
    w.golden = value_at(g, i);
    if (is_complex(g.dtype)) {
      double va[2], vg[2];
      decode_complex_block(a.dtype, a.bytes, i, 1, va);
      decode_complex_block(g.dtype, g.bytes, i, 1, vg);
      w.abs_err = std::hypot(va[0] - vg[0], va[1] - vg[1]);
    } else {
      w.abs_err = std::fabs(w.actual - w.golden);
    }
    const double ag = std::fabs(w.golden);
    w.rel_err = ag > 0 ? w.abs_err / ag : (w.abs_err > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    w.ulp_err = w.abs_err / ulp_of(a.dtype, w.golden);
    r.worst.push_back(w);
  }
}

}  // namespace cmp

// --- dispatch --------------------------------------------------------------------------------------------

CompareResult compare(const CompareInputs& in, const Route& route) {
  KC_ASSERT(in.actual && in.golden, "compare() needs actual and golden");
  const Tensor& a = *in.actual;
  const Tensor& g = *in.golden;
  const std::size_t n = g.numel();
  // A (3, 4) and a (4, 3) array hold the same count in another layout: equal only when asked to be flat.
  for (const Tensor* t : {&a, in.third})
    if (t && !in.flat && t->shape != g.shape)
      throw_input_error(t->origin, "shape",
                        fmt::format("{} like the golden {} (--flat compares the elements in order)", g.shape_str(),
                                    g.origin),
                        t->shape_str());
  if (a.numel() != n)
    throw_input_error(a.origin, "element count",
                      fmt::format("{} (golden {} has shape {})", n, g.origin, g.shape_str()),
                      fmt::format("{} (shape {})", a.numel(), a.shape_str()));
  const Method m = route.method;
  const MethodDef& def = method_def(m);
  const bool same = a.dtype == g.dtype;
  if (m == Method::binary) {
    if (!same && !(is_integer(a.dtype) && is_integer(g.dtype)))
      throw_input_error(a.origin, "dtype",
                        fmt::format("{} like golden {} (binary compares across dtypes only between two "
                                    "integer types)",
                                    dtype_name(g.dtype), g.origin),
                        dtype_name(a.dtype));
  } else if (!same && !(def.values && is_float(a.dtype) && is_float(g.dtype))) {
    std::vector<std::string> wider;
    for (const MethodDef* v : methods())
      if (v->values) wider.push_back(v->name);
    std::string names;  // "mixed, stat_rel_err, close and cosine"
    for (std::size_t i = 0; i < wider.size(); ++i)
      names += (i == 0 ? "" : i + 1 == wider.size() ? " and " : ", ") + wider[i];
    throw_input_error(a.origin, "dtype",
                      fmt::format("{} like golden {} ({} needs equal dtypes; {} also take a golden of another "
                                  "real float type)",
                                  dtype_name(g.dtype), g.origin, def.name, names),
                      dtype_name(a.dtype));
  }
  // Tolerances and ULPs belong to the output dtype: the actual's. A golden kept in f32/f64 (not rounded
  // to the output type) is compared value for value.
  const DType out = a.dtype;
  check_method_dtype(m, out, a.origin);
  if (m == Method::quant && g.dtype != DType::int8 && g.dtype != DType::int4)
    throw_input_error(g.origin, "dtype", "int4 or int8 (quant)", dtype_name(g.dtype));

  const Tolerance tol = merge_tol(route.tol, default_tolerance(m, out));
  CompareResult r;
  if (n == 0) {
    r.pass = true;
    r.reason = "empty tensors";
  } else {
    if (def.needs_third) {
      if (!in.third) fail("{}: expected a third-party tensor (b), got none", def.name);
      const Tensor& b = *in.third;
      if (b.dtype != g.dtype)
        throw_input_error(b.origin, "dtype", fmt::format("{} like golden {}", dtype_name(g.dtype), g.origin),
                          dtype_name(b.dtype));
      if (b.numel() != n)
        throw_input_error(b.origin, "element count", fmt::format("{} like golden {}", n, g.origin),
                          fmt::format("{}", b.numel()));
    }
    r = def.run(in, tol);
  }
  r.method = m;
  r.route_source = route.source;
  r.dtype = out;
  r.numel = n;
  if (r.log10_err_hist.empty()) r.log10_err_hist.assign(cmp::kHistBins, 0);
  r.log10_err_edges = cmp::hist_labels();
  return r;
}

}  // namespace kc
