// The engine seam (src/model/backend.h): the registry, and the host's GEMM dispatch — packed weights give
// packed_gemm's bits, row-major weights gemm_rows's, one decode row with ggml blocks quant_gemv's — so that a
// model calling EngineBackend::linear computes what it computed calling the kernels directly.
#include "model/backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"

namespace kc {
namespace {

std::vector<float> randv(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EngineBackend, RegistryKnowsTheHostAndNamesItInTheError) {
  EXPECT_EQ(&engine_backend("host"), &host_backend());
  EXPECT_EQ(engine_backend_names(), "host");
  try {
    engine_backend("cuda");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected one of host, got 'cuda'"), std::string::npos) << e.what();
  }
}

TEST(EngineBackend, HostLinearIsTheKernelsBits) {
  const EngineBackend& b = host_backend();
  const std::size_t k = 64, n = 100;
  const auto w = randv(n * k, 1), bias = randv(n, 2);
  const engine::PackedMatrix pw(w.data(), n, k);
  for (std::size_t m : {1, 7, 300}) {
    const auto x = randv(m * k, 3);
    for (const engine::GemmSchedule sched : {engine::GemmSchedule{}, engine::GemmSchedule{5, 0}}) {
      std::vector<float> want(m * n), got(m * n), want_r(m * n), got_r(m * n);
      engine::packed_gemm(x.data(), m, pw, want.data(), bias.data(), sched);
      const LinearOp packed{.packed = &pw, .n = n, .y = got.data(), .bias = bias.data()};
      b.linear(x.data(), m, k, {&packed, 1}, sched);
      EXPECT_TRUE(same_bits(got, want)) << "packed m " << m;
      const engine::RowGemmOp rop{w.data(), n, want_r.data()};
      engine::gemm_rows(x.data(), m, k, {&rop, 1}, sched.order);
      const LinearOp rows{.rows = w.data(), .n = n, .y = got_r.data()};
      b.linear(x.data(), m, k, {&rows, 1}, sched);
      EXPECT_TRUE(same_bits(got_r, want_r)) << "rows m " << m;
    }
  }
}

TEST(EngineBackend, HostLinearTakesTheBlocksForOneRow) {
  // Q8_0 blocks: f16 scale then 32 int8, a known matrix [2, 32].
  const std::size_t k = 32, n = 2;
  std::vector<std::uint8_t> blocks(n * 34);
  for (std::size_t r = 0; r < n; ++r) {
    blocks[r * 34] = 0x00, blocks[r * 34 + 1] = 0x3c;  // f16 1.0
    for (std::size_t j = 0; j < k; ++j) blocks[r * 34 + 2 + j] = static_cast<std::uint8_t>(j + r);
  }
  const QuantMatrix q{GgmlType::Q8_0, blocks.data(), n, k, 34};
  std::vector<float> w(n * k);
  dequantize(GgmlType::Q8_0, blocks, w, k);
  const engine::PackedMatrix pw(w.data(), n, k);
  const auto x = randv(k, 4);
  std::vector<float> want(n), got(n), f32(n);
  quant_gemv(q, x.data(), want.data());
  const LinearOp op{.packed = &pw, .n = n, .y = got.data(), .q = &q};
  host_backend().linear(x.data(), 1, k, {&op, 1}, {});
  EXPECT_TRUE(same_bits(got, want));
  const LinearOp no_q{.packed = &pw, .n = n, .y = f32.data()};  // without blocks: the f32 GEMM
  host_backend().linear(x.data(), 1, k, {&no_q, 1}, {});
  for (std::size_t r = 0; r < n; ++r) EXPECT_NEAR(f32[r], want[r], 1e-4 * (1 + std::abs(want[r])));
}

}  // namespace
}  // namespace kc
