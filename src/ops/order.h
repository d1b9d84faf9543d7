// Summation orders of a seed (the lab's `order=SEED`, docs/lab.md): other, mathematically equal orders of a
// reduction over n terms, as functions of (seed, salt, n) only, so that a seed gives bitwise the same result
// for any thread count and for a decode row as for its prefill row. Seed 0 is the default order, and the
// kernels take their unchanged default path for it. Header-only: packed_gemm.cpp is also built alone (the
// generic-path test).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kc::engine {

struct OrderBlock {
  std::size_t begin, len;
};

// Salts: one stream of draws per kind of reduction.
inline constexpr std::uint64_t kSaltGemmK = 1, kSaltAttnBlock = 2, kSaltAttnOrder = 3, kSaltNorm = 4;

// splitmix64 of (seed, salt): the one hash every ordered kernel draws from.
inline std::uint64_t order_hash(std::uint64_t seed, std::uint64_t salt) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + salt * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// [0, n) cut into blocks of one length drawn from {unit, 2·unit, …, max_units·unit} and listed in a drawn
// permutation (Fisher–Yates on order_hash): the order in which an ordered kernel sums the blocks.
inline void order_blocks(std::uint32_t seed, std::uint64_t salt, std::size_t n, std::size_t unit,
                         std::size_t max_units, std::vector<OrderBlock>& out) {
  out.clear();
  const std::size_t len = unit * (1 + order_hash(seed, salt) % max_units);
  for (std::size_t b = 0; b < n; b += len) out.push_back({b, std::min(len, n - b)});
  std::uint64_t h = order_hash(seed, salt * 1000003u + n);
  for (std::size_t i = out.size(); i > 1; --i) {
    h = order_hash(h, i);
    std::swap(out[i - 1], out[h % i]);
  }
}

}  // namespace kc::engine
