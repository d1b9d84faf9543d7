// The packed GEMM's path for CPUs without AVX-512 (compiled here with -mno-avx512f, see tests/CMakeLists.txt)
// against its scalar twin: the same fma chains, so bitwise equal, for 1–3 threads, with and without bias,
// on sizes around the 32-column panel and the 2-row block.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "ops/packed_gemm.h"

#if defined(__AVX512F__)
#error "this test must be compiled without AVX-512 (it checks the generic path)"
#endif

namespace kc::engine {
namespace {

TEST(PackedGemmGeneric, BitwiseEqualToScalarTwin) {
  std::mt19937 g(7);
  std::normal_distribution<float> d;
  for (int threads : {1, 2, 3}) {
    set_thread_count(threads);
    for (std::size_t m : {1, 2, 3, 7, 33})
      for (std::size_t n : {1, 31, 32, 33, 100})
        for (std::size_t k : {1, 5, 64, 577})
          for (bool use_bias : {false, true}) {
            std::vector<float> x(m * k), w(n * k), b(n), y(m * n, -1.0f), twin(m * n, -2.0f);
            for (auto* v : {&x, &w, &b})
              for (auto& e : *v) e = d(g);
            const PackedMatrix pw(w.data(), n, k);
            packed_gemm(x.data(), m, pw, y.data(), use_bias ? b.data() : nullptr);
            packed_gemm_scalar(x.data(), m, pw, twin.data(), use_bias ? b.data() : nullptr);
            ASSERT_EQ(std::memcmp(y.data(), twin.data(), y.size() * sizeof(float)), 0)
                << "m " << m << " n " << n << " k " << k << " bias " << use_bias << " threads " << threads;
          }
  }
  set_thread_count(0);
}

// The lab's other schedules (order=SEED, bug:gemm_acc=N): the generic loop and the scalar twin run the same
// blocks in the same order, so the bits agree here too (and with the AVX-512 tiles: engine_order_test.cpp).
TEST(PackedGemmGeneric, SchedulesBitwiseEqualToScalarTwin) {
  std::mt19937 g(9);
  std::normal_distribution<float> d;
  for (GemmSchedule s : {GemmSchedule{1, 0}, GemmSchedule{7, 0}, GemmSchedule{0, 32}, GemmSchedule{3, 48}})
    for (std::size_t m : {1, 3, 20})
      for (std::size_t k : {64, 577}) {
        const std::size_t n = 45;
        std::vector<float> x(m * k), w(n * k), b(n), y(m * n, -1.0f), twin(m * n, -2.0f);
        for (auto* v : {&x, &w, &b})
          for (auto& e : *v) e = d(g);
        const PackedMatrix pw(w.data(), n, k);
        packed_gemm(x.data(), m, pw, y.data(), b.data(), s);
        packed_gemm_scalar(x.data(), m, pw, twin.data(), b.data(), s);
        ASSERT_EQ(std::memcmp(y.data(), twin.data(), y.size() * sizeof(float)), 0)
            << "order " << s.order << " bf16_every " << s.bf16_every << " m " << m << " k " << k;
      }
}

// bf16 panels (every weight a bf16 value): the generic loop widens them exactly, so the bits are the twin's.
TEST(PackedGemmGeneric, Bf16PanelsBitwiseEqualToScalarTwin) {
  std::mt19937 g(13);
  std::normal_distribution<float> d;
  for (std::size_t m : {1, 3, 20})
    for (std::size_t n : {31, 45})
      for (std::size_t k : {64, 577}) {
        std::vector<float> x(m * k), w(n * k), b(n), y(m * n, -1.0f), twin(m * n, -2.0f);
        for (auto* v : {&x, &w, &b})
          for (auto& e : *v) e = d(g);
        for (auto& e : w) {  // truncate to bf16 values
          std::uint32_t u;
          std::memcpy(&u, &e, 4);
          u &= 0xFFFF0000u;
          std::memcpy(&e, &u, 4);
        }
        const PackedMatrix pw(w.data(), n, k);
        ASSERT_TRUE(pw.bf16());
        packed_gemm(x.data(), m, pw, y.data(), b.data(), GemmSchedule{3, 0});
        packed_gemm_scalar(x.data(), m, pw, twin.data(), b.data(), GemmSchedule{3, 0});
        ASSERT_EQ(std::memcmp(y.data(), twin.data(), y.size() * sizeof(float)), 0)
            << "m " << m << " n " << n << " k " << k;
      }
}

}  // namespace
}  // namespace kc::engine
