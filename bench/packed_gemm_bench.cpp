// kc_packed_gemm_bench: the engine's prefill GEMMs on SmolLM2's shapes (one 512-token chunk), in one run:
//   blas1   one single-threaded cblas_sgemm of the whole shape (the tile calls' ceiling), and of 2048³
//   tiled   engine::gemm_nt (fixed tiles, each a single-threaded cblas_sgemm) on kc::thread_count() threads
//   packed  engine::packed_gemm (weights packed once, own AVX-512 kernel) on kc::thread_count() threads
// Prints one line per shape with GFLOP/s (best of REPS) and packed / tiled.
//   [KC_BENCH_CPU=1] kc_packed_gemm_bench [REPS]
#include <cblas.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "ops/engine_ops.h"
#include "ops/packed_gemm.h"

namespace {
using clock_type = std::chrono::steady_clock;
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
bool g_cpu = false;  // KC_BENCH_CPU=1: process CPU seconds instead of wall (robust to other load at 1 thread)
template <typename Fn>
double best_of(int reps, Fn&& fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t = clock_type::now();
    const double c = cpu_now();
    fn();
    best =
        std::min(best, g_cpu ? cpu_now() - c : std::chrono::duration<double>(clock_type::now() - t).count());
  }
  return best;
}
std::vector<float> rnd(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  g_cpu = std::getenv("KC_BENCH_CPU") != nullptr;
  kc::engine::init_blas();
  struct Shape {
    const char* name;
    std::size_t m, n, k;
  };
  const Shape shapes[] = {{"q/o 512x576x576", 512, 576, 576},
                          {"k/v 512x192x576", 512, 192, 576},
                          {"gate/up 512x1536x576", 512, 1536, 576},
                          {"down 512x576x1536", 512, 576, 1536},
                          {"lm_head 512x49152x576", 512, 49152, 576}};
  std::printf("threads %d, %s time\n", kc::thread_count(), g_cpu ? "process CPU" : "wall");
  double tot_tiled = 0, tot_packed = 0;
  for (const auto& s : shapes) {
    const auto x = rnd(s.m * s.k, 1), w = rnd(s.n * s.k, 2);
    std::vector<float> y(s.m * s.n);
    const kc::engine::PackedMatrix pw(w.data(), s.n, s.k);
    const double fl = 2.0 * s.m * s.n * s.k * 1e-9;
    const int r = s.n > 10000 ? std::max(1, reps / 2) : reps * 4;
    const double t1 = best_of(
        r, [&] { kc::engine::sgemm_nt_serial(x.data(), s.k, w.data(), s.k, y.data(), s.n, s.m, s.n, s.k); });
    const double tt = best_of(r, [&] { kc::engine::gemm_nt(x.data(), s.m, s.k, w.data(), s.n, y.data()); });
    const double tp = best_of(r, [&] { kc::engine::packed_gemm(x.data(), s.m, pw, y.data()); });
    std::printf("%-24s blas1 %6.1f  tiled %6.1f  packed %6.1f GFLOP/s  packed/tiled %.2f\n", s.name, fl / t1,
                fl / tt, fl / tp, tt / tp);
    // SmolLM2 per layer: q,o, 2× k/v, 2× gate/up, down; lm_head once; weights for 30 layers.
    const double mult = s.n == 49152                                                ? 1
                        : (s.n == 192 || s.n == 1536 || (s.n == 576 && s.k == 576)) ? 60
                                                                                    : 30;
    tot_tiled += mult * tt, tot_packed += mult * tp;
  }
  {
    const std::size_t n = 2048;
    const auto a = rnd(n * n, 3), b = rnd(n * n, 4);
    std::vector<float> c(n * n);
    const double t1 =
        best_of(3, [&] { kc::engine::sgemm_nt_serial(a.data(), n, b.data(), n, c.data(), n, n, n, n); });
    std::printf("sgemm 2048^3 blas1 %6.1f GFLOP/s\n", 2.0 * n * n * n * 1e-9 / t1);
  }
  std::printf("SmolLM2 512-token chunk GEMMs: tiled %.1f ms  packed %.1f ms  ratio %.2f\n", tot_tiled * 1e3,
              tot_packed * 1e3, tot_tiled / tot_packed);
}
