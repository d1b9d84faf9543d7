// Minimal little-endian GGUF byte writer shared by the model tests that build GGUF files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kc::test {

struct GgufWriter {
  std::vector<std::uint8_t> b;
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(std::string_view s) {
    put<std::uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad(std::size_t a) {
    while (b.size() % a) b.push_back(0);
  }
};

}  // namespace kc::test
