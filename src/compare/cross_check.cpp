// cross_check: actual a and a third-party result b, both judged against golden g (docs/compare.md, "cross_check").
//
// Large values (|g| ≥ small_value): rel_x = |x − g| / (|g| + ε) with ε = small_value_atol of the dtype;
//   mare_ratio = max rel_a / max rel_b, mere_ratio = mean rel_a / mean rel_b,
//   rmse_ratio = rmse(a, g) / rmse(b, g), all ≤ the level's limits.
// Small values (|g| < small_value): an element is an error when |x − g| > small_value_atol;
//   error count of a / error count of b ≤ 2.0.
// Denominators are floored (max(denominator, floor)) so an exact b does not divide by 0:
//   relative errors: the dtype's unit roundoff u = 2^-(mantissa bits + 1) (f16 2^-11, bf16 2^-8, f32 2^-24);
//   rmse: u · rms(g) over the large values; error counts: 1. A note says when a floor was used.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compare/compare_internal.h"
#include "compare/methods.h"
#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc::cmp {
namespace {

struct CrossAcc {
  std::uint64_t n_large = 0, n_small = 0, err_a = 0, err_b = 0, third_nonfinite = 0;
  double sum_rel_a = 0, sum_rel_b = 0, max_rel_a = 0, max_rel_b = 0, sse_a = 0, sse_b = 0, sum_g2 = 0;
  TopK top;
  NonFiniteAcc nf;
  std::array<std::uint64_t, kHistBins> hist{};
  void merge(const CrossAcc& o) {
    n_large += o.n_large, n_small += o.n_small, err_a += o.err_a, err_b += o.err_b;
    third_nonfinite += o.third_nonfinite;
    sum_rel_a += o.sum_rel_a, sum_rel_b += o.sum_rel_b, sse_a += o.sse_a, sse_b += o.sse_b;
    sum_g2 += o.sum_g2;
    max_rel_a = std::max(max_rel_a, o.max_rel_a), max_rel_b = std::max(max_rel_b, o.max_rel_b);
    top.merge(o.top);
    nf.merge(o.nf);
    for (int i = 0; i < kHistBins; ++i) hist[i] += o.hist[i];
  }
};

struct Level {
  const char* name;
  double mare, mere, rmse;
};
constexpr Level kLevels[] = {{"L0", 10.0, 2.0, 2.0}, {"L1", 5.0, 1.5, 1.5}, {"L2", 2.0, 1.2, 1.2}};
constexpr double kSmallRatioLimit = 2.0;

CompareResult compare_cross(const Tensor& ta, const Tensor& tg, const Tensor& tb, const Tolerance& tol) {
  const DType dt = tg.dtype;
  double small_value, small_atol, u;
  switch (dt) {
    case DType::float16: small_value = std::ldexp(1.0, -11), small_atol = std::ldexp(1.0, -16), u = std::ldexp(1.0, -11); break;
    case DType::bfloat16: small_value = std::ldexp(1.0, -8), small_atol = std::ldexp(1.0, -16), u = std::ldexp(1.0, -8); break;
    case DType::float32: small_value = std::ldexp(1.0, -14), small_atol = std::ldexp(1.0, -30), u = std::ldexp(1.0, -24); break;
    default: fail("{}: cross_check: expected float16, bfloat16 or float32, got {}", tg.origin, dtype_name(dt));
  }
  const std::string level_name = tol.level.value_or("L1");
  const Level* level = nullptr;
  for (const auto& l : kLevels)
    if (level_name == l.name) level = &l;
  if (!level) fail("cross_check: level: expected L0, L1 or L2, got \"{}\"", level_name);
  const double eps = small_atol;

  const std::size_t n = tg.numel();
  CrossAcc acc = parallel_reduce<CrossAcc>(n, kChunk, [&](CrossAcc& p, std::size_t b, std::size_t e) {
    double va[kBlock], vg[kBlock], vb[kBlock];
    for (std::size_t blk = b; blk < e; blk += kBlock) {
      const std::size_t m = std::min(kBlock, e - blk);
      decode_block(ta.dtype, ta.bytes, blk, m, va);
      decode_block(tg.dtype, tg.bytes, blk, m, vg);
      decode_block(tb.dtype, tb.bytes, blk, m, vb);
      for (std::size_t i = 0; i < m; ++i) {
        const double a = va[i], g = vg[i], x = vb[i];
        if (!std::isfinite(a) || !std::isfinite(g)) {
          const int c = classify_nonfinite(a, g);
          if (c >= 0) p.nf.add(c, blk + i), ++p.hist[kHistBins - 1];
          else ++p.nf.matched, ++p.hist[0];
          continue;
        }
        if (!std::isfinite(x)) {  // b is broken here while a is not: leave the element out of both sides
          ++p.third_nonfinite;
          ++p.hist[hist_bucket(std::fabs(a - g))];
          continue;
        }
        const double da = std::fabs(a - g), db = std::fabs(x - g), ag = std::fabs(g);
        ++p.hist[hist_bucket(da)];
        if (ag >= small_value) {
          const double ra = da / (ag + eps), rb = db / (ag + eps);
          ++p.n_large;
          p.sum_rel_a += ra, p.sum_rel_b += rb;
          p.max_rel_a = std::max(p.max_rel_a, ra), p.max_rel_b = std::max(p.max_rel_b, rb);
          p.sse_a += da * da, p.sse_b += db * db, p.sum_g2 += g * g;
          p.top.offer(ra, blk + i);
        } else {
          ++p.n_small;
          p.err_a += da > small_atol;
          p.err_b += db > small_atol;
        }
      }
    }
  });

  CompareResult r;
  acc.nf.to_result(r);
  r.log10_err_hist.assign(acc.hist.begin(), acc.hist.end());
  const std::uint64_t nfm = acc.nf.total();
  r.params = {{"small_value", small_value}, {"small_value_atol", small_atol}, {"epsilon", eps},
              {"mare_ratio_limit", level->mare}, {"mere_ratio_limit", level->mere},
              {"rmse_ratio_limit", level->rmse}, {"small_error_ratio_limit", kSmallRatioLimit},
              {"relative_floor", u}};
  r.notes.push_back(fmt::format("level {}; {} large-value elements (|g| >= {}), {} small-value elements",
                                level->name, acc.n_large, fmt_g(small_value), acc.n_small));
  auto floored = [&](double den, double floor, const char* what) {
    if (den < floor) {
      r.notes.push_back(fmt::format("{}: third party's error {} below the floor, divided by floor {}", what,
                                    fmt_g(den), fmt_g(floor)));
      return floor;
    }
    return den;
  };
  bool ok = nfm == 0;
  double mare_ratio = 0, mere_ratio = 0, rmse_ratio = 0, small_ratio = 0;
  if (acc.n_large) {
    const double nl = static_cast<double>(acc.n_large);
    mare_ratio = acc.max_rel_a / floored(acc.max_rel_b, u, "mare_ratio");
    mere_ratio = (acc.sum_rel_a / nl) / floored(acc.sum_rel_b / nl, u, "mere_ratio");
    const double rmse_a = std::sqrt(acc.sse_a / nl), rmse_b = std::sqrt(acc.sse_b / nl);
    rmse_ratio = rmse_a / floored(rmse_b, u * std::sqrt(acc.sum_g2 / nl), "rmse_ratio");
    add_figure(r, "mare_ratio", mare_ratio, level->mare, "<=");
    add_figure(r, "mere_ratio", mere_ratio, level->mere, "<=");
    add_figure(r, "rmse_ratio", rmse_ratio, level->rmse, "<=");
    add_figure(r, "mare_actual", acc.max_rel_a);
    add_figure(r, "mare_third", acc.max_rel_b);
    ok = ok && mare_ratio <= level->mare && mere_ratio <= level->mere && rmse_ratio <= level->rmse;
  } else {
    r.notes.push_back("no large-value elements: ratio checks skipped");
  }
  if (acc.n_small) {
    small_ratio = static_cast<double>(acc.err_a) /
                  floored(static_cast<double>(acc.err_b), 1.0, "small_error_ratio");
    add_figure(r, "small_error_ratio", small_ratio, kSmallRatioLimit, "<=");
    add_figure(r, "small_errors_actual", static_cast<double>(acc.err_a));
    add_figure(r, "small_errors_third", static_cast<double>(acc.err_b));
    ok = ok && small_ratio <= kSmallRatioLimit;
  } else {
    r.notes.push_back("no small-value elements: error-count check skipped");
  }
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  if (acc.third_nonfinite)
    r.notes.push_back(fmt::format("{} elements where only the third party is NaN/Inf were left out",
                                  acc.third_nonfinite));
  r.pass = ok;
  if (nfm) r.reason = fmt::format("{} NaN/Inf mismatches (unbounded error)", nfm);
  else if (acc.n_large && mare_ratio > level->mare) r.reason = fmt::format("mare_ratio {} > {}", fmt_g(mare_ratio), level->mare);
  else if (acc.n_large && mere_ratio > level->mere) r.reason = fmt::format("mere_ratio {} > {}", fmt_g(mere_ratio), level->mere);
  else if (acc.n_large && rmse_ratio > level->rmse) r.reason = fmt::format("rmse_ratio {} > {}", fmt_g(rmse_ratio), level->rmse);
  else if (acc.n_small && small_ratio > kSmallRatioLimit)
    r.reason = fmt::format("small_error_ratio {} > {}", fmt_g(small_ratio), kSmallRatioLimit);
  else r.reason = "all criteria met";

  // Strictest level that would pass (the small-value limit 2.0 does not depend on the level).
  if (nfm) {
    r.min_passing = "none: NaN/Inf mismatches fail at any level";
  } else if (acc.n_small && small_ratio > kSmallRatioLimit) {
    r.min_passing = fmt::format("none: small_error_ratio {} > {} at every level", fmt_g(small_ratio),
                                kSmallRatioLimit);
  } else {
    r.min_passing = fmt::format("none: needs mare_ratio {}, mere_ratio {}, rmse_ratio {} (L0: 10/2/2)",
                                fmt_g(mare_ratio), fmt_g(mere_ratio), fmt_g(rmse_ratio));
    for (int k = 2; k >= 0; --k) {
      const Level& l = kLevels[k];
      if (mare_ratio <= l.mare && mere_ratio <= l.mere && rmse_ratio <= l.rmse) {
        r.min_passing = fmt::format("level {}", l.name);
        break;
      }
    }
  }
  fill_worst(r, acc.top, ta, tg);
  return r;
}

bool is_f16_bf16_f32(DType d) { return d == DType::float16 || d == DType::bfloat16 || d == DType::float32; }
Tolerance cross_defaults(DType) {
  Tolerance t;
  t.level = "L1";
  return t;
}
constexpr std::string_view kLevelKey[] = {"level"};

}  // namespace

const MethodDef cross_check_method{
    .id = Method::cross_check, .name = "cross_check", .standard = "cross_check", .cli = true,
    .keys = kLevelKey, .csv_keys = {},
    .defaults = cross_defaults, .auto_for = nullptr, .values = false, .needs_third = true,
    .outputs = {is_f16_bf16_f32, "an output dtype of float16, bfloat16 or float32"},
    .spec_tables = {is_f16_bf16_f32, "a float16, bfloat16 or float32 table"},
    .run = [](const CompareInputs& in, const Tolerance& t) {
      return compare_cross(*in.actual, *in.golden, *in.third, t);
    }};

}  // namespace kc::cmp
