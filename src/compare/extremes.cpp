// The torch.testing.assert_close headline (kerncheck.testing.assert_close): elements outside
// atol + rtol·|golden|, and the greatest absolute and relative difference among them, with flat indices.
// A plain scalar pass, run only to word a failure; the verdict comes from the methods (float_methods.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compare/compare.h"
#include "core/error.h"
#include "numeric/formats.h"

namespace kc {

Extremes extremes(const Tensor& a, const Tensor& g, double rtol, double atol, bool equal_nan) {
  Extremes e;
  e.numel = g.numel();
  if (a.numel() != e.numel)
    fail("extremes: expected tensors of equal element count, got {} and {}", a.numel(), e.numel);
  const bool cplx = is_complex(a.dtype) || is_complex(g.dtype);
  constexpr std::size_t kBlock = 4096;
  std::vector<double> va(2 * kBlock), vg(2 * kBlock);
  for (std::size_t b = 0; b < e.numel; b += kBlock) {
    const std::size_t n = std::min(kBlock, e.numel - b);
    if (cplx) {
      decode_complex_block(a.dtype, a.bytes, b, n, va.data());
      decode_complex_block(g.dtype, g.bytes, b, n, vg.data());
    } else {
      decode_block(a.dtype, a.bytes, b, n, va.data());
      decode_block(g.dtype, g.bytes, b, n, vg.data());
    }
    for (std::size_t k = 0; k < n; ++k) {
      double x, y, d, ag;
      if (cplx) {
        x = std::hypot(va[2 * k], va[2 * k + 1]), y = std::hypot(vg[2 * k], vg[2 * k + 1]);
        d = std::hypot(va[2 * k] - vg[2 * k], va[2 * k + 1] - vg[2 * k + 1]);
        ag = y;
      } else {
        x = va[k], y = vg[k], d = std::fabs(x - y), ag = std::fabs(y);
      }
      // torch.isclose: equal values (infinities of one sign included) match, NaN only with equal_nan.
      bool match;
      if (std::isnan(x) || std::isnan(y))
        match = equal_nan && std::isnan(x) && std::isnan(y);
      else if (!std::isfinite(x) || !std::isfinite(y))
        match = cplx ? d == 0 : x == y;
      else
        match = d <= atol + rtol * ag;
      if (match) continue;
      ++e.mismatched;
      const std::size_t i = b + k;
      // NaN differences rank above everything (torch.max propagates NaN: its index is the first NaN).
      if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();
      const double rel = ag > 0 ? d / ag : (d > 0 || std::isnan(d) ? std::numeric_limits<double>::infinity() : 0.0);
      auto better = [](double v, double best, bool first) {
        if (first) return true;
        if (std::isnan(best)) return false;
        return std::isnan(v) || v > best;
      };
      if (better(d, e.max_abs, e.mismatched == 1)) e.max_abs = d, e.max_abs_index = i;
      if (better(rel, e.max_rel, e.mismatched == 1)) e.max_rel = rel, e.max_rel_index = i;
    }
  }
  return e;
}

}  // namespace kc
