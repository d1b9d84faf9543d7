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

#include "core/parallel.h"
#include "io/safetensors.h"
#include "model/causal_lm.h"

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

// A batch of decode steps is bitwise the same steps one sequence at a time (CausalLM::decode_batch's
// promise): sequences with prompts of `prompts` tokens (different depths), then `steps` decode steps of all of
// them together, except that at every third step the last sequence sits out (a batch whose members change),
// at 1 and 2 threads. Token ids are drawn below `vocab`.
inline void expect_decode_batch_bitwise(const CausalLM& m, std::span<const std::size_t> prompts,
                                        std::size_t steps, const std::string& what) {
  const std::size_t V = m.vocab_size(), B = prompts.size();
  auto token = [&](std::size_t b, std::size_t t) { return static_cast<std::int32_t>((b * 7919 + t * 104729 + 13) % V); };
  auto run = [&](bool batched) {
    std::vector<std::unique_ptr<SequenceState>> st;
    for (std::size_t b = 0; b < B; ++b) {
      st.push_back(m.new_state());
      std::vector<std::int32_t> ids(prompts[b]);
      for (std::size_t t = 0; t < ids.size(); ++t) ids[t] = token(b, t);
      m.prefill(*st.back(), ids, LogitsSink{});
    }
    std::vector<float> out;  // per step, the live rows in sequence order
    for (std::size_t s = 0; s < steps; ++s) {
      std::vector<SequenceState*> live;
      std::vector<std::int32_t> tok;
      for (std::size_t b = 0; b < B; ++b)
        if (!(b + 1 == B && B > 1 && s % 3 == 2)) live.push_back(st[b].get()), tok.push_back(token(b, 1000 + s));
      if (batched) {
        const auto lg = m.decode_batch(live, tok);
        EXPECT_EQ(lg.size(), live.size() * V);
        out.insert(out.end(), lg.begin(), lg.end());
      } else {
        for (std::size_t i = 0; i < live.size(); ++i) {
          const auto lg = m.decode(*live[i], tok[i]);
          out.insert(out.end(), lg.begin(), lg.end());
        }
      }
    }
    return out;
  };
  for (int threads : {1, 2}) {
    set_thread_count(threads);
    const auto one = run(false), many = run(true);
    ASSERT_EQ(one.size(), many.size()) << what;
    EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float))) << what << ", threads " << threads;
  }
  set_thread_count(0);
}

}  // namespace kc
