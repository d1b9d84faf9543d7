// Shared by the model tests: the fixtures' transformers reference (reference.safetensors, written by
// /work/shared/tools/make_models.py reference_logits()) and the logit bound.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace kc {

inline std::string fixture(const std::string& name) {
  return std::string(KC_TEST_DATA) + "/fixtures/" + name;
}

inline std::vector<float> f32_of(const Tensor& t) {
  EXPECT_EQ(t.dtype, DType::float32) << t.origin;
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  return v;
}

struct Reference {
  std::vector<std::int32_t> ids;
  std::vector<float> logits;         // [T, V]
  std::vector<float> decode_logits;  // [n, V]: row j predicts token P+j (= logits row P-1+j)
  std::size_t decode_start = 0;      // P-1
};

inline Reference read_reference(const std::string& dir) {
  const auto f = SafetensorsFile::open(dir + "/reference.safetensors");
  Reference r;
  const Tensor ids = f.tensor("input_ids");
  for (std::size_t i = 0; i < ids.numel(); ++i) {
    std::int64_t x;
    std::memcpy(&x, ids.bytes.data() + 8 * i, 8);
    r.ids.push_back(static_cast<std::int32_t>(x));
  }
  r.logits = f32_of(f.tensor("logits"));
  r.decode_logits = f32_of(f.tensor("decode_logits"));
  std::int64_t s;
  std::memcpy(&s, f.tensor("decode_start").bytes.data(), 8);
  r.decode_start = static_cast<std::size_t>(s);
  return r;
}

// max over elements of |ours − ref| / (1e-4·(1 + |ref|)): the bound is ≤ 1.
inline double worst_ratio(std::span<const float> ours, std::span<const float> ref) {
  EXPECT_EQ(ours.size(), ref.size());
  double worst = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    worst =
        std::max(worst, std::abs(static_cast<double>(ours[i]) - ref[i]) / (1e-4 * (1 + std::abs(ref[i]))));
  return worst;
}

}  // namespace kc
