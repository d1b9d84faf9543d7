// Whole-tensor statistic methods:
//   stat_rel_err (seed table B): rel = |a−g| / (|g| + 1e-7); mean rel (mere) < T and max rel (mare) < 10·T;
//   cosine: 1 − cos(a, g) ≤ rtol (complex: of the real vectors (re, im)).
// Both read the shared streaming pass (float_pass.cpp); any NaN/Inf mismatch fails.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compare/float_pass.h"
#include "compare/methods.h"
#include "numeric/formats.h"

namespace kc::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- stat_rel_err -----------------------------------------------------------------------------------------

// Table B thresholds T (complex types take their component's row; other floats float32's).
Tolerance stat_rel_err_defaults(DType d) {
  const DType c = component_dtype(d);
  int e = -13;
  if (c == DType::float16) e = -10;
  if (c == DType::bfloat16) e = -7;
  if (c == DType::float8_e4m3fn) e = -3;
  if (c == DType::float8_e5m2) e = -2;
  Tolerance t;
  t.threshold = std::ldexp(1.0, e);
  return t;
}

CompareResult run_stat_rel_err(const CompareInputs& in, const Tolerance& tol) {
  const Tensor& ta = *in.actual;
  const Tensor& tg = *in.golden;
  const FloatAcc acc = float_pass(ta, tg, Method::stat_rel_err, tol, FloatPath::fastest, false);
  CompareResult r = float_result_begin(acc);
  const std::uint64_t nfm = acc.nf.total();
  const double t = *tol.threshold;
  r.params = {{"threshold", t}, {"epsilon", 1e-7}};
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  if (nfm) {
    r.pass = false;
    r.reason = nonfinite_reason(nfm) + "; mere/mare not computed";
    r.min_passing = "none: NaN/Inf mismatches fail at any threshold";
  } else {
    const double mere = acc.sum_rel / static_cast<double>(tg.numel()), mare = acc.max_rel;
    add_figure(r, "mere", mere, t, "<");
    add_figure(r, "mare", mare, 10 * t, "<");
    add_figure(r, "max_abs_error", acc.max_d);
    r.pass = mere < t && mare < 10 * t;
    if (!(mere < t))
      r.reason = fmt::format("mere {} >= threshold {}", fmt_g(mere), fmt_g(t));
    else if (!(mare < 10 * t))
      r.reason = fmt::format("mare {} >= 10·threshold {}", fmt_g(mare), fmt_g(10 * t));
    else
      r.reason = "all criteria met";
    double tp = std::max(mere, mare / 10);
    while (!(mere < tp && mare < 10 * tp)) tp = std::nextafter(tp, kInf);
    r.min_passing = fmt::format("threshold {}", fmt_g(tp));
  }
  float_result_end(r, acc, ta, tg);
  return r;
}

constexpr std::string_view kStatKeys[] = {"threshold"};

// --- cosine -----------------------------------------------------------------------------------------------

Tolerance cosine_defaults(DType) {
  Tolerance t;
  t.rtol = 0.01;
  return t;
}

CompareResult run_cosine(const CompareInputs& in, const Tolerance& tol) {
  const Tensor& ta = *in.actual;
  const Tensor& tg = *in.golden;
  const FloatAcc acc = float_pass(ta, tg, Method::cosine, tol, FloatPath::fastest, false);
  CompareResult r = float_result_begin(acc);
  const std::uint64_t nfm = acc.nf.total();
  // Zero norms: both all-zero → identical (cos = 1); only one all-zero → orthogonal (cos = 0).
  double cosv;
  if (acc.norm_a == 0 && acc.norm_g == 0) {
    cosv = 1.0;
    r.notes.push_back("both tensors are all zero: cosine taken as 1");
  } else if (acc.norm_a == 0 || acc.norm_g == 0) {
    cosv = 0.0;
    r.notes.push_back(fmt::format("{} is all zero: cosine taken as 0", acc.norm_a == 0 ? "actual" : "golden"));
  } else {
    cosv = acc.dot / (std::sqrt(acc.norm_a) * std::sqrt(acc.norm_g));
  }
  const double rtol = tol.rtol.value_or(0);
  r.params = {{"rtol", rtol}};
  add_figure(r, "one_minus_cosine", 1 - cosv, rtol, "<=");
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  add_figure(r, "cosine", cosv);
  add_figure(r, "max_abs_error", nfm ? kInf : acc.max_d);
  r.pass = nfm == 0 && 1 - cosv <= rtol;
  if (nfm)
    r.reason = nonfinite_reason(nfm);
  else if (!r.pass)
    r.reason = fmt::format("1 - cosine {} > rtol {}", fmt_g(1 - cosv), fmt_g(rtol));
  else
    r.reason = "all criteria met";
  r.min_passing = nfm ? "none: NaN/Inf mismatches fail at any tolerance"
                      : fmt::format("rtol {}", fmt_g(std::max(0.0, 1 - cosv)));
  if (is_complex(ta.dtype)) r.notes.push_back("complex: cosine of the real vectors (re, im), i.e. Re(a·conj g)");
  float_result_end(r, acc, ta, tg);
  return r;
}

constexpr std::string_view kCosineKeys[] = {"rtol"};

}  // namespace

const MethodDef stat_rel_err_method{
    .id = Method::stat_rel_err, .name = "stat_rel_err", .standard = "stat_rel_err", .cli = true,
    .keys = kStatKeys, .csv_keys = {},
    .defaults = stat_rel_err_defaults, .auto_for = nullptr, .values = true, .needs_third = false,
    .outputs = {}, .spec_tables = {}, .run = run_stat_rel_err};

const MethodDef cosine_method{
    .id = Method::cosine, .name = "cosine", .standard = nullptr, .cli = true,
    .keys = kCosineKeys, .csv_keys = kCosineKeys,  // the legacy precision_tolerances rtol
    .defaults = cosine_defaults, .auto_for = nullptr, .values = true, .needs_third = false,
    .outputs = {}, .spec_tables = {}, .run = run_cosine};

}  // namespace kc::cmp
