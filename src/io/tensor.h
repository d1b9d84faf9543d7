// A tensor as read from a file (memory-mapped, never copied) or made in memory.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "numeric/dtype.h"

namespace kc {

struct Tensor {
  DType dtype = DType::float32;
  std::vector<std::int64_t> shape;     // row-major (C order)
  std::span<const std::uint8_t> bytes;  // storage_bytes(dtype, numel()) bytes
  std::shared_ptr<const void> owner;    // keeps the mapping or buffer alive
  std::string origin;                   // "file.npy", "file.safetensors:name", "<generated x>"

  std::size_t numel() const;
  std::string shape_str() const;  // "[2, 3]"
};

// A tensor that owns its bytes (generated inputs, op outputs).
Tensor make_tensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes,
                   std::string origin);
Tensor make_tensor_f64(DType dtype, std::vector<std::int64_t> shape, std::span<const double> values,
                       std::string origin);  // encodes with numeric/formats.h encode_block

// How to read a raw file (no header): both must be given.
struct RawLayout {
  std::optional<DType> dtype;
  std::optional<std::vector<std::int64_t>> shape;
};

// Opens a tensor by path: "x.npy", "x.safetensors" (must hold exactly one tensor) or
// "x.safetensors:name", or any other file as raw little-endian bytes described by `raw`.
// The file type is detected from the content (npy magic, safetensors header), not the suffix.
// Errors name the file and field (kc::Error).
// - "file:name": the whole spec is tried as a file first; otherwise it is split at a ':' (rightmost first)
//   whose prefix is a regular file, so both paths and tensor names may contain ':'.
// - For .npy, raw.dtype resolves void descrs (see npy.h); for both formats a given dtype/shape must agree
//   with the file's own (error otherwise).
// - Raw files: the size must equal storage_bytes(dtype, numel) exactly; 4-bit types packed two per byte.
//   A raw file that happens to start like a safetensors header is read as raw when the given layout
//   matches its size and the header does not parse.
Tensor load_tensor(const std::string& spec, const RawLayout& raw = {});

// Parses "2,3,4" or "[2, 3, 4]" (or "(2, 3, 4)", trailing comma allowed) into a shape; "", "[]" and "()" are
// a scalar (shape [], one element). Throws kc::Error naming `what` when malformed or when the element count
// overflows.
std::vector<std::int64_t> parse_shape(std::string_view text, std::string_view what);

}  // namespace kc
