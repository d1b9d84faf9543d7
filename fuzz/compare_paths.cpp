// Differential fuzzing of compare's streaming pass (mixed and stat_rel_err): the fast paths — the AVX-512
// fused pass, mixed in float lanes, the sparse 16-bit screen and its back-off, the generic fused pass —
// must give bitwise the general path's accumulators (counts, sums, maxima, worst list, histograms,
// NaN/Inf classes) on arbitrary bit patterns. tests/compare/fused_twin_test.cpp does the same on chosen
// data; here the bytes are the elements themselves. A finding is a mismatch (KC_ASSERT aborts), a crash
// or a sanitizer report.
//
// Input: byte 0 picks the dtype pair, byte 1 the method and tolerance, byte 2 how the golden is made and
// how far the elements are repeated (to reach several 1024-element blocks and the sparse back-off), the
// rest is element bytes.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compare/compare_internal.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/tensor.h"
#include "numeric/dtype.h"

namespace {

using kc::DType;
using kc::cmp::FloatPassStats;
using kc::cmp::FloatPath;

void expect_same(const FloatPassStats& x, const FloatPassStats& ref, const char* path) {
  const std::string diff = kc::cmp::pass_stats_difference(x, ref);
  KC_ASSERT(diff.empty(), "{}: {}", path, diff);
}

struct Pair {
  DType a, g;
};
constexpr std::array<Pair, 7> kPairs = {{{DType::float32, DType::float32},
                                         {DType::bfloat16, DType::bfloat16},
                                         {DType::float16, DType::float16},
                                         {DType::float64, DType::float64},
                                         {DType::bfloat16, DType::float32},
                                         {DType::float16, DType::float32},
                                         {DType::float8_e4m3fn, DType::float8_e4m3fn}}};

kc::Tolerance tolerance(kc::Method m, int pick) {
  kc::Tolerance t;
  if (m == kc::Method::stat_rel_err) {
    t.threshold = std::ldexp(1.0, -7 - 3 * (pick % 3));
    return t;
  }
  // seed table values, zero tolerance (NaN/inf scores), huge rtol (inf tolerance), subnormal atol
  constexpr double kR[8] = {0x1p-10, 0x1p-7, 0x1p-13, 0, 1e30, 1e-3, 0x1p-3, 5e-324};
  constexpr double kA[8] = {0x1p-16, 1e-5, 0x1p-13, 0, 0, 1e-3, 0x1p-3, 5e-324};
  t.rtol = kR[pick & 7], t.atol = kA[pick & 7], t.limit = 1e-2;
  return t;
}

// Cheap deterministic generator for the golden's perturbation.
std::uint32_t next(std::uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s >> 8;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  static const bool init = (kc::set_thread_count(1), true);  // one chunk per pass: fast and repeatable
  (void)init;
  const Pair pr = kPairs[data[0] % kPairs.size()];
  const kc::Method m = data[1] & 1 ? kc::Method::stat_rel_err : kc::Method::mixed;
  const kc::Tolerance tol = tolerance(m, data[1] >> 1);
  const int mode = data[2] & 3;  // 0: a and g from the bytes; 1–3: g = a with some elements changed
  constexpr std::size_t kReps[4] = {1, 3, 20, 80};  // up to ~80k elements: blocks, tails, sparse back-off
  const std::size_t reps = kReps[(data[2] >> 2) & 3];
  data += 3, size -= 3;

  const std::size_t sa = kc::dtype_info(pr.a).bits / 8, sg = kc::dtype_info(pr.g).bits / 8;
  const bool derive = mode != 0 && pr.a == pr.g;
  const std::size_t per = derive ? sa : sa + sg;
  const std::size_t n0 = size / per;
  if (n0 == 0) return 0;
  const std::size_t n = n0 * reps;
  std::vector<std::uint8_t> ab(n * sa), gb(n * sg);
  std::uint32_t rng = 0x9e3779b9u ^ static_cast<std::uint32_t>(size);
  const std::uint8_t* gsrc = derive ? data : data + n0 * sa;  // derive: g starts as a copy of a
  for (std::size_t r = 0; r < reps; ++r) {
    std::memcpy(ab.data() + r * n0 * sa, data, n0 * sa);
    std::memcpy(gb.data() + r * n0 * sg, gsrc, n0 * sg);
  }
  if (derive) {
    // Flip low mantissa bits (or, rarely, any bit) of 1 in 4^s golden elements, s = (mode + repetition)
    // mod 4: runs of mostly equal codes and of mostly different ones, so the sparse screen, its back-off
    // after dense blocks and its return are all taken.
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t x = next(rng);
      const std::uint32_t mask = (1u << (2 * ((mode + i / n0) % 4))) - 1;
      if (x & mask) continue;
      std::uint8_t* e = gb.data() + i * sg;
      const unsigned bit = (x >> 12) % 16 == 0 ? (x >> 4) % (8 * sg) : (x >> 4) % 3;
      e[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    }
  }
  const auto shape = std::vector<std::int64_t>{static_cast<std::int64_t>(n)};
  const kc::Tensor a = kc::make_tensor(pr.a, shape, std::move(ab), "<fuzz a>");
  const kc::Tensor g = kc::make_tensor(pr.g, shape, std::move(gb), "<fuzz g>");

  const FloatPassStats ref = kc::cmp::float_pass_stats(a, g, m, tol, FloatPath::general, false);
  expect_same(kc::cmp::float_pass_stats(a, g, m, tol, FloatPath::fastest, false), ref, "fastest");
  expect_same(kc::cmp::float_pass_stats(a, g, m, tol, FloatPath::generic_fused, false), ref, "generic_fused");
  if (m == kc::Method::mixed) {
    expect_same(kc::cmp::float_pass_stats(a, g, m, tol, FloatPath::fastest, true), ref, "fastest lazy");
    expect_same(kc::cmp::float_pass_stats(a, g, m, tol, FloatPath::generic_fused, true), ref,
                "generic_fused lazy");
  }
  return 0;
}
