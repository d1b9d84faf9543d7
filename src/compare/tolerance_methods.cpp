// Element-wise tolerance methods: an element matches when |a−g| ≤ atol + rtol·|g|.
//   mixed (seed table A): matched ratio ≥ 0.99, max |a−g| ≤ the table limit or 32 ULP, no NaN/Inf mismatch;
//   close (torch.isclose-like): mismatch fraction ≤ ptol, no NaN/Inf mismatch.
// Both read the shared streaming pass (float_pass.cpp); min_passing comes from its quantile histogram.
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
constexpr double kMixedRatio = 0.99;  // mixed: required matched_ratio

// Smallest k with k/n ≥ ratio, computed the way the verdict compares (in double).
std::uint64_t count_for_ratio(std::uint64_t n, double ratio) {
  auto k = static_cast<std::uint64_t>(std::ceil(ratio * static_cast<double>(n)));
  while (k > 0 && static_cast<double>(k - 1) / static_cast<double>(n) >= ratio) --k;
  while (k < n && !(static_cast<double>(k) / static_cast<double>(n) >= ratio)) ++k;
  return k;
}

// --- mixed ------------------------------------------------------------------------------------------------

// Table A: rtol, atol, max_abs_error limit (met if ≤ limit OR ≤ 32 ULP). Other floats → float32's row;
// complex types take their component's.
Tolerance mixed_defaults(DType d) {
  double rtol = std::ldexp(1.0, -10), atol = std::ldexp(1.0, -16), limit = 1e-2;
  switch (component_dtype(d)) {
    case DType::float16: rtol = std::ldexp(1.0, -9), atol = std::ldexp(1.0, -9), limit = 1e-1; break;
    case DType::bfloat16: rtol = std::ldexp(1.0, -6), atol = std::ldexp(1.0, -6), limit = 1.0; break;
    case DType::hifloat32: rtol = std::ldexp(1.0, -9), atol = std::ldexp(1.0, -10), limit = 1e-1; break;
    case DType::float8_e4m3fn: rtol = std::ldexp(1.0, -2), atol = std::ldexp(1.0, -4), limit = 1.0; break;
    case DType::float8_e5m2: rtol = std::ldexp(1.0, -1), atol = std::ldexp(1.0, -3), limit = 1e-1; break;
    default: break;
  }
  Tolerance t;
  t.rtol = rtol, t.atol = atol, t.limit = limit;
  return t;
}

CompareResult run_mixed(const CompareInputs& in, const Tolerance& tol) {
  const Tensor& ta = *in.actual;
  const Tensor& tg = *in.golden;
  const std::size_t n = tg.numel();
  const DType dt = ta.dtype;
  FloatAcc acc = float_pass(ta, tg, Method::mixed, tol, FloatPath::fastest, true);
  // Lazy quantiles (run_chunk): when min_passing's bin lies below the floor, count every bin.
  if (acc.nf.total() == 0 && acc.q_floor > 1 && acc.qhist[0] >= count_for_ratio(n, kMixedRatio))
    acc = float_pass(ta, tg, Method::mixed, tol, FloatPath::fastest, false);
  const double rtol = tol.rtol.value_or(0), atol = tol.atol.value_or(0);

  CompareResult r = float_result_begin(acc);
  const std::uint64_t nfm = acc.nf.total();
  const double max_abs = nfm ? kInf : acc.max_d;
  const double ratio_req = kMixedRatio;
  const double matched = static_cast<double>(acc.pass) / static_cast<double>(n);
  const double table_limit = *tol.limit;
  const double g_at = value_at(tg, acc.arg_max);
  const double ulp32 = 32 * ulp_of(dt, g_at);
  // Limit met if max_abs_error ≤ the table value OR ≤ 32 ULP of the dtype at the golden value of the
  // element that has the max abs error.
  const double limit = std::max(table_limit, std::isnan(ulp32) ? 0.0 : ulp32);
  r.params = {{"rtol", rtol}, {"atol", atol}, {"max_abs_error_limit", table_limit}, {"required_matched_ratio", ratio_req}};
  add_figure(r, "matched_ratio", matched, ratio_req, ">=");
  add_figure(r, "max_abs_error", max_abs, limit, "<=");
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  r.notes.push_back(fmt::format("max_abs_error limit = max(table {}, 32 ULP of {} at golden {} (index {}) = {})",
                                fmt_g(table_limit), dtype_name(dt), fmt_g(g_at), acc.arg_max, fmt_g(ulp32)));
  const bool ok_ratio = matched >= ratio_req, ok_max = max_abs <= limit;
  r.pass = ok_ratio && ok_max && nfm == 0;
  if (nfm)
    r.reason = nonfinite_reason(nfm);
  else if (!ok_ratio)
    r.reason = fmt::format("matched_ratio {} < {}", fmt_g(matched), ratio_req);
  else if (!ok_max)
    r.reason = fmt::format("max_abs_error {} > limit {}", fmt_g(max_abs), fmt_g(limit));
  else
    r.reason = "all criteria met";
  if (nfm) {
    r.min_passing = "none: NaN/Inf mismatches fail at any tolerance";
  } else {
    const double s = quantile_at_least(acc.qhist, count_for_ratio(n, ratio_req));
    r.min_passing =
        fmt::format("rtol and atol scaled by {:.4g} (rtol={:.4g}, atol={:.4g})", s, s * rtol, s * atol);
    if (!ok_max) r.min_passing += fmt::format(", and max_abs_error limit >= {}", fmt_g(max_abs));
    r.notes.push_back(
        "min_passing scale is a bin edge of a 2^(1/16)-step histogram: at most 4.5% above the exact smallest "
        "scale");
  }
  float_result_end(r, acc, ta, tg);
  return r;
}

constexpr std::string_view kMixedKeys[] = {"rtol", "atol", "limit"};

// --- close ------------------------------------------------------------------------------------------------

Tolerance close_defaults(DType d) {
  const bool half = d == DType::float16 || d == DType::bfloat16 || d == DType::complex32;
  Tolerance t;
  t.rtol = half ? 1e-3 : 1e-4;
  t.ptol = half ? 1e-3 : 1e-4;
  t.atol = 1e-8;
  return t;
}

CompareResult run_close(const CompareInputs& in, const Tolerance& tol) {
  const Tensor& ta = *in.actual;
  const Tensor& tg = *in.golden;
  const std::size_t n = tg.numel();
  const FloatAcc acc = float_pass(ta, tg, Method::close, tol, FloatPath::fastest, false);
  const double rtol = tol.rtol.value_or(0), atol = tol.atol.value_or(0);

  CompareResult r = float_result_begin(acc);
  const std::uint64_t nfm = acc.nf.total();
  const double dn = static_cast<double>(n);
  const double max_abs = nfm ? kInf : acc.max_d;
  const double ptol = *tol.ptol;
  const std::uint64_t mismatches = n - acc.pass;
  const double frac = static_cast<double>(mismatches) / dn;
  r.params = {{"rtol", rtol}, {"atol", atol}, {"ptol", ptol}};
  add_figure(r, "mismatch_fraction", frac, ptol, "<=");
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  add_figure(r, "max_abs_error", max_abs);
  r.pass = frac <= ptol && nfm == 0;
  if (nfm)
    r.reason = nonfinite_reason(nfm);
  else if (!(frac <= ptol))
    r.reason = fmt::format("mismatch fraction {} > ptol {}", fmt_g(frac), fmt_g(ptol));
  else
    r.reason = "all criteria met";
  if (nfm) {
    r.min_passing = "none: NaN/Inf mismatches fail at any tolerance";
  } else {
    // Largest allowed mismatch count m (m/n ≤ ptol); the rtol at which at least n − m elements pass.
    auto allowed = static_cast<std::uint64_t>(std::floor(ptol * dn));
    while (allowed > 0 && static_cast<double>(allowed) / dn > ptol) --allowed;
    while (allowed < n && static_cast<double>(allowed + 1) / dn <= ptol) ++allowed;
    const double rt = quantile_at_least(acc.qhist, n - std::min<std::uint64_t>(allowed, n));
    r.min_passing = fmt::format("rtol {:.4g} (atol {}, ptol {} fixed)", rt, fmt_g(atol), fmt_g(ptol));
    r.notes.push_back(
        "min_passing rtol is a bin edge of a 2^(1/16)-step histogram: at most 4.5% above the exact smallest "
        "rtol");
  }
  float_result_end(r, acc, ta, tg);
  return r;
}

constexpr std::string_view kCloseKeys[] = {"rtol", "atol", "ptol"};

}  // namespace

// The default method: every dtype no auto rule claims (float and complex outputs) routes here.
const MethodDef mixed_method{
    .id = Method::mixed, .name = "mixed", .standard = "mix_tolerance", .cli = true,
    .keys = kMixedKeys, .csv_keys = {},  // seed: override mixed in a spec, not with the legacy fields
    .defaults = mixed_defaults, .auto_for = nullptr, .values = true, .needs_third = false,
    .outputs = {}, .spec_tables = {}, .run = run_mixed};

const MethodDef close_method{
    .id = Method::close, .name = "close", .standard = nullptr, .cli = true,
    .keys = kCloseKeys, .csv_keys = kCloseKeys,
    .defaults = close_defaults, .auto_for = nullptr, .values = true, .needs_third = false,
    .outputs = {}, .spec_tables = {}, .run = run_close};

}  // namespace kc::cmp
