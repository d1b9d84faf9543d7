// Shared by the engine op tests: seeded Gaussian inputs and a guard that restores the thread count.
#pragma once
#include <random>
#include <vector>

#include "core/parallel.h"

namespace kc::engine {

inline std::vector<float> random_vec(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Restores the default thread count when a test ends.
struct ThreadGuard {
  ~ThreadGuard() { set_thread_count(0); }
};

}  // namespace kc::engine
