// Methods on stored codes rather than decoded values: binary (bit-exact, SHA-256), requant (ULP distance
// through the int8 view of 8-bit codes) and quant (|int(a) − int(g)| ≤ 1 LSB).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "compare/compare_internal.h"
#include "compare/methods.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/parallel.h"
#include "numeric/formats.h"

namespace kc::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Accumulator shared by the three code methods.
struct CodeAcc {
  std::uint64_t bad = 0;        // differing (binary), outside 1 ULP (requant), > 1 LSB (quant)
  std::uint64_t nan_payload = 0;  // binary: bitwise different NaNs (equal by the NaN rule)
  std::uint64_t opposite_sign = 0;  // requant: differing codes with different sign bits
  std::uint64_t max_dist = 0;     // requant / quant
  std::vector<std::size_t> first;  // first bad indices, ascending
  TopK top;
  NonFiniteAcc nf;
  std::array<std::uint64_t, kHistBins> hist{};
  void note_bad(std::size_t i) {
    ++bad;
    if (first.size() < kMismatchIndices) first.push_back(i);
  }
  void merge(const CodeAcc& o) {
    bad += o.bad, nan_payload += o.nan_payload, opposite_sign += o.opposite_sign;
    max_dist = std::max(max_dist, o.max_dist);
    for (auto i : o.first)
      if (first.size() < kMismatchIndices) first.push_back(i);
    top.merge(o.top);
    nf.merge(o.nf);
    for (int i = 0; i < kHistBins; ++i) hist[i] += o.hist[i];
  }
};

// Exact integer value of element i of an integer tensor (any width, signedness, packed int4).
__int128 int_value(const Tensor& t, std::size_t i) {
  const std::uint8_t* p = t.bytes.data();
  switch (t.dtype) {
    case DType::int4: {
      const int nib = (p[i / 2] >> ((i % 2) * 4)) & 0xF;
      return nib >= 8 ? nib - 16 : nib;
    }
    case DType::int8: return static_cast<std::int8_t>(p[i]);
    case DType::uint8: return p[i];
    case DType::int16: { std::int16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case DType::uint16: { std::uint16_t v; std::memcpy(&v, p + 2 * i, 2); return v; }
    case DType::int32: { std::int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::uint32: { std::uint32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case DType::int64: { std::int64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case DType::uint64: { std::uint64_t v; std::memcpy(&v, p + 8 * i, 8); return v; }
    default: KC_ASSERT(false, "not an integer dtype: {}", dtype_name(t.dtype));
  }
  return 0;
}

std::uint8_t nibble(const Tensor& t, std::size_t i) { return (t.bytes[i / 2] >> ((i % 2) * 4)) & 0xF; }

// Equal under the NaN rule: bitwise equal, or NaN in both (each component for complex).
bool nan_equal(const Tensor& a, const Tensor& g, std::size_t i) {
  if (is_complex(g.dtype)) {
    double va[2], vg[2];
    decode_complex_block(a.dtype, a.bytes, i, 1, va);
    decode_complex_block(g.dtype, g.bytes, i, 1, vg);
    for (int k = 0; k < 2; ++k) {
      const bool eq = std::isnan(va[k]) ? std::isnan(vg[k]) : (std::memcmp(&va[k], &vg[k], 8) == 0);
      if (!eq) return false;
    }
    return true;
  }
  return std::isnan(value_at(a, i)) && std::isnan(value_at(g, i));
}

void binary_element_diff(CodeAcc& acc, const Tensor& a, const Tensor& g, std::size_t i) {
  const bool floaty = is_float(g.dtype) || is_complex(g.dtype);
  if (floaty && nan_equal(a, g, i)) {
    ++acc.nan_payload;
    return;
  }
  acc.note_bad(i);
  double d;
  if (a.dtype != g.dtype) {
    const __int128 x = int_value(a, i) - int_value(g, i);
    d = static_cast<double>(x < 0 ? -x : x);
  } else {
    const double va = value_at(a, i), vg = value_at(g, i);
    if (std::isfinite(va) && std::isfinite(vg)) {
      d = std::fabs(va - vg);
    } else {
      const int c = classify_nonfinite(va, vg);
      if (c >= 0) acc.nf.add(c, i);
      d = kInf;
    }
    if (d == 0) d = std::numeric_limits<double>::min();  // bitwise different, same value (±0): still listed
  }
  acc.top.offer(d, i);
  ++acc.hist[hist_bucket(d)];
}

void binary_chunk(CodeAcc& acc, const Tensor& a, const Tensor& g, std::size_t b, std::size_t e) {
  const std::size_t n_here = e - b;
  if (a.dtype != g.dtype) {  // integer ↔ integer: compare values promoted to a common (128-bit) type
    for (std::size_t i = b; i < e; ++i)
      if (int_value(a, i) != int_value(g, i)) binary_element_diff(acc, a, g, i);
  } else if (is_packed4(g.dtype)) {  // compare each 4-bit code, ignoring the pad nibble
    for (std::size_t i = b; i < e; ++i)
      if (nibble(a, i) != nibble(g, i)) binary_element_diff(acc, a, g, i);
  } else {
    const std::size_t is = static_cast<std::size_t>(dtype_info(g.dtype).bits / 8);
    const std::uint8_t* pa = a.bytes.data();
    const std::uint8_t* pg = g.bytes.data();
    if (std::memcmp(pa + b * is, pg + b * is, n_here * is) != 0) {
      // Narrow down in small runs first (memcmp is fast), then element by element.
      constexpr std::size_t kRun = 256;
      for (std::size_t r = b; r < e; r += kRun) {
        const std::size_t re = std::min(e, r + kRun);
        if (std::memcmp(pa + r * is, pg + r * is, (re - r) * is) == 0) continue;
        for (std::size_t i = r; i < re; ++i)
          if (std::memcmp(pa + i * is, pg + i * is, is) != 0) binary_element_diff(acc, a, g, i);
      }
    }
  }
  acc.hist[0] += n_here;  // equal elements; the differing ones were bucketed and are subtracted below
}

void finish_hist(CompareResult& r, const CodeAcc& acc, std::uint64_t bucketed) {
  r.log10_err_hist.assign(acc.hist.begin(), acc.hist.end());
  r.log10_err_hist[0] -= bucketed;
}

CompareResult compare_binary(const Tensor& a, const Tensor& g) {
  const std::size_t n = g.numel();
  CodeAcc acc = parallel_reduce<CodeAcc>(n, kChunk, [&](CodeAcc& part, std::size_t b, std::size_t e) {
    binary_chunk(part, a, g, b, e);
  });
  CompareResult r;
  acc.nf.to_result(r);
  r.mismatch_indices = acc.first;
  finish_hist(r, acc, acc.bad);
  add_figure(r, "differing_elements", static_cast<double>(acc.bad), 0.0, "<=");
  r.pass = acc.bad == 0;
  if (a.dtype == g.dtype) {
    const std::string ha = sha256_hex(a.bytes), hg = sha256_hex(g.bytes);
    r.notes.push_back(fmt::format("sha256 actual {}", ha));
    r.notes.push_back(fmt::format("sha256 golden {}", hg));
    add_figure(r, "sha256_equal", ha == hg ? 1.0 : 0.0);
    if (ha != hg && acc.bad == 0)
      r.notes.push_back(
          fmt::format("bytes differ only where the NaN rule or a 4-bit pad nibble allows it ({} NaN payload "
                      "differences)",
                      acc.nan_payload));
  } else {
    r.notes.push_back(fmt::format("cross-dtype: {} vs {} compared as integer values (promoted to 128-bit)",
                                  dtype_name(a.dtype), dtype_name(g.dtype)));
  }
  if (acc.nan_payload && a.dtype == g.dtype)
    r.notes.push_back(fmt::format("{} elements are NaN on both sides with different bits: counted equal",
                                  acc.nan_payload));
  r.reason = r.pass ? "bit-exact" : fmt::format("{} of {} elements differ", acc.bad, n);
  r.min_passing = r.pass ? "exact" : "none: binary has no tolerance";
  fill_worst(r, acc.top, a, g);
  return r;
}

CompareResult compare_requant(const Tensor& a, const Tensor& g, const Tolerance& tol) {
  const std::size_t n = g.numel();
  const DType dt = g.dtype;
  const bool floaty = is_float(dt);
  std::array<double, 256> value{};
  for (int c = 0; c < 256; ++c)
    value[c] = floaty ? decode8(dt, static_cast<std::uint8_t>(c))
                      : (dt == DType::int8 ? static_cast<std::int8_t>(c) : c);
  const std::uint8_t* pa = a.bytes.data();
  const std::uint8_t* pg = g.bytes.data();
  CodeAcc acc = parallel_reduce<CodeAcc>(n, kChunk, [&](CodeAcc& part, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const std::uint8_t ca = pa[i], cg = pg[i];
      if (ca == cg) {
        ++part.hist[0];
        continue;
      }
      const double va = value[ca], vg = value[cg];
      double d;
      std::uint64_t dist;
      if (!std::isfinite(va) || !std::isfinite(vg)) {
        const int c = classify_nonfinite(va, vg);
        if (c < 0) {  // both NaN (different NaN codes): equal
          ++part.nf.matched;
          ++part.hist[0];
          continue;
        }
        part.nf.add(c, i);
        d = kInf;
        dist = std::numeric_limits<std::uint64_t>::max();
      } else {
        d = std::fabs(va - vg);
        const int ia = static_cast<std::int8_t>(ca), ig = static_cast<std::int8_t>(cg);
        dist = static_cast<std::uint64_t>(std::abs(ia - ig));
        part.max_dist = std::max(part.max_dist, dist);
        if (floaty && ((ca ^ cg) & 0x80)) ++part.opposite_sign;
      }
      if (dist > 1) part.note_bad(i);
      part.top.offer(dist == std::numeric_limits<std::uint64_t>::max() ? kInf : static_cast<double>(dist), i);
      ++part.hist[hist_bucket(d)];
    }
  });
  CompareResult r;
  acc.nf.to_result(r);
  const std::uint64_t nfm = acc.nf.total();
  r.mismatch_indices = acc.first;
  r.log10_err_hist.assign(acc.hist.begin(), acc.hist.end());
  const double ptol = *tol.ptol;
  const double within = static_cast<double>(n - acc.bad) / static_cast<double>(n);
  r.params = {{"ptol", ptol}};
  add_figure(r, "within_1ulp_fraction", within, 1 - ptol, ">=");
  add_figure(r, "nonfinite_mismatches", static_cast<double>(nfm), 0.0, "<=");
  add_figure(r, "max_ulp_distance", static_cast<double>(acc.max_dist));
  r.pass = within >= 1 - ptol && nfm == 0;
  if (nfm) r.reason = fmt::format("{} NaN/Inf mismatches (unbounded error)", nfm);
  else if (!r.pass) r.reason = fmt::format("fraction within 1 ULP {} < 1 - ptol {}", fmt_g(within), fmt_g(1 - ptol));
  else r.reason = "all criteria met";
  r.min_passing = nfm ? "none: NaN/Inf mismatches fail at any ptol"
                      : fmt::format("ptol {}", fmt_g(static_cast<double>(acc.bad) / static_cast<double>(n)));
  r.notes.push_back("ULP distance = |int8(code_a) − int8(code_g)| (seed rule); for sign-magnitude codes a "
                    "sign change gives a distance of about 128 or more even between ±0 or tiny values");
  if (acc.opposite_sign)
    r.notes.push_back(fmt::format("{} differing elements have opposite sign bits", acc.opposite_sign));
  fill_worst(r, acc.top, a, g);
  for (auto& w : r.worst) {
    const int ia = static_cast<std::int8_t>(pa[w.index]), ig = static_cast<std::int8_t>(pg[w.index]);
    w.ulp_err = std::isfinite(w.abs_err) ? std::abs(ia - ig) : kInf;
  }
  return r;
}

CompareResult compare_quant(const Tensor& a, const Tensor& g, const Tolerance& tol) {
  const std::size_t n = g.numel();
  CodeAcc acc = parallel_reduce<CodeAcc>(n, kChunk, [&](CodeAcc& part, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const auto x = static_cast<std::int64_t>(int_value(a, i) - int_value(g, i));
      const std::uint64_t dist = static_cast<std::uint64_t>(x < 0 ? -x : x);
      part.max_dist = std::max(part.max_dist, dist);
      ++part.hist[hist_bucket(static_cast<double>(dist))];
      if (dist > 1) part.note_bad(i);
      part.top.offer(static_cast<double>(dist), i);
    }
  });
  CompareResult r;
  r.mismatch_indices = acc.first;
  r.log10_err_hist.assign(acc.hist.begin(), acc.hist.end());
  const double ptol = *tol.ptol;
  const double frac = static_cast<double>(acc.bad) / static_cast<double>(n);
  r.params = {{"ptol", ptol}};
  add_figure(r, "bad_fraction", frac, ptol, "<=");
  add_figure(r, "max_abs_diff", static_cast<double>(acc.max_dist));
  r.pass = frac <= ptol;
  r.reason = r.pass ? "all criteria met"
                    : fmt::format("{} elements off by more than 1 LSB: fraction {} > ptol {}", acc.bad, fmt_g(frac),
                                  fmt_g(ptol));
  r.min_passing = fmt::format("ptol {}", fmt_g(frac));
  fill_worst(r, acc.top, a, g);
  return r;
}

// --- table entries ------------------------------------------------------------------------------------

// Routed to binary by dtype: formats whose codes are the values (no tolerance makes sense).
bool binary_auto(DType d) {
  const DKind k = dtype_info(d).kind;
  return d == DType::float4_e2m1 || d == DType::int4 || d == DType::float8_e8m0 || k == DKind::integer ||
         k == DKind::boolean;
}
bool is_8bit(DType d) { return dtype_info(d).bits == 8 && d != DType::boolean; }
bool is_int4_or_int8(DType d) { return d == DType::int4 || d == DType::int8; }

Tolerance no_defaults(DType) { return {}; }
Tolerance requant_defaults(DType) {
  Tolerance t;
  t.ptol = 0.001;
  return t;
}
Tolerance quant_defaults(DType) {
  Tolerance t;
  t.ptol = 0.0;
  return t;
}

constexpr std::string_view kPtolKey[] = {"ptol"};

}  // namespace

const MethodDef binary_method{
    .id = Method::binary, .name = "binary", .standard = "binary_equal", .cli = true,
    .keys = {}, .csv_keys = {},
    .defaults = no_defaults, .auto_for = binary_auto, .values = false, .needs_third = false,
    .outputs = {}, .spec_tables = {},
    .run = [](const CompareInputs& in, const Tolerance&) { return compare_binary(*in.actual, *in.golden); }};

const MethodDef requant_method{
    .id = Method::requant, .name = "requant", .standard = nullptr, .cli = true,
    .keys = kPtolKey, .csv_keys = {},
    .defaults = requant_defaults, .auto_for = [](DType d) { return d == DType::hifloat8; }, .values = false,
    .needs_third = false,
    .outputs = {is_8bit, "an 8-bit output dtype (float8_e4m3fn, float8_e5m2, hifloat8, float8_e8m0, int8, uint8)"},
    .spec_tables = {},
    .run = [](const CompareInputs& in, const Tolerance& t) { return compare_requant(*in.actual, *in.golden, t); }};

// Declared only in a spec, for an int4/int8 output of an operator with a float input (route() checks it).
const MethodDef quant_method{
    .id = Method::quant, .name = "quant", .standard = "quant", .cli = false,
    .keys = kPtolKey, .csv_keys = {},
    .defaults = quant_defaults, .auto_for = nullptr, .values = false, .needs_third = false,
    .outputs = {}, .spec_tables = {is_int4_or_int8, "an int4 or int8 table"},
    .run = [](const CompareInputs& in, const Tolerance& t) { return compare_quant(*in.actual, *in.golden, t); }};

}  // namespace kc::cmp
