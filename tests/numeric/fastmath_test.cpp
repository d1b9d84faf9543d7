// The one exp (numeric/fastmath.h): its entry points against f64 exp, and the vector instantiation of
// exp_core against its scalar twin, lane by lane.
#include "numeric/fastmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace kc::fastmath {
namespace {

typedef float V8f __attribute__((vector_size(32)));
typedef std::int32_t V8i __attribute__((vector_size(32)));

std::vector<float> sweep() {
  std::vector<float> xs;
  for (float x = -87.3f; x <= 88.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-8f, -1e-8f, 0.5f * 0.693359375f, -0.5f * 0.693359375f, 88.0f, -87.3f})
    xs.push_back(x);
  return xs;
}

TEST(FastMath, VectorExpCoreIsBitwiseTheScalarExpF32) {
  const std::vector<float> xs = sweep();
  for (std::size_t i = 0; i + 8 <= xs.size(); i += 8) {
    V8f v;
    for (int l = 0; l < 8; ++l) v[l] = xs[i + l];
    const V8f y = exp_core<false, V8f, V8i>(v);
    for (int l = 0; l < 8; ++l) ASSERT_EQ(y[l], exp_f32(xs[i + l])) << xs[i + l];
  }
}

TEST(FastMath, BothF32ExpsAgreeWithF64Exp) {
  for (float x : sweep()) {
    const double e = std::exp(static_cast<double>(x));
    ASSERT_NEAR(exp_fma(x), e, 2e-7 * e) << x;
    ASSERT_NEAR(exp_f32(x), e, 3e-7 * e) << x;
  }
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_fma(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-87.31f), 0.0f);  // below exp_f32's range
  EXPECT_GT(exp_fma(-87.31f), 0.0f);  // inside exp_fma's
  EXPECT_EQ(exp_f32(88.1f), INFINITY);
  EXPECT_TRUE(std::isfinite(exp_fma(88.1f)));
}

}  // namespace
}  // namespace kc::fastmath
