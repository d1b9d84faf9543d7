// Content hashes: SHA-256 (binary compare, identities of models/corpora) and XXH3-64 (file checksums).
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace kc {

std::string sha256_hex(std::span<const std::uint8_t> bytes);

// Incremental XXH3-64, for checksums over data written in pieces.
class Xxh64 {
 public:
  Xxh64();
  ~Xxh64();
  Xxh64(const Xxh64&) = delete;
  Xxh64& operator=(const Xxh64&) = delete;
  void update(std::span<const std::uint8_t> bytes);
  std::uint64_t digest() const;
  std::string hex() const;

 private:
  void* state_;
};

std::uint64_t xxh64(std::span<const std::uint8_t> bytes);

}  // namespace kc
