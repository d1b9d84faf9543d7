// Deterministic data parallelism. Work is cut into chunks whose boundaries depend only on the problem
// size (never on the thread count), and per-chunk partial results are merged in chunk order, so a
// reduction gives bitwise the same answer for any number of threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace kc {

// Threads used by parallel_for: KC_THREADS env var if set, else the hardware concurrency.
int thread_count();
void set_thread_count(int n);  // n <= 0 restores the default

// Calls fn(chunk_index, begin, end) for every chunk [begin, end) of [0, n) with chunks of `chunk` items.
// Runs on the calling thread plus the pool; returns when all chunks are done. Exceptions thrown by fn are
// rethrown on the calling thread (the first one wins).
void parallel_for(std::size_t n, std::size_t chunk,
                  const std::function<void(std::size_t, std::size_t, std::size_t)>& fn);

inline std::size_t chunk_count(std::size_t n, std::size_t chunk) { return (n + chunk - 1) / chunk; }

// Map each chunk to a partial result, then fold the partials in chunk order.
template <typename Acc, typename MapFn>
Acc parallel_reduce(std::size_t n, std::size_t chunk, MapFn&& map) {
  std::vector<Acc> parts(chunk_count(n, chunk));
  parallel_for(n, chunk, [&](std::size_t c, std::size_t b, std::size_t e) { map(parts[c], b, e); });
  Acc total{};
  for (auto& p : parts) total.merge(p);
  return total;
}

}  // namespace kc
