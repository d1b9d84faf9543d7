// The streaming pass of the value methods (mixed, stat_rel_err, close, cosine; their verdicts are in
// tolerance_methods.cpp and statistic_methods.cpp): one pass over both tensors that accumulates what the
// method's verdict reads (FloatAcc), with the per-method arithmetic inside the kernels so each stays one
// fused, vectorised loop.
//
// Data path: chunks of kChunk elements run in parallel (fixed boundaries → deterministic merge); inside a
// chunk, blocks of kBlock elements are decoded into stack doubles, non-finite pairs are classified and
// neutralised (a rare scalar path), then a branch-free kernel with kLanes independent accumulators
// computes the method's sums, counts and maxima (vectorised), and writes each element's "score" so the
// worst-10 list only looks at a block when its maximum beats the current 10th place (the chunk's own, or the
// best 10th place of the chunks already finished: PassShared::worst).
// mixed and stat_rel_err on real dtypes first try a fused pass per block (fused_block512 with AVX-512,
// else fused_block: loads straight from the tensor bytes, same arithmetic lane for lane); a block with a
// NaN/inf falls back to the above. mixed on float32/bfloat16/float16 pairs (FloatParams::score32) runs in
// 16 float lanes with AVX-512 (fused_mixed32): float screens decide the verdict and the decade bucket, and
// the rare elements near an edge are redone in double. mixed's min_passing histogram is lazy (see run_chunk):
// only the bins near its 99 % quantile are counted one by one, with a second pass in the rare case that is
// not enough. bfloat16/float16 blocks where most codes are bitwise equal are compressed to their differing
// elements first (sparse16). Every path gives bitwise the same figures (tests/compare/fused_twin_test.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <tuple>
#include <utility>

#include "compare/float_pass.h"
#include "core/error.h"
#include "core/parallel.h"
#include "numeric/formats.h"

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define KC_FUSED_AVX512 1  // the fused pass, worst scan and bucket counts in AVX-512 intrinsics
#endif

namespace kc::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// GCC/Clang vector extensions: 8 doubles per operation (AVX-512: one register; AVX2: two). The helpers
// are internal and inlined, so the "ABI changes without avx512f" note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double v8d __attribute__((vector_size(64)));
typedef std::int64_t v8l __attribute__((vector_size(64)));
typedef std::uint64_t v8ul __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef std::uint8_t v64u8 __attribute__((vector_size(64)));
typedef std::uint8_t v8u8 __attribute__((vector_size(8)));
typedef std::uint16_t v8u16 __attribute__((vector_size(16)));
typedef std::uint32_t v8u32 __attribute__((vector_size(32)));
inline v8d load8(const double* p) {
  v8d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(double* p, v8d v) { std::memcpy(p, &v, sizeof v); }
inline v8d vabs(v8d x) { return (v8d)((v8l)x & std::numeric_limits<std::int64_t>::max()); }
inline v8d vmax(v8d a, v8d b) { return a > b ? a : b; }  // operands are finite here
inline double hmax(v8d v) {
  double m = v[0];
  for (int j = 1; j < kLanes; ++j) m = std::max(m, v[j]);
  return m;
}

// Decade bucket of |a−g| ([0] exact, [1] (0,1e-12], …, [16] >1e2): with e2 the binary exponent of d
// and k0 = floor(e2·log10 2), 10^k0 ≤ 2^e2 ≤ d < 2^(e2+1) < 10^(k0+2), so the edges 10^m below d are all
// m < k0, plus m = k0 if d > 10^k0, plus m = k0+1 if d > 10^(k0+1): two table lookups and compares.
constexpr int kFlush = 15;  // blocks of ≤ 16 byte-vectors each: ≤ 240 counts per byte lane
[[maybe_unused]] alignas(64) constexpr double kPow10[16] = {1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5,
                                           1e-4,  1e-3,  1e-2,  1e-1, 1e0,  1e1,  1e2,  kInf};

inline std::int64_t floor_log10_pow2(std::int64_t e2) { return (e2 * 78913) >> 18; }  // exact for |e2| ≤ 1100

bool check_floor_log10_pow2() {
  for (std::int64_t e = -1100; e <= 1100; ++e) {
    // floor(e·log10 2) from long double, away from the (never hit) integer boundaries
    const auto ref =
        static_cast<std::int64_t>(std::floor(static_cast<long double>(e) * 0.30102999566398119521L));
    if (floor_log10_pow2(e) != ref) return false;
  }
  return true;
}

bool floor_log10_ok() {
  static const bool ok = check_floor_log10_pow2();
  return ok;
}

// Decade buckets of 8 non-negative errors (NaN → the last bucket), as bytes.
inline v8u8 decade8(v8d x) {
#if defined(__GNUC__) && !defined(__clang__)
  v8d lo, hi;
  std::memcpy(&lo, kPow10, 64);
  std::memcpy(&hi, kPow10 + 8, 64);
  const v8l bits = (v8l)x;
  const v8l e2 = ((bits >> 52) & 0x7FF) - 1023;
#if defined(__AVX512F__)
  // floor_log10_pow2 with a 32×32→64 multiply (one µop; the 64-bit vpmullq is three)
  const v8l k0 = (v8l)_mm512_mul_epi32((__m512i)e2, _mm512_set1_epi64(78913)) >> 18;
#else
  const v8l k0 = e2 * 78913 >> 18;
#endif
  v8l below = k0 + 12;
  below = below < 0 ? 0 : below;
  below = below > 15 ? 15 : below;
  // Table indices of 10^k0 and 10^(k0+1); outside the 15 edges → 15 (+inf). Unsigned compares: one test
  // covers both ends.
  v8l t0 = k0 + 12, t1 = k0 + 13;
  t0 = (v8ul)t0 > 14 ? 15 : t0;
  t1 = (v8ul)t1 > 14 ? 15 : t1;
  const v8d p0 = __builtin_shuffle(lo, hi, t0), p1 = __builtin_shuffle(lo, hi, t1);
  v8l b = 1 + below - (x > p0) - (x > p1);  // a true comparison is −1
  b = bits == 0 ? 0 : b;
  return __builtin_convertvector(b, v8u8);
#else
  v8u8 b;
  for (int j = 0; j < kLanes; ++j) b[j] = static_cast<std::uint8_t>(hist_bucket(x[j]));
  return b;
#endif
}

void decade_buckets(const double* d, std::size_t n, std::uint8_t* out) {
  KC_ASSERT(floor_log10_ok(), "floor_log10_pow2 is wrong");
  for (std::size_t i = 0; i < n; i += kLanes) {
    const v8u8 b8 = decade8(load8(d + i));
    std::memcpy(out + i, &b8, sizeof b8);
  }
}

// Quantile-histogram bins (see quantile_bin) of 8 scores, as 16-bit values.
inline v8u16 qbin8(v8d x) {
  const v8l bits = (v8l)x;
  v8l b = 2 + (bits >> 48) - ((1023 + kQMinExp) << 4);
  b = b < 1 ? 1 : b;
  b = b > kQBins - 1 ? kQBins - 1 : b;  // ≥ 2^60, inf
  b = bits == 0 ? 0 : b;
  return __builtin_convertvector(b, v8u16);
}

// Adds the byte counters of buckets 1…16 to hist and takes them from hist[0] (which got every element).
void flush_bytes(v64u8 (&cnt)[kHistBins], std::array<std::uint64_t, kHistBins>& hist) {
  for (int k = 1; k < kHistBins; ++k) {
#if defined(KC_FUSED_AVX512)
    const std::uint64_t s = static_cast<std::uint64_t>(
        _mm512_reduce_add_epi64(_mm512_sad_epu8((__m512i)cnt[k], _mm512_setzero_si512())));
#else
    std::uint64_t s = 0;
    for (int j = 0; j < 64; ++j) s += cnt[k][j];
#endif
    hist[k] += s;
    hist[0] -= s;
    cnt[k] = v64u8{};
  }
}

// Adds the buckets 1…16 of np64 bytes (0xFF: no bucket) to byte counters (one lane per byte position).
// Not inlined into run_chunk, so that the counters stay in registers for the whole block. With AVX-512
// only the buckets between the block's smallest and largest are counted (one pass over the bytes each).
[[gnu::noinline]] void count_buckets(const std::uint8_t* bucket, std::size_t np64,
                                     v64u8 (&byte_cnt)[kHistBins]) {
#if defined(KC_FUSED_AVX512)
  // Only the buckets the block spans (errors of similar size share a few decades): their range first,
  // from the bytes minus 1 (bucket 0 → 255, padding 0xFF → 254) and plus 1 (padding → 0).
  __m512i lo = _mm512_set1_epi8(-1), hi = _mm512_setzero_si512();
  for (std::size_t i = 0; i < np64; i += 64) {
    const __m512i v = _mm512_load_si512(bucket + i);
    lo = _mm512_min_epu8(lo, _mm512_sub_epi8(v, _mm512_set1_epi8(1)));
    hi = _mm512_max_epu8(hi, _mm512_add_epi8(v, _mm512_set1_epi8(1)));
  }
  const __m256i l2 = _mm256_min_epu8(_mm512_castsi512_si256(lo), _mm512_extracti64x4_epi64(lo, 1));
  const __m256i h2 = _mm256_max_epu8(_mm512_castsi512_si256(hi), _mm512_extracti64x4_epi64(hi, 1));
  __m128i l = _mm_min_epu8(_mm256_castsi256_si128(l2), _mm256_extracti128_si256(l2, 1));
  __m128i h = _mm_max_epu8(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
  l = _mm_min_epu8(l, _mm_srli_si128(l, 8)), h = _mm_max_epu8(h, _mm_srli_si128(h, 8));
  l = _mm_min_epu8(l, _mm_srli_si128(l, 4)), h = _mm_max_epu8(h, _mm_srli_si128(h, 4));
  l = _mm_min_epu8(l, _mm_srli_si128(l, 2)), h = _mm_max_epu8(h, _mm_srli_si128(h, 2));
  l = _mm_min_epu8(l, _mm_srli_si128(l, 1)), h = _mm_max_epu8(h, _mm_srli_si128(h, 1));
  const int kmin = std::max(1, (_mm_cvtsi128_si32(l) & 0xFF) + 1);
  const int kmax = std::min(kHistBins - 1, (_mm_cvtsi128_si32(h) & 0xFF) - 1);
  for (int k = kmin; k <= kmax; ++k) {
    __m512i c = (__m512i)byte_cnt[k];
    const __m512i kv = _mm512_set1_epi8(static_cast<char>(k));
    for (std::size_t i = 0; i < np64; i += 64)
      c = _mm512_mask_sub_epi8(c, _mm512_cmpeq_epi8_mask(_mm512_load_si512(bucket + i), kv), c,
                               _mm512_set1_epi8(-1));
    byte_cnt[k] = (v64u8)c;
  }
#else
  v64u8 c[kHistBins];
  for (int k = 1; k < kHistBins; ++k) c[k] = byte_cnt[k];
  for (std::size_t i = 0; i < np64; i += 64) {
    v64u8 v;
    std::memcpy(&v, bucket + i, 64);
    for (int k = 1; k < kHistBins; ++k) c[k] -= (v64u8)(v == static_cast<std::uint8_t>(k));  // true is 0xFF
  }
  for (int k = 1; k < kHistBins; ++k) byte_cnt[k] = c[k];
#endif
}

// Offers the block's scores above the current 10th place to the worst list; 8 scores per test.
// map (sparse 16-bit blocks): s[j] belongs to block element map[j] (increasing, so ties keep their order).
// floor: scores ≤ floor cannot be among the final worst (see PassShared::worst).
template <typename T>
void offer_worst(TopK& top, const T* s, std::size_t n, std::size_t np, std::size_t blk,
                 const std::uint16_t* map, double floor) {
  double thr = std::max(top.threshold(), floor);
#if defined(KC_FUSED_AVX512)
  // 16 (float) or 8 (double) scores per compare. The threshold only grows, so a lane found above an older
  // threshold is checked again against the current one. For floats it is rounded down to a float:
  // s > thr ⟺ s > that float, for every float s.
  constexpr std::size_t kStep = sizeof(T) == 4 ? 16 : 8;
  auto thr_vec = [](double t) {
    if constexpr (sizeof(T) == 4) {
      float f = static_cast<float>(t);
      if (static_cast<double>(f) > t) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
      return _mm512_set1_ps(f);
    } else {
      return _mm512_set1_pd(t);
    }
  };
  auto tv = thr_vec(thr);
  for (std::size_t i = 0; i < n; i += kStep) {
    const std::size_t left = std::min(kStep, n - i);
    std::uint32_t hit;
    if constexpr (sizeof(T) == 4) {
      const auto m = static_cast<__mmask16>((1u << left) - 1);
      hit = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, s + i), tv, _CMP_GT_OQ);
    } else {
      const auto m = static_cast<__mmask8>((1u << left) - 1);
      hit = _mm512_mask_cmp_pd_mask(m, _mm512_maskz_loadu_pd(m, s + i), tv, _CMP_GT_OQ);
    }
    if (!hit) continue;
    for (; hit; hit &= hit - 1) {
      const std::size_t j = i + static_cast<std::size_t>(std::countr_zero(hit));
      if (static_cast<double>(s[j]) > thr)
        top.offer(static_cast<double>(s[j]), blk + (map ? map[j] : j)),
            thr = std::max(top.threshold(), floor);
    }
    tv = thr_vec(thr);
  }
  (void)np;
#else
  for (std::size_t i = 0; i < np; i += kLanes) {
    bool any = false;
    for (int j = 0; j < kLanes; ++j) any |= static_cast<double>(s[i + j]) > thr;
    if (!any) continue;
    for (std::size_t j = i; j < std::min(n, i + kLanes); ++j)
      if (static_cast<double>(s[j]) > thr)
        top.offer(static_cast<double>(s[j]), blk + (map ? map[j] : j)),
            thr = std::max(top.threshold(), floor);
  }
#endif
}

// Counts nq quantile bins into two interleaved uint32 histograms (q0 and q0 + kQBins): two independent
// read-modify-write chains when neighbours share a bin.
template <typename T>
void count_bins(std::uint32_t* q0, const T* bins, std::size_t nq) {
  std::uint32_t* q1 = q0 + kQBins;
  std::size_t j = 0;
  for (; j + 2 <= nq; j += 2) ++q0[bins[j]], ++q1[bins[j + 1]];
  if (j < nq) ++q0[bins[j]];
}

struct FloatParams {
  Method method;
  DType dtype;
  bool complex;
  double rtol = 0, atol = 0;
  bool want_quantiles;  // mixed, close: histogram for min_passing
  FloatPath path = FloatPath::fastest;
  bool lazy_quantiles = false;  // see run_chunk
  // mixed on float32/bfloat16/float16 pairs with 0 ≤ rtol ≤ 1 (0 or a normal float) and atol ≤ 2^100:
  // the score is computed in float arithmetic from the (float-exact) values, on every path:
  // |a−g| / (rtol·|g| + atol) with float operations (fma). The AVX-512 pass then works in 16 float lanes
  // and redoes only the rare elements near the verdict's or a decade's edge in double (see fused_mixed32).
  bool score32 = false;
  float rtol32 = 0, atol32 = 0;
};

// The float score of score32 (generic code; the compiler contracts rtol·|g| + atol into an fma, as
// _mm512_fmadd_ps does).
inline v8f vabsf(v8f x) { return (v8f)((v8u32)x & 0x7FFFFFFFu); }
inline v8f score32(v8d a, v8d g, v8f vr, v8f va) {
  const v8f a32 = __builtin_convertvector(a, v8f), g32 = __builtin_convertvector(g, v8f);
  return vabsf(a32 - g32) / (vr * vabsf(g32) + va);
}

// What the chunks of one pass share.
// q: the chunks' quantile counts, summed under a lock as each chunk ends (integer sums: any order gives the
// same histogram). One shared array instead of one per chunk: 512 chunks × 15 KiB of fresh memory per
// comparison of 2^25 elements cost more page faults than the counting.
// worst: the largest 10th-place score of any finished chunk's worst list (0: none yet). At least 10
// elements score ≥ it, so a lower score never reaches the final list, whichever chunks finished first;
// chunks skip such scores (a fresh chunk would otherwise scan about half its blocks to fill its own list).
// The final list is the same for any timing: every element of it is still offered in its chunk.
struct PassShared {
  std::mutex mu;
  std::vector<std::uint64_t> q = std::vector<std::uint64_t>(kQBins, 0);
  std::atomic<double> worst{0.0};
};

// Per-block scratch: decoded values (complex: re,im pairs), |a−g|, |g|, score, quantile key.
struct Scratch {
  alignas(64) double a[2 * kBlock];
  alignas(64) double g[2 * kBlock];
  alignas(64) double d[kBlock];
  alignas(64) double ga[kBlock];
  alignas(64) double s[kBlock];
  alignas(64) double q[kBlock];
  alignas(64) std::uint8_t bucket[kBlock];
  alignas(64) std::uint16_t qbin[kBlock];
  alignas(64) float sf[kBlock + kLanes];        // AVX-512 mixed: the scores, as floats (+8: 16-wide stores)
  alignas(64) std::uint32_t qkey[kBlock + 16];  // AVX-512 mixed: kept quantile bins (+16: full stores)
  alignas(64) float df[kBlock + 16];            // fused_mixed32: |a−g| as floats
  // sparse 16-bit blocks (compress16): the differing elements' codes and block indices (+32: full stores)
  alignas(64) std::uint16_t ca[kBlock + 32];
  alignas(64) std::uint16_t cg[kBlock + 32];
  alignas(64) std::uint16_t cidx[kBlock + 32];
};

// True when any value in x[0, n) is NaN or ±inf (x − x is 0 exactly for finite x).
bool any_nonfinite(const double* x, const double* y, std::size_t n) {
  v8d probe = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v8d a = load8(x + i), g = load8(y + i);
    probe += (a - a) + (g - g);
  }
  double tail = 0;
  for (; i < n; ++i) tail += (x[i] - x[i]) + (y[i] - y[i]);
  for (int j = 0; j < kLanes; ++j) tail += probe[j];
  return std::isnan(tail);
}

// Classifies non-finite pairs and zeroes them on both sides, so the kernels see finite numbers only.
// Returns the number of mismatching elements (they must not count as passing).
std::size_t neutralise_nonfinite(Scratch& w, std::size_t n, bool complex, std::size_t base,
                                 NonFiniteAcc& nf) {
  std::size_t mism = 0;
  const std::size_t comps = complex ? 2 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    int cls = -1;
    bool any = false;
    for (std::size_t k = 0; k < comps; ++k) {
      double& a = w.a[i * comps + k];
      double& g = w.g[i * comps + k];
      if (std::isfinite(a) && std::isfinite(g)) continue;
      any = true;
      const int c = classify_nonfinite(a, g);
      if (c >= 0 && cls < 0) cls = c;
      if (c < 0) a = g = 0;  // a matched special value: no error from this component
    }
    if (!any) continue;
    if (cls < 0) {
      ++nf.matched;
    } else {
      nf.add(cls, base + i);
      ++mism;
      for (std::size_t k = 0; k < comps; ++k) w.a[i * comps + k] = w.g[i * comps + k] = 0;
    }
  }
  return mism;
}

// --- fused fast path (real dtypes, mixed and stat_rel_err) -----------------------------------------------
// Loaders: 8 decoded elements at a block-relative index, straight from the tensor bytes (no decode pass).
struct LoadF32 {
  const std::uint8_t* p;
  v8d operator()(std::size_t i) const {
    v8f f;
    std::memcpy(&f, p + 4 * i, sizeof f);
    return __builtin_convertvector(f, v8d);
  }
};
struct LoadBf16 {  // bf16 is the top half of an f32
  const std::uint8_t* p;
  v8d operator()(std::size_t i) const {
    v8u16 h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    return __builtin_convertvector((v8f)(__builtin_convertvector(h, v8u32) << 16), v8d);
  }
};
#if defined(__F16C__)
struct LoadF16 {
  const std::uint8_t* p;
  v8d operator()(std::size_t i) const {
    const v8f f = (v8f)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    return __builtin_convertvector(f, v8d);
  }
};
#endif
struct LoadF64 {
  const std::uint8_t* p;
  v8d operator()(std::size_t i) const {
    v8d v;
    std::memcpy(&v, p + 8 * i, sizeof v);
    return v;
  }
};
struct LoadDecoded {  // other dtypes: decode_block'ed into the scratch first
  const double* p;
  v8d operator()(std::size_t i) const { return load8(p + i); }
};

struct FusedOut {
  std::size_t nq = 0;     // mixed: quantile bins left in w.qbin (exact elements, bin 0, only counted)
  std::int64_t pass = 0;  // mixed
  double sum = 0;         // stat_rel_err: this block's Σ rel, summed as the general path sums it
  v8d max_d = {}, max_s = {};
  bool float_scores = false;  // scores are in w.sf (float) instead of w.s
  bool wide_keys = false;     // quantile bins are in w.qkey (uint32) instead of w.qbin
  int q_from = 1;             // in: AVX-512 mixed keeps only bins ≥ q_from (the others count as bin 0)
  double max_d_floor = 0;     // in: the chunk's largest |a−g| so far (fused_mixed32)
  bool exact_max = false;  // fused_mixed32: bmax/arg replace max_d (0 when the block cannot beat the floor)
  double bmax = 0;
  std::size_t arg = 0;
  // sparse 16-bit blocks: scores, |a−g| and buckets are in w[0, nb) for the block elements map[0, nb)
  // (map[j] only for j below the differing count; the rest is zero padding: exact, never worst)
  const std::uint16_t* map = nullptr;
  std::size_t nb = 0;
  bool try_sparse = true;  // in: screen 16-bit blocks for equal codes (run_chunk backs off on dense data)
  bool dense = false;      // out: screened, and the block was not sparse
};

// One block of n (a multiple of kLanes) elements in one pass: |a−g|, the verdict counts and sums, the
// score, its decade bucket and quantile bin. Exactly the general path's arithmetic, lane for lane, so
// every figure is bitwise the same. Returns false, having accumulated nothing, when a value is NaN or
// ±inf (then |a−g| is too) or |a−g| overflows (float64): the general path handles such blocks.
template <Method M, typename Load>
bool fused_block(const Load& la, const Load& lg, std::size_t n, const FloatParams& p, Scratch& w,
                 FusedOut& o) {
  v8d probe = {}, max_d = {}, max_s = {}, sum = {};
  v8l cnt = {};
  std::size_t nq = 0;
  const v8d vr = p.rtol - v8d{}, va = p.atol - v8d{}, eps = 1e-7 - v8d{};
  const v8f vr32 = p.rtol32 - v8f{}, va32 = p.atol32 - v8f{};
  for (std::size_t i = 0; i < n; i += kLanes) {
    const v8d a = la(i), g = lg(i);
    const v8d d = vabs(a - g), ga = vabs(g);
    probe += d - d;  // NaN iff some d is NaN or inf
    v8d s;
    if constexpr (M == Method::mixed) {
      const v8d tol = va + vr * ga;
      cnt -= (d <= tol);
      const v8f sf = p.score32 ? score32(a, g, vr32, va32)
                               : __builtin_convertvector(d, v8f) / __builtin_convertvector(tol, v8f);
      s = d > 0 ? __builtin_convertvector(sf, v8d) : v8d{};
      const v8u16 q = qbin8(s);
#if defined(__AVX512VBMI2__) && defined(__AVX512VL__)
      // Keep only the non-zero bins: exact elements (often most of them) would all increment one counter,
      // a chain of dependent read-modify-writes; they are counted as n − nq instead.
      const __mmask8 nz = _mm_test_epi16_mask((__m128i)q, (__m128i)q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(w.qbin + nq), _mm_maskz_compress_epi16(nz, (__m128i)q));
      nq += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(nz)));
#else
      std::memcpy(w.qbin + i, &q, sizeof q);
      nq = i + kLanes;
#endif
    } else {
      s = d / (ga + eps);
      sum += s;
    }
    store8(w.d + i, d);
    store8(w.s + i, s);
    max_d = vmax(max_d, d);
    max_s = vmax(max_s, s);
    const v8u8 b = decade8(d);
    std::memcpy(w.bucket + i, &b, sizeof b);
  }
  double pr = 0;
  for (int j = 0; j < kLanes; ++j) pr += probe[j];
  if (std::isnan(pr)) return false;
  if constexpr (M == Method::mixed) {
    o.nq = nq;
    for (int j = 0; j < kLanes; ++j) o.pass += cnt[j];
  } else {
    for (int j = 0; j < kLanes; ++j) o.sum += sum[j];
  }
  o.max_d = max_d, o.max_s = max_s;
  return true;
}

#if defined(KC_FUSED_AVX512)
// The same pass with AVX-512 intrinsics: GCC splits the generic version's f32↔f64 conversions into four
// instructions each and spends ~25 on decade8; this one needs about 45 µops per 8 elements. Every result
// is bitwise the generic pass's (tests/compare/fused_twin_test.cpp checks it against the general path):
//  - mixed's score is the same float quotient, kept as a float (max, store, quantile bin from its bits);
//  - the quantile bin from the float's bits: for a float s, (bits_f64(s) >> 48) = (bits_f32(s) >> 19) +
//    (896 << 4) when s is normal; subnormal, NaN and huge scores land in the same clamped bins;
//  - the decade bucket needs one table lookup instead of two (see decade8_512).
// prefetch(i): the line kAhead bytes past element i. The hardware prefetcher stops at 4 KiB pages; a
// software prefetch does not, which keeps a single thread near the plain read's bandwidth.
constexpr std::size_t kAhead = 2048;
inline void prefetch_at(const std::uint8_t* q) {
  _mm_prefetch(reinterpret_cast<const char*>(q + kAhead), _MM_HINT_T0);  // never faults
}
struct Load512F32 {
  static constexpr bool kFloatExact = true;  // values of float range: |a−g| ≤ 2^129
  const std::uint8_t* p;
  __m512d operator()(std::size_t i) const {
    return _mm512_cvtps_pd(_mm256_loadu_ps(reinterpret_cast<const float*>(p + 4 * i)));
  }
  void prefetch(std::size_t i) const { prefetch_at(p + 4 * i); }
};
struct Load512Bf16 {
  static constexpr bool kFloatExact = true;
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 2 * i); }
  __m512d operator()(std::size_t i) const {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
    return _mm512_cvtps_pd(_mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
  }
};
struct Load512F16 {
  static constexpr bool kFloatExact = true;
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 2 * i); }
  __m512d operator()(std::size_t i) const {
    return _mm512_cvtps_pd(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i))));
  }
};
struct Load512F64 {
  static constexpr bool kFloatExact = false;
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 8 * i); }
  __m512d operator()(std::size_t i) const { return _mm512_loadu_pd(p + 8 * i); }
};
struct Load512Decoded {
  static constexpr bool kFloatExact = false;
  const double* p;
  void prefetch(std::size_t) const {}
  __m512d operator()(std::size_t i) const { return _mm512_loadu_pd(p + i); }
};

// decade8 for finite d ≥ 0 (pos: d > 0). With e2 the exponent of d and k1 = floor((e2+1)·log10 2):
// every edge 10^m with m < k1 is ≤ 2^(e2+1)/10 < 2^e2 ≤ d, and 10^(k1+1) > 2^(e2+1) > d, so the bucket
// is u + (d > 10^k1) with u = k1 + 13 = 1 + (edges below 10^k1), clamped to [1, 16]. The lookup uses
// u's low 4 bits (kPow10Rot[u] = 10^(u−13) for u in 1…15); outside 1…15 the clamp alone decides: u ≤ 0
// gives 1 (d < 10^(k1+1) ≤ 1e-12), u ≥ 16 gives 16.
alignas(64) constexpr double kPow10Rot[16] = {kInf, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6,
                                              1e-5, 1e-4,  1e-3,  1e-2,  1e-1, 1e0,  1e1,  1e2};
inline __m512i decade8_512(__m512d d, __mmask8 pos) {
  const __m512i e = _mm512_srli_epi64(_mm512_castpd_si512(d), 52);  // biased exponent: e2 + 1 = e − 1022
  // u = floor_log10_pow2(e − 1022) + 13: adding 13·2^18 before the arithmetic shift adds exactly 13
  constexpr std::int64_t kBias = 13 * (std::int64_t{1} << 18) - 1022 * std::int64_t{78913};
#if defined(__AVX512IFMA__)
  __m512i u = _mm512_madd52lo_epu64(_mm512_set1_epi64(kBias), e, _mm512_set1_epi64(78913));  // mod 2^64
#else
  __m512i u = _mm512_add_epi64(_mm512_mul_epi32(e, _mm512_set1_epi64(78913)), _mm512_set1_epi64(kBias));
#endif
  u = _mm512_srai_epi64(u, 18);
  const __m512d edge = _mm512_permutex2var_pd(_mm512_load_pd(kPow10Rot), u, _mm512_load_pd(kPow10Rot + 8));
  u = _mm512_mask_add_epi64(u, _mm512_cmp_pd_mask(d, edge, _CMP_GT_OQ), u, _mm512_set1_epi64(1));
  u = _mm512_max_epi64(u, _mm512_set1_epi64(1));
  return _mm512_maskz_min_epi64(pos, u, _mm512_set1_epi64(kHistBins - 1));  // exact elements: bucket 0
}

// One block (n a multiple of kLanes). kFirst: the chunk's first block, where every non-zero quantile bin
// is kept (bins 1…); later blocks keep bins ≥ o.q_from only. Kept bins are packed into w.qkey[0, o.nq),
// the others are counted as bin 0 (see run_chunk).
template <Method M, bool kFirst, typename Load>
bool fused_block512(const Load& la, const Load& lg, std::size_t n, const FloatParams& p, Scratch& w,
                    FusedOut& o) {
  constexpr bool kSumProbe = M == Method::stat_rel_err && Load::kFloatExact;
  __m512d probe = _mm512_setzero_pd(), max_d = _mm512_setzero_pd(), max_s = _mm512_setzero_pd(),
          sum = _mm512_setzero_pd();
  __m256 max_sf = _mm256_setzero_ps();
  __m512i cnt = _mm512_setzero_si512();
  const v8d vr = p.rtol - v8d{}, va = p.atol - v8d{};
  const __m512d eps = _mm512_set1_pd(1e-7);
  const __m512d sign = _mm512_set1_pd(-0.0);
  const __m512i one = _mm512_set1_epi64(1);
  const __m512i q_from = _mm512_set1_epi32(o.q_from);
  std::size_t nq = 0;
  // always_inline: a call left for the tail would keep the accumulators in memory for the whole loop
  // Everything but the quantile bins for 8 elements; returns mixed's scores.
  auto step = [&](std::size_t i) __attribute__((always_inline)) {
    __m256 sf = _mm256_setzero_ps();
    const __m512d a = la(i), g = lg(i);
    const __m512d d = _mm512_andnot_pd(sign, _mm512_sub_pd(a, g)), ga = _mm512_andnot_pd(sign, g);
    // not finite iff some d is NaN or inf (or the sum overflows). stat_rel_err on float-exact values needs
    // no probe: every rel is < 2^153 then, so its sum is finite iff every d is (a NaN/inf d gives NaN/inf).
    if constexpr (!kSumProbe) probe = _mm512_add_pd(probe, d);
    const __mmask8 pos = _mm512_cmp_pd_mask(d, _mm512_setzero_pd(), _CMP_GT_OQ);
    if constexpr (M == Method::mixed) {
      // the generic pass's expression (so the compiler contracts it the same way)
      const __m512d tol = (__m512d)(va + vr * (v8d)ga);
      cnt = _mm512_mask_add_epi64(cnt, _mm512_cmp_pd_mask(d, tol, _CMP_LE_OQ), cnt, one);
      sf = _mm256_maskz_div_ps(pos, _mm512_cvtpd_ps(d), _mm512_cvtpd_ps(tol));
      max_sf = _mm256_max_ps(max_sf, sf);  // (max_s > s ? max_s : s), as vmax, on the same 8 lanes
    } else {
      const __m512d s = _mm512_div_pd(d, _mm512_add_pd(ga, eps));
      sum = _mm512_add_pd(sum, s);
      max_s = _mm512_max_pd(max_s, s);
      _mm512_store_pd(w.s + i, s);
    }
    max_d = _mm512_max_pd(max_d, d);
    _mm512_store_pd(w.d + i, d);
    return std::pair{sf, decade8_512(d, pos)};
  };
  // Stores the decade buckets (qword lanes) of 16 elements as bytes.
  auto buckets16 = [&](std::size_t i, __m512i b0, __m512i b1) __attribute__((always_inline)) {
#if defined(__AVX512VBMI__)
    // byte 0 of each qword of b0, then of b1 (index bit 6 picks b1): one shuffle for 16 elements
    const __m512i idx = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0x7870686058504840, 0x3830282018100800);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w.bucket + i),
                     _mm512_castsi512_si128(_mm512_permutex2var_epi8(b0, idx, b1)));
#else
    _mm_storel_epi64(reinterpret_cast<__m128i*>(w.bucket + i), _mm512_cvtepi64_epi8(b0));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(w.bucket + i + kLanes), _mm512_cvtepi64_epi8(b1));
#endif
  };
  // Stores 16 scores (i a multiple of 16) and packs their kept quantile bins into w.qkey.
  auto bins16 = [&](std::size_t i, __m512 sf) __attribute__((always_inline)) {
    _mm512_store_ps(w.sf + i, sf);
    // bin = clamp(key − 1070, 1, kQBins − 1) for a score ≠ +0, key = its float bits >> 19 (signed)
    const __m512i sb = _mm512_castps_si512(sf);
    __m512i q = _mm512_add_epi32(_mm512_srai_epi32(sb, 19), _mm512_set1_epi32(2 - (kQMinExp + 127) * kQSub));
    __mmask16 keep;
    if constexpr (kFirst) {
      keep = _mm512_test_epi32_mask(sb, sb);  // score ≠ +0 ⟺ bin ≠ 0
      q = _mm512_max_epi32(q, _mm512_set1_epi32(1));
    } else {
      keep = _mm512_cmpge_epi32_mask(q, q_from);  // q_from ≥ 2: +0, tiny scores and −NaN (bin 1) fail
    }
    q = _mm512_min_epi32(q, _mm512_set1_epi32(kQBins - 1));
    // compress (no data-dependent branch); the count loop then walks nq entries
    _mm512_storeu_si512(w.qkey + nq, _mm512_maskz_compress_epi32(keep, q));
    nq += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(keep)));
  };
  std::size_t i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {  // one prefetch per stream and 16 elements
    la.prefetch(i), lg.prefetch(i);
    const auto [s0, b0] = step(i);
    const auto [s1, b1] = step(i + kLanes);
    buckets16(i, b0, b1);
    if constexpr (M == Method::mixed) bins16(i, _mm512_insertf32x8(_mm512_castps256_ps512(s0), s1, 1));
  }
  if (i < n) {  // 8 left: the upper 8 scores are +0, never kept, and land past the block in w.sf
    const auto [s0, b0] = step(i);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(w.bucket + i), _mm512_cvtepi64_epi8(b0));
    if constexpr (M == Method::mixed) bins16(i, _mm512_insertf32x8(_mm512_setzero_ps(), s0, 0));
  }
  if (!std::isfinite(_mm512_reduce_add_pd(kSumProbe ? sum : probe))) return false;
  if constexpr (M == Method::mixed) {
    o.nq = nq;
    o.pass = _mm512_reduce_add_epi64(cnt);
    o.float_scores = o.wide_keys = true;
    max_s = _mm512_cvtps_pd(max_sf);
  } else {
    const v8d sv = (v8d)sum;
    for (int j = 0; j < kLanes; ++j) o.sum += sv[j];  // in the generic pass's order
  }
  o.max_d = (v8d)max_d, o.max_s = (v8d)max_s;
  return true;
}

template <Method M, typename Load>
bool fused_block512(const Load& la, const Load& lg, std::size_t n, const FloatParams& p, Scratch& w,
                    FusedOut& o) {
  if (M == Method::mixed && o.q_from <= 1) return fused_block512<M, true>(la, lg, n, p, w, o);
  return fused_block512<M, false>(la, lg, n, p, w, o);
}

// --- mixed in 16 float lanes (score32: float32, bfloat16, float16 pairs) --------------------------------
// Loaders of 16 elements as floats (exact) and of one element as a double.
struct Load16F32 {
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 4 * i); }
  __m512 operator()(std::size_t i) const { return _mm512_loadu_ps(p + 4 * i); }
  __m512 operator()(std::size_t i, __mmask16 m) const { return _mm512_maskz_loadu_ps(m, p + 4 * i); }
  double at(std::size_t i) const {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
};
struct Load16Bf16 {  // widened with a shift: bf16 is the top half of an f32
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 2 * i); }
  __m512 operator()(std::size_t i) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  __m512 operator()(std::size_t i, __mmask16 m) const {
    const __m256i h = _mm256_maskz_loadu_epi16(m, p + 2 * i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  double at(std::size_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  }
};
struct Load16F16 {
  const std::uint8_t* p;
  void prefetch(std::size_t i) const { prefetch_at(p + 2 * i); }
  __m512 operator()(std::size_t i) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i)));
  }
  __m512 operator()(std::size_t i, __mmask16 m) const {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + 2 * i));
  }
  double at(std::size_t i) const {
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return _cvtsh_ss(h);
  }
};

// Decade edges as float bits minus 4, rotated like kPow10Rot (index u & 15 holds 10^(u−13)). For d ≥ 0
// and x = bits(d) − (bits(edge) − 4): d > edge ⟺ x > 4, and d is within 4 float ulps of the edge ⟺
// x ≤ 8 unsigned.
constexpr std::int32_t edge_bits_m4(float e) { return std::bit_cast<std::int32_t>(e) - 4; }
// clang-format off
alignas(64) constexpr std::int32_t kPow10RotBits[16] = {
    edge_bits_m4(std::numeric_limits<float>::infinity()),
    edge_bits_m4(1e-12f), edge_bits_m4(1e-11f), edge_bits_m4(1e-10f), edge_bits_m4(1e-9f),
    edge_bits_m4(1e-8f),  edge_bits_m4(1e-7f),  edge_bits_m4(1e-6f),  edge_bits_m4(1e-5f),
    edge_bits_m4(1e-4f),  edge_bits_m4(1e-3f),  edge_bits_m4(1e-2f),  edge_bits_m4(1e-1f),
    edge_bits_m4(1e0f),   edge_bits_m4(1e1f),   edge_bits_m4(1e2f)};
// clang-format on
// floor((e − 126)·log10 2) = ((e − 126)·9864) >> 15 for every biased float exponent e (checked in
// check_floor_log10_pow2_f32); one 16-bit multiply-add per lane.
constexpr int kLog2M = 9864, kLog2S = 15;
bool check_floor_log10_pow2_f32() {
  for (int e = 0; e < 256; ++e) {
    const auto ref =
        static_cast<int>(std::floor(static_cast<long double>(e - 126) * 0.30102999566398119521L));
    if ((((e - 126) * kLog2M) >> kLog2S) != ref) return false;
  }
  return true;
}

// mixed on one block of n (a multiple of 8) float-exact elements, 16 per step, in float arithmetic, with
// every figure bitwise what the double passes give:
//  - verdict d ≤ tol (double): d32 = |a−g| (float) is within 2^-24 of the exact |a−g|, t32 = fma(rtol32,
//    |g|, atol32) within 3·2^-24 (relative) + 2^-149 of atol + rtol·|g| (FloatParams::score32's limits).
//    Unless |d32 − t32| ≤ t32·2^-20 + 2^-120, d32 ≤ t32 is the double verdict (the margin exceeds the
//    float errors, relative and absolute); d32 = 0 always passes;
//  - decade bucket: as decade8_512 with the float exponent and float edges; decided unless d32 is within 4
//    float ulps of the edge it is compared with (the decade edges are ≥ 2 % away from powers of two, so
//    the other edges are far);
//  - lanes in neither case (rare) are redone in double for those 16 elements, exactly as the other passes;
//  - max |a−g|: the largest double error is among the elements with the largest float error (rounding is
//    monotonic); those are re-read in double when the block can beat o.max_d_floor;
//  - score (score32) and its quantile bin as in fused_block512.
// Returns false, having accumulated nothing, when some d32 is inf or NaN (a NaN/inf input, or |a−g| above
// the float range): the general path handles the block. (A NaN d32 is never decided by the screens, so
// the double redo sees it; an inf one ends up in the maximum.)
template <bool kFirst, typename Load>
bool fused_mixed32(const Load la, const Load lg, std::size_t n, const FloatParams& p, Scratch& w,
                   FusedOut& o) {  // loaders by value: the pointers stay in registers
  const __m512 zero = _mm512_setzero_ps();
  const __m512 vr = _mm512_set1_ps(p.rtol32), va = _mm512_set1_ps(p.atol32);
  const __m512 c_rel = _mm512_set1_ps(0x1p-20f);
  const __m512 tiny = _mm512_set1_ps(0x1p-120f);  // normal: a subnormal operand costs a microcode assist
  const __m512i edges = _mm512_load_si512(kPow10RotBits);
  const __m512i one = _mm512_set1_epi32(1), top = _mm512_set1_epi32(kHistBins - 1);
  const __m512i four = _mm512_set1_epi32(4), eight = _mm512_set1_epi32(8);
  const __m512i mul = _mm512_set1_epi32(kLog2M);
  const __m512i bias = _mm512_set1_epi32(13 * (1 << kLog2S) - 126 * kLog2M);
  const __m512i q_from = _mm512_set1_epi32(o.q_from);
  const v8d vr64 = p.rtol - v8d{}, va64 = p.atol - v8d{};
  __m512 max_d = zero, max_s = zero;
  __mmask16 nan_seen = 0;
  std::int64_t cnt = 0;  // a scalar popcount: the vector ports are the bottleneck here
  std::size_t nq = 0;
  auto step = [&](std::size_t i, __m512 a, __m512 g, __mmask16 valid) __attribute__((always_inline)) {
    const __m512 d = _mm512_abs_ps(_mm512_sub_ps(a, g)), ga = _mm512_abs_ps(g);
    const __m512 t = _mm512_fmadd_ps(vr, ga, va);
    const __mmask16 pos = _mm512_cmp_ps_mask(d, zero, _CMP_NEQ_UQ);  // d > 0, or NaN
    __mmask16 pass = _mm512_cmp_ps_mask(d, t, _CMP_LE_OQ);
    // undecided: |d − t| ≤ t·2^-20 + 2^-120, or NaN; d = 0 always passes
    const __m512 margin = _mm512_fmadd_ps(t, c_rel, tiny);
    __mmask16 amb = _mm512_mask_cmp_ps_mask(pos, _mm512_abs_ps(_mm512_sub_ps(d, t)), margin, _CMP_NGT_UQ);
    // decade bucket (decade8_512 with the float exponent)
    const __m512i db = _mm512_castps_si512(d);
#if defined(__AVX512VNNI__)
    __m512i u = _mm512_srai_epi32(_mm512_dpwssd_epi32(bias, _mm512_srli_epi32(db, 23), mul), kLog2S);
#else
    __m512i u =
        _mm512_srai_epi32(_mm512_add_epi32(_mm512_madd_epi16(_mm512_srli_epi32(db, 23), mul), bias), kLog2S);
#endif
    const __m512i x = _mm512_sub_epi32(db, _mm512_permutexvar_epi32(u, edges));
    u = _mm512_mask_add_epi32(u, _mm512_cmpgt_epi32_mask(x, four), u, one);
    amb = _mm512_kor(amb, _mm512_cmple_epu32_mask(x, eight));
    __m512i b = _mm512_maskz_min_epi32(pos, _mm512_max_epi32(u, one), top);
    if (!_mm512_kortestz(amb, amb)) [[unlikely]] {
      // exactly as the double passes, for these 16 elements
      nan_seen |= _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
      __mmask16 pass64 = 0;
      __m256i b64[2];
      for (int h = 0; h < 2; ++h) {
        const __m256 ah = h ? _mm512_extractf32x8_ps(a, 1) : _mm512_castps512_ps256(a);
        const __m256 gh = h ? _mm512_extractf32x8_ps(g, 1) : _mm512_castps512_ps256(g);
        const __m512d a64 = _mm512_cvtps_pd(ah), g64 = _mm512_cvtps_pd(gh);
        const __m512d d64 = _mm512_abs_pd(_mm512_sub_pd(a64, g64)), ga64 = _mm512_abs_pd(g64);
        const __m512d tol = (__m512d)(va64 + vr64 * (v8d)ga64);  // fused_block512's expression
        pass64 |= static_cast<__mmask16>(_mm512_cmp_pd_mask(d64, tol, _CMP_LE_OQ)) << (8 * h);
        b64[h] =
            _mm512_cvtepi64_epi32(decade8_512(d64, _mm512_cmp_pd_mask(d64, _mm512_setzero_pd(), _CMP_GT_OQ)));
      }
      pass = pass64;
      b = _mm512_inserti64x4(_mm512_castsi256_si512(b64[0]), b64[1], 1);
    }
    cnt += std::popcount(static_cast<unsigned>(pass & valid));
    const __m512 s = _mm512_maskz_div_ps(pos, d, t);
    max_s = _mm512_max_ps(max_s, s);
    max_d = _mm512_max_ps(max_d, d);
    _mm512_store_ps(w.df + i, d);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(w.bucket + i), _mm512_cvtepi32_epi8(b));  // tail: +8 ok
    _mm512_store_ps(w.sf + i, s);
    // quantile bins, as fused_block512's bins16
    const __m512i sb = _mm512_castps_si512(s);
    __m512i q = _mm512_add_epi32(_mm512_srai_epi32(sb, 19), _mm512_set1_epi32(2 - (kQMinExp + 127) * kQSub));
    __mmask16 keep;
    if constexpr (kFirst) {
      keep = _mm512_test_epi32_mask(sb, sb);
      q = _mm512_max_epi32(q, one);
    } else {
      keep = _mm512_cmpge_epi32_mask(q, q_from);
    }
    q = _mm512_min_epi32(q, _mm512_set1_epi32(kQBins - 1));
    _mm512_storeu_si512(w.qkey + nq, _mm512_maskz_compress_epi32(keep, q));
    nq += static_cast<std::size_t>(std::popcount(static_cast<unsigned>(keep)));
  };
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    la.prefetch(i), lg.prefetch(i);
    step(i, la(i), lg(i), 0xFFFF);
  }
  if (i < n) step(i, la(i, 0x00FF), lg(i, 0x00FF), 0x00FF);  // 8 left; the others load as +0 (score 0)
  const float bmax = _mm512_reduce_max_ps(max_d);
  if (nan_seen || !(bmax <= std::numeric_limits<float>::max())) return false;
  o.nq = nq;
  o.pass = cnt;
  o.float_scores = o.wide_keys = true;
  o.max_s = v8d{} + _mm512_reduce_max_ps(max_s);
  o.max_d = v8d{};
  o.exact_max = true;
  o.bmax = 0;
  if (bmax > 0 && static_cast<double>(bmax) >= o.max_d_floor * (1 - 0x1p-20)) {
    const __m512 bv = _mm512_set1_ps(bmax);
    for (std::size_t j = 0; j < n; j += 16)
      for (unsigned hit = _mm512_cmp_ps_mask(_mm512_load_ps(w.df + j), bv, _CMP_EQ_OQ); hit; hit &= hit - 1) {
        const std::size_t k = j + static_cast<std::size_t>(std::countr_zero(hit));
        if (k >= n) break;
        const double d64 = std::abs(la.at(k) - lg.at(k));
        if (d64 > o.bmax) o.bmax = d64, o.arg = k;
      }
  }
  return true;
}

template <typename Load>
bool fused_mixed32(const Load& la, const Load& lg, std::size_t n, const FloatParams& p, Scratch& w,
                   FusedOut& o) {
  if (o.q_from <= 1) return fused_mixed32<true>(la, lg, n, p, w, o);
  return fused_mixed32<false>(la, lg, n, p, w, o);
}

#if defined(__AVX512VBMI2__)
#define KC_SPARSE16 1
// --- sparse 16-bit blocks (bfloat16, float16 pairs) ------------------------------------------------------
// Two bitwise-equal finite codes have |a−g| = 0: the element passes, lands in decade bucket 0 and quantile
// bin 0, never enters the worst list nor the maximum, and adds +0 to every sum. Low-precision outputs often
// repeat the golden exactly (a bf16 step is 2^-8 relative), so such a block is screened 32 codes per
// compare and only its differing elements are compressed (w.ca, w.cg, block indices w.cidx, in index
// order) and run through the fused pass. Every figure stays bitwise the dense pass's: counts add the equal
// elements, the worst list and the maximum map indices back (order kept, so ties resolve the same), and
// stat_rel_err's sum adds each rel to the lane (index mod 8) the dense pass adds it to, in the same order.
constexpr std::size_t kDense = ~std::size_t{0};

// The number of differing elements, compressed into w; kDense when a golden code is NaN/inf (equal
// non-finite pairs are counted by the general path) or more than half the elements differ (then the dense
// pass is cheaper). n ≤ kBlock.
std::size_t compress16(const std::uint8_t* pa, const std::uint8_t* pg, std::size_t n, std::uint16_t inf_bits,
                       Scratch& w) {
  const __m512i abs_mask = _mm512_set1_epi16(0x7FFF);
  __m512i gmax = _mm512_setzero_si512();
  std::size_t m = 0;
  auto mask = [n](std::size_t i) { return n - i >= 32 ? ~__mmask32{0} : (__mmask32{1} << (n - i)) - 1; };
  for (std::size_t i = 0; i < n; i += 32) {
    prefetch_at(pa + 2 * i), prefetch_at(pg + 2 * i);
    const __mmask32 v = mask(i);
    const __m512i a = _mm512_maskz_loadu_epi16(v, pa + 2 * i), g = _mm512_maskz_loadu_epi16(v, pg + 2 * i);
    m += static_cast<std::size_t>(std::popcount(_mm512_cmpneq_epi16_mask(a, g)));
    gmax = _mm512_max_epu16(gmax, _mm512_and_si512(g, abs_mask));
  }
  if (_mm512_cmpge_epu16_mask(gmax, _mm512_set1_epi16(static_cast<short>(inf_bits))) || 2 * m > n)
    return kDense;
  m = 0;
  const __m512i iota = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                                        14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (std::size_t i = 0; i < n; i += 32) {  // the block is in L1 now
    const __mmask32 v = mask(i);
    const __m512i a = _mm512_maskz_loadu_epi16(v, pa + 2 * i), g = _mm512_maskz_loadu_epi16(v, pg + 2 * i);
    const __mmask32 ne = _mm512_cmpneq_epi16_mask(a, g);
    const __m512i idx = _mm512_add_epi16(iota, _mm512_set1_epi16(static_cast<short>(i)));
    _mm512_storeu_si512(w.ca + m, _mm512_maskz_compress_epi16(ne, a));
    _mm512_storeu_si512(w.cg + m, _mm512_maskz_compress_epi16(ne, g));
    _mm512_storeu_si512(w.cidx + m, _mm512_maskz_compress_epi16(ne, idx));
    m += static_cast<std::size_t>(std::popcount(ne));
  }
  _mm512_storeu_si512(w.ca + m, _mm512_setzero_si512());  // zero padding: exact elements
  _mm512_storeu_si512(w.cg + m, _mm512_setzero_si512());
  return m;
}

// stat_rel_err on the m compressed elements (Load: Load512Bf16 / Load512F16 over w.ca, w.cg): the dense
// pass's arithmetic (fused_block512) on each element; false, having accumulated nothing, on a NaN/inf.
template <typename Load>
bool sparse_stat(const Load la, const Load lg, std::size_t m, Scratch& w, FusedOut& o) {
  const std::size_t mp = (m + kLanes - 1) / kLanes * kLanes;
  __m512d probe = _mm512_setzero_pd(), max_d = _mm512_setzero_pd(), max_s = _mm512_setzero_pd();
  const __m512d eps = _mm512_set1_pd(1e-7), sign = _mm512_set1_pd(-0.0);
  for (std::size_t j = 0; j < mp; j += kLanes) {
    const __m512d a = la(j), g = lg(j);
    const __m512d d = _mm512_andnot_pd(sign, _mm512_sub_pd(a, g)), ga = _mm512_andnot_pd(sign, g);
    probe = _mm512_add_pd(probe, d);
    const __m512d s = _mm512_div_pd(d, _mm512_add_pd(ga, eps));
    max_s = _mm512_max_pd(max_s, s);
    max_d = _mm512_max_pd(max_d, d);
    _mm512_store_pd(w.s + j, s);
    _mm512_store_pd(w.d + j, d);
    const __mmask8 pos = _mm512_cmp_pd_mask(d, _mm512_setzero_pd(), _CMP_GT_OQ);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(w.bucket + j), _mm512_cvtepi64_epi8(decade8_512(d, pos)));
  }
  if (!std::isfinite(_mm512_reduce_add_pd(probe))) return false;
  double lane[kLanes] = {};  // the dense pass's 8 accumulators: element i goes to lane i mod 8
  for (std::size_t j = 0; j < m; ++j) lane[w.cidx[j] % kLanes] += w.s[j];
  for (int k = 0; k < kLanes; ++k) o.sum += lane[k];
  o.max_s = v8d{} + _mm512_reduce_max_pd(max_s);
  o.max_d = v8d{};
  o.exact_max = true;
  o.bmax = 0;
  const double bmax = _mm512_reduce_max_pd(max_d);
  if (bmax > o.max_d_floor) {
    std::size_t j = 0;
    while (w.d[j] != bmax) ++j;
    o.bmax = bmax, o.arg = w.cidx[j];
  }
  o.nb = mp;
  return true;
}

// mixed / stat_rel_err on a 16-bit block through compress16. Returns 0 when the block is not sparse (the
// dense passes take it), 1 when done, 2 on a NaN/inf or float overflow (the general path takes it).
template <Method M, typename Load16, typename Load8>
int sparse16(const std::uint8_t* pa, const std::uint8_t* pg, std::size_t n, std::uint16_t inf_bits,
             const FloatParams& p, Scratch& w, FusedOut& o) {
  const std::size_t m = compress16(pa, pg, n, inf_bits, w);
  if (m == kDense) return 0;
  const auto* ca = reinterpret_cast<const std::uint8_t*>(w.ca);
  const auto* cg = reinterpret_cast<const std::uint8_t*>(w.cg);
  if constexpr (M == Method::mixed) {
    const std::size_t mp = (m + 15) / 16 * 16;
    if (!fused_mixed32(Load16{ca}, Load16{cg}, mp, p, w, o)) return 2;
    o.pass += static_cast<std::int64_t>(n - mp);  // the equal elements pass; the padding was counted
    if (o.bmax > 0) o.arg = w.cidx[o.arg];
    o.nb = mp;
  } else {
    if (!sparse_stat(Load8{ca}, Load8{cg}, m, w, o)) return 2;
  }
  o.map = w.cidx;
  return 1;
}
#endif
#endif

template <Method M>
bool fused_dispatch(const Tensor& ta, const Tensor& tg, std::size_t blk, std::size_t n, const FloatParams& p,
                    Scratch& w, FusedOut& o) {
  const std::uint8_t* pa = ta.bytes.data();
  const std::uint8_t* pg = tg.bytes.data();
#if defined(KC_FUSED_AVX512)
  if (p.path != FloatPath::generic_fused) {
#if defined(KC_SPARSE16)
    if (o.try_sparse && (M == Method::stat_rel_err || p.score32) && ta.dtype == tg.dtype &&
        (tg.dtype == DType::bfloat16 || tg.dtype == DType::float16)) {
      const int r = tg.dtype == DType::bfloat16
                        ? sparse16<M, Load16Bf16, Load512Bf16>(pa + 2 * blk, pg + 2 * blk, n, 0x7F80, p, w, o)
                        : sparse16<M, Load16F16, Load512F16>(pa + 2 * blk, pg + 2 * blk, n, 0x7C00, p, w, o);
      if (r) return r == 1;
      o.dense = true;
    }
#endif
    if (M == Method::mixed && p.score32) switch (tg.dtype) {
        case DType::float32:
          return fused_mixed32(Load16F32{pa + 4 * blk}, Load16F32{pg + 4 * blk}, n, p, w, o);
        case DType::bfloat16:
          return fused_mixed32(Load16Bf16{pa + 2 * blk}, Load16Bf16{pg + 2 * blk}, n, p, w, o);
        case DType::float16:
          return fused_mixed32(Load16F16{pa + 2 * blk}, Load16F16{pg + 2 * blk}, n, p, w, o);
        default:
          break;
      }
    switch (ta.dtype == tg.dtype ? tg.dtype : DType::complex128 /* mixed dtypes: decode both */) {
      case DType::float32:
        return fused_block512<M>(Load512F32{pa + 4 * blk}, Load512F32{pg + 4 * blk}, n, p, w, o);
      case DType::bfloat16:
        return fused_block512<M>(Load512Bf16{pa + 2 * blk}, Load512Bf16{pg + 2 * blk}, n, p, w, o);
      case DType::float16:
        return fused_block512<M>(Load512F16{pa + 2 * blk}, Load512F16{pg + 2 * blk}, n, p, w, o);
      case DType::float64:
        return fused_block512<M>(Load512F64{pa + 8 * blk}, Load512F64{pg + 8 * blk}, n, p, w, o);
      default:
        decode_block(ta.dtype, ta.bytes, blk, n, w.a);
        decode_block(tg.dtype, tg.bytes, blk, n, w.g);
        return fused_block512<M>(Load512Decoded{w.a}, Load512Decoded{w.g}, n, p, w, o);
    }
  }
#endif
  switch (ta.dtype == tg.dtype ? tg.dtype : DType::complex128 /* mixed dtypes: decode both */) {
    case DType::float32:
      return fused_block<M>(LoadF32{pa + 4 * blk}, LoadF32{pg + 4 * blk}, n, p, w, o);
    case DType::bfloat16:
      return fused_block<M>(LoadBf16{pa + 2 * blk}, LoadBf16{pg + 2 * blk}, n, p, w, o);
#if defined(__F16C__)
    case DType::float16:
      return fused_block<M>(LoadF16{pa + 2 * blk}, LoadF16{pg + 2 * blk}, n, p, w, o);
#endif
    case DType::float64:
      return fused_block<M>(LoadF64{pa + 8 * blk}, LoadF64{pg + 8 * blk}, n, p, w, o);
    default:
      decode_block(ta.dtype, ta.bytes, blk, n, w.a);
      decode_block(tg.dtype, tg.bytes, blk, n, w.g);
      return fused_block<M>(LoadDecoded{w.a}, LoadDecoded{w.g}, n, p, w, o);
  }
}

void run_chunk(FloatAcc& acc, const Tensor& ta, const Tensor& tg, const FloatParams& p, std::size_t begin,
               std::size_t end, PassShared* shared_q) {
  Scratch w;  // ~64 KiB on the stack
  v64u8 byte_cnt[kHistBins] = {};
  int blocks_since_flush = 0;
  // Chunk-local quantile counters (≤ kChunk per bin fits 32 bits), two interleaved copies.
  alignas(64) std::uint32_t qh2[2 * kQBins];
  if (p.want_quantiles) std::memset(qh2, 0, sizeof qh2);
  // Lazy quantiles: min_passing needs the bin of one high quantile (mixed: 99 %), so after the chunk's first
  // block only bins at or above that block's 90 % quantile are counted one by one (most elements are below
  // it and only counted). The chunk's histogram is then exact from that bin (q_floor) up, everything below
  // it is in bin 0; compare_float redoes the pass without this when the answer lies below the floor.
  int q_from = 1;
  // Sparse 16-bit screening (fused_dispatch): after a block that was not sparse, the next blocks skip the
  // screen (it costs ~0.15 ns per element on dense data): 15, then 31, then 63 while the data stays dense.
  // Any choice gives the same figures.
  int sparse_wait = 0, sparse_backoff = 8;
  const double rtol = p.rtol, atol = p.atol;
  const bool fusable = !p.complex && (p.method == Method::mixed || p.method == Method::stat_rel_err) &&
                       p.path != FloatPath::general;
  for (std::size_t blk = begin; blk < end; blk += kBlock) {
    const std::size_t n = std::min(kBlock, end - blk);
    const std::size_t np = (n + kLanes - 1) / kLanes * kLanes;  // padded with zeros (exact elements)
    const std::size_t comps = p.complex ? 2 : 1;
    std::size_t mism = 0;
    v8d max_d = {}, max_s = {};
    FusedOut fo;
    fo.q_from = q_from;
    fo.max_d_floor = acc.max_d;
    fo.try_sparse = sparse_wait == 0;
    std::size_t nq = n;  // entries of w.qbin to count; the other n − nq elements are in bin 0
    const bool fused =
        fusable && np == n &&
        (p.method == Method::mixed ? fused_dispatch<Method::mixed>(ta, tg, blk, n, p, w, fo)
                                   : fused_dispatch<Method::stat_rel_err>(ta, tg, blk, n, p, w, fo));
    if (fo.dense)
      sparse_backoff = std::min(2 * sparse_backoff, 64), sparse_wait = sparse_backoff - 1;
    else if (sparse_wait > 0)
      --sparse_wait;
    else
      sparse_backoff = 8;  // screened and sparse (or not a 16-bit pair)
    if (fused) {
      max_d = fo.max_d, max_s = fo.max_s;
      if (p.method == Method::mixed) {
        nq = fo.nq;
        acc.pass += static_cast<std::uint64_t>(fo.pass);
      } else {
        acc.sum_rel += fo.sum;
        acc.max_rel = std::max(acc.max_rel, hmax(max_s));
      }
    } else {
      // General path: decode into the scratch, neutralise non-finite pairs, then one loop per quantity.
      if (p.complex) {
        decode_complex_block(ta.dtype, ta.bytes, blk, n, w.a);
        decode_complex_block(tg.dtype, tg.bytes, blk, n, w.g);
      } else {
        decode_block(ta.dtype, ta.bytes, blk, n, w.a);
        decode_block(tg.dtype, tg.bytes, blk, n, w.g);
      }
      for (std::size_t i = n * comps; i < np * comps; ++i) w.a[i] = w.g[i] = 0;
      if (any_nonfinite(w.a, w.g, n * comps)) mism = neutralise_nonfinite(w, n, p.complex, blk, acc.nf);

      if (p.method == Method::cosine) {  // sums over the real components (complex: Re(a·conj g))
        v8d dot = {}, na = {}, ng = {};
        for (std::size_t i = 0; i < np * comps; i += kLanes) {
          const v8d a = load8(w.a + i), g = load8(w.g + i);
          dot += a * g, na += a * a, ng += g * g;
        }
        for (int j = 0; j < kLanes; ++j) acc.dot += dot[j], acc.norm_a += na[j], acc.norm_g += ng[j];
      }
      if (p.complex) {
        for (std::size_t i = 0; i < np; ++i) {
          w.d[i] = std::hypot(w.a[2 * i] - w.g[2 * i], w.a[2 * i + 1] - w.g[2 * i + 1]);
          w.ga[i] = std::hypot(w.g[2 * i], w.g[2 * i + 1]);
        }
      } else {
        for (std::size_t i = 0; i < np; i += kLanes) {
          const v8d a = load8(w.a + i), g = load8(w.g + i);
          store8(w.d + i, vabs(a - g));
          store8(w.ga + i, vabs(g));
        }
      }

      switch (p.method) {
        case Method::mixed:
        case Method::close: {
          v8l cnt = {};
          const v8d vr = rtol - v8d{}, va = atol - v8d{};
          const v8f vr32 = p.rtol32 - v8f{}, va32 = p.atol32 - v8f{};
          for (std::size_t i = 0; i < np; i += kLanes) {
            const v8d d = load8(w.d + i), ga = load8(w.ga + i);
            const v8d tol = va + vr * ga;
            cnt -= (d <= tol);  // a true lane compares as -1
            // score: how many times the tolerance the error is (inf when the tolerance is 0). Only ranks
            // the worst elements and feeds min_passing's histogram, so float precision (and its cheaper
            // division) is enough; the verdict above uses the exact double comparison.
            const v8f sf = p.score32 ? score32(load8(w.a + i), load8(w.g + i), vr32, va32)
                                     : __builtin_convertvector(d, v8f) / __builtin_convertvector(tol, v8f);
            const v8d s = d > 0 ? __builtin_convertvector(sf, v8d) : v8d{};
            store8(w.s + i, s);
            max_d = vmax(max_d, d);
            max_s = vmax(max_s, s);
          }
          std::int64_t c = 0;
          for (int j = 0; j < kLanes; ++j) c += cnt[j];
          acc.pass += static_cast<std::uint64_t>(c) - (np - n) - mism;
          if (p.method == Method::close) {
            // rtol that this element needs with atol fixed: (d − atol)/|g|
            const v8d inf = kInf - v8d{};
            for (std::size_t i = 0; i < np; i += kLanes) {
              const v8d d = load8(w.d + i), ga = load8(w.ga + i);
              const v8d need = ga > 0 ? (d - va) / ga : inf;
              store8(w.q + i, d <= va ? v8d{} : need);
            }
          }
          break;
        }
        case Method::stat_rel_err: {
          v8d sum = {};
          const v8d eps = 1e-7 - v8d{};
          for (std::size_t i = 0; i < np; i += kLanes) {
            const v8d d = load8(w.d + i);
            const v8d rel = d / (load8(w.ga + i) + eps);
            store8(w.s + i, rel);
            sum += rel;
            max_d = vmax(max_d, d);
            max_s = vmax(max_s, rel);
          }
          double ss = 0;
          for (int j = 0; j < kLanes; ++j) ss += sum[j];
          acc.sum_rel += ss;
          acc.max_rel = std::max(acc.max_rel, hmax(max_s));
          break;
        }
        case Method::cosine: {
          for (std::size_t i = 0; i < np; i += kLanes) {
            const v8d d = load8(w.d + i);
            store8(w.s + i, d);
            max_d = vmax(max_d, d);
          }
          max_s = max_d;
          break;
        }
        default:
          KC_ASSERT(false, "not a float method: {}", method_name(p.method));
      }
      decade_buckets(w.d, np, w.bucket);
      if (p.want_quantiles) {
        const double* q = p.method == Method::close ? w.q : w.s;
        for (std::size_t j = 0; j < np; j += kLanes) {
          const v8u16 b16 = qbin8(load8(q + j));
          std::memcpy(w.qbin + j, &b16, sizeof b16);
        }
      }
    }

    // Sparse 16-bit blocks: scores, |a−g| and buckets for nb compressed elements (fo.map: their indices).
    const std::uint16_t* map = fused ? fo.map : nullptr;
    const std::size_t ns = map ? fo.nb : n, nps = map ? fo.nb : np;
    // Largest |a−g| and its first index (mixed's limit is checked at that element's golden).
    const double bmax = hmax(max_d);
    if (fused && fo.exact_max) {
      if (fo.bmax > acc.max_d) acc.max_d = fo.bmax, acc.arg_max = blk + fo.arg;
    } else if (bmax > acc.max_d) {
      std::size_t i = 0;
#if defined(KC_FUSED_AVX512)
      for (;; i += kLanes)  // np is a multiple of kLanes and bmax is in w.d[0, np)
        if (const unsigned eq = _mm512_cmpeq_pd_mask(_mm512_load_pd(w.d + i), _mm512_set1_pd(bmax))) {
          i += static_cast<std::size_t>(std::countr_zero(eq));
          break;
        }
#else
      while (w.d[i] != bmax) ++i;
#endif
      acc.max_d = bmax, acc.arg_max = blk + i;
    }
    // Worst elements: only scan a block whose best score can enter the list.
    // The scan tests 8 scores per step against a threshold held in a register.
    // Scores equal to the shared floor can still win a tie on the index: only those below it are skipped.
    const double floor = std::nextafter(shared_q->worst.load(std::memory_order_relaxed), 0.0);
    if (hmax(max_s) > std::max(acc.top.threshold(), floor)) {
      if (fused && fo.float_scores)
        offer_worst(acc.top, w.sf, ns, nps, blk, map, floor);
      else
        offer_worst(acc.top, w.s, ns, nps, blk, map, floor);
    }

    // |a−g| decade histogram: bucket indices as bytes (vectorised), then counted per bucket with byte
    // compares (64 elements per operation) into counters that are flushed every kFlush blocks.
    for (std::size_t i = ns; i < nps; ++i) w.bucket[i] = 0xFF;                    // padding: no bucket
    for (std::size_t i = nps; i < (nps + 63) / 64 * 64; ++i) w.bucket[i] = 0xFF;  // kBlock: a multiple of 64
    count_buckets(w.bucket, (nps + 63) / 64 * 64, byte_cnt);
    acc.hist[0] += n;  // buckets 1…16 are counted; bucket 0 (exact) is what is left of the n elements
    if (++blocks_since_flush == kFlush) flush_bytes(byte_cnt, acc.hist), blocks_since_flush = 0;
    if (p.want_quantiles) {
      std::uint32_t* q0 = qh2;
      if (fused && fo.wide_keys)
        count_bins(q0, w.qkey, nq);
      else
        count_bins(q0, w.qbin, nq);
      q0[0] += static_cast<std::uint32_t>(n - nq);
      // Non-finite mismatches were zeroed: they belong to the "never passes" bin.
      q0[0] -= static_cast<std::uint32_t>(mism);
      q0[kQBins - 1] += static_cast<std::uint32_t>(mism);
    }
    // Mismatched non-finite pairs sit in the "exact" bucket after zeroing; they are unbounded errors.
    acc.hist[0] -= mism;
    acc.hist[kHistBins - 1] += mism;
    if (p.lazy_quantiles && blk == begin) {
      const std::uint64_t want = (9 * n + 9) / 10;  // ⌈0.9·n⌉ elements at or below the bin
      std::uint64_t cum = 0;
      int b = 0;
      while (b < kQBins - 1 && (cum += qh2[b] + qh2[kQBins + b]) < want) ++b;
      q_from = std::max(b, 1);
    }
  }
  flush_bytes(byte_cnt, acc.hist);
  if (acc.top.count == kWorst) {
    const double tenth = acc.top.items[kWorst - 1].score;
    double cur = shared_q->worst.load(std::memory_order_relaxed);
    while (tenth > cur && !shared_q->worst.compare_exchange_weak(cur, tenth, std::memory_order_relaxed)) {
    }
  }
  if (p.want_quantiles) {
    // uint32 sums wrap back to the true counts (< 2^32); bins [1, q_from) are folded into bin 0
    std::uint32_t q[kQBins];
    for (int b = 0; b < kQBins; ++b) q[b] = qh2[b] + qh2[kQBins + b];
    for (int b = 1; b < q_from; ++b) q[0] += q[b], q[b] = 0;
    acc.q_floor = q_from;
    const std::lock_guard<std::mutex> lock(shared_q->mu);
    for (int b = 0; b < kQBins; ++b) shared_q->q[b] += q[b];
  }
}

}  // namespace

FloatAcc float_pass(const Tensor& ta, const Tensor& tg, Method m, const Tolerance& tol, FloatPath path,
                    bool lazy_quantiles) {
  const std::size_t n = tg.numel();
  const DType dt = ta.dtype;  // the output dtype: tolerances and ULPs are its (the golden may be wider)
  FloatParams p{m, dt, is_complex(dt), 0, 0, false, path, lazy_quantiles};
  p.rtol = tol.rtol.value_or(0);
  p.atol = tol.atol.value_or(0);
  p.want_quantiles = m == Method::mixed || m == Method::close;
  if (m == Method::mixed || m == Method::close) {
    if (!(p.rtol >= 0) || !(p.atol >= 0))
      fail("{}: rtol, atol: expected values ≥ 0, got rtol={}, atol={}", method_name(m), p.rtol, p.atol);
  }
  // score32 (see FloatParams): float-exact values; rtol and atol such that the float tolerance is within
  // 2^-22 (relative) + 2^-149 of the double one (fused_mixed32's margins rely on it).
  const bool float_exact =
      ta.dtype == tg.dtype && (dt == DType::float32 || dt == DType::bfloat16 || dt == DType::float16);
  p.score32 = m == Method::mixed && float_exact && (p.rtol == 0 || p.rtol >= 0x1p-126) && p.rtol <= 1 &&
              p.atol <= 0x1p100;
  p.rtol32 = static_cast<float>(p.rtol), p.atol32 = static_cast<float>(p.atol);

  KC_ASSERT(floor_log10_ok(), "floor_log10_pow2 is wrong");
#if defined(KC_FUSED_AVX512)
  static const bool f32_ok = check_floor_log10_pow2_f32();
  KC_ASSERT(f32_ok, "floor_log10_pow2 (float exponents) is wrong");
#endif
  // The fused path reads the bytes directly (decode_block checks its spans itself).
  KC_ASSERT(ta.bytes.size() >= storage_bytes(ta.dtype, n) && tg.bytes.size() >= storage_bytes(tg.dtype, n) &&
                is_complex(ta.dtype) == is_complex(tg.dtype),
            "compare_float: tensors shorter than their {} elements or complex against real", n);
  PassShared shared_q;
  FloatAcc acc = parallel_reduce<FloatAcc>(n, kChunk, [&](FloatAcc& part, std::size_t b, std::size_t e) {
    run_chunk(part, ta, tg, p, b, e, &shared_q);
  });
  if (p.want_quantiles) {
    acc.qhist = std::move(shared_q.q);
    acc.fold_below_floor();  // below the highest chunk floor only the sum is exact
  }
  return acc;
}

FloatPassStats float_pass_stats(const Tensor& a, const Tensor& g, Method m, const Tolerance& tol,
                                FloatPath path, bool lazy_quantiles) {
  const FloatAcc acc = float_pass(a, g, m, tol, path, lazy_quantiles);
  FloatPassStats st;
  st.pass = acc.pass, st.sum_rel = acc.sum_rel, st.max_rel = acc.max_rel;
  st.dot = acc.dot, st.norm_a = acc.norm_a, st.norm_g = acc.norm_g;
  st.max_d = acc.max_d, st.arg_max = acc.arg_max;
  st.worst.assign(acc.top.items.begin(), acc.top.items.begin() + acc.top.count);
  st.hist.assign(acc.hist.begin(), acc.hist.end());
  st.qhist = acc.qhist;
  st.q_floor = acc.q_floor;
  st.nonfinite.assign(acc.nf.count.begin(), acc.nf.count.end());
  st.nonfinite.push_back(acc.nf.matched);
  return st;
}

std::string pass_stats_difference(const FloatPassStats& x, const FloatPassStats& ref) {
  const auto b = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  if (x.pass != ref.pass) return fmt::format("pass {} vs {}", x.pass, ref.pass);
  const std::tuple<const char*, double, double> reals[] = {
      {"sum_rel", x.sum_rel, ref.sum_rel}, {"max_rel", x.max_rel, ref.max_rel}, {"dot", x.dot, ref.dot},
      {"norm_a", x.norm_a, ref.norm_a},    {"norm_g", x.norm_g, ref.norm_g},    {"max_d", x.max_d, ref.max_d}};
  for (const auto& [name, v, r] : reals)
    if (b(v) != b(r)) return fmt::format("{} {} vs {}", name, v, r);
  if (x.arg_max != ref.arg_max) return fmt::format("arg_max {} vs {}", x.arg_max, ref.arg_max);
  if (x.worst.size() != ref.worst.size())
    return fmt::format("worst list of {} vs {}", x.worst.size(), ref.worst.size());
  for (std::size_t i = 0; i < x.worst.size(); ++i)
    if (b(x.worst[i].score) != b(ref.worst[i].score) || x.worst[i].index != ref.worst[i].index)
      return fmt::format("worst[{}] ({}, {}) vs ({}, {})", i, x.worst[i].index, x.worst[i].score,
                         ref.worst[i].index, ref.worst[i].score);
  if (x.hist != ref.hist) return "decade histogram";
  if (x.nonfinite != ref.nonfinite) return "NaN/Inf classes";
  if (x.qhist.empty() != ref.qhist.empty()) return "quantile histogram present on one side only";
  if (ref.qhist.empty()) return {};
  if (ref.q_floor != 1) return fmt::format("reference quantile histogram is lazy (floor {})", ref.q_floor);
  std::vector<std::uint64_t> folded = ref.qhist;  // what a lazy histogram keeps of the full one
  for (int i = 1; i < x.q_floor && i < static_cast<int>(folded.size()); ++i)
    folded[0] += folded[i], folded[i] = 0;
  if (x.qhist != folded) return fmt::format("quantile histogram (floor {})", x.q_floor);
  return {};
}

CompareResult float_result_begin(const FloatAcc& acc) {
  CompareResult r;
  acc.nf.to_result(r);
  std::copy(acc.hist.begin(), acc.hist.end(), std::back_inserter(r.log10_err_hist));
  return r;
}

std::string nonfinite_reason(std::uint64_t mismatches) {
  return fmt::format("{} NaN/Inf mismatches (unbounded error)", mismatches);
}

void float_result_end(CompareResult& r, const FloatAcc& acc, const Tensor& a, const Tensor& g) {
  if (is_complex(a.dtype)) r.notes.push_back("complex: |a−g| and |g| are complex moduli; worst lists moduli");
  fill_worst(r, acc.top, a, g);
}

}  // namespace kc::cmp
