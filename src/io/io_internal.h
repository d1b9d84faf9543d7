// Helpers shared by the io readers (not part of the public io API).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/tensor.h"

namespace kc::io_detail {

// Element count of a shape; nullopt when a dimension is negative or the product overflows size_t.
std::optional<std::size_t> checked_numel(std::span<const std::int64_t> shape);

// storage_bytes(d, n) with overflow checking (nullopt when it does not fit in size_t).
std::optional<std::size_t> checked_storage_bytes(DType d, std::size_t n);

// "[2, 3]" for any shape (also used for shapes read from a file before a Tensor exists).
std::string shape_to_string(std::span<const std::int64_t> shape);

// Packed 4-bit storage (two per byte, low nibble first) ↔ one element per byte (ml_dtypes' npy layout:
// the code in the low nibble, high nibble ignored on read and zero on write).
void pack_nibbles(const std::uint8_t* one_per_byte, std::size_t n, std::uint8_t* packed);
void unpack_nibbles(const std::uint8_t* packed, std::size_t n, std::uint8_t* one_per_byte);

}  // namespace kc::io_detail
