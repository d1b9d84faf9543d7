// Helpers shared by the built-in ops (shape checks with messages in the error policy's shape).
#pragma once
#include <string>

#include "core/error.h"
#include "opmode/registry.h"

namespace kc::ops {

// Throws "op NAME: input INPUT: expected …, got SHAPE".
[[noreturn]] inline void shape_error(std::string_view op, std::string_view input, std::string_view expected,
                                     const Shape& got) {
  fail("op {}: input {}: expected {}, got {}", op, input, expected, shape_text(got));
}

inline void expect_inputs(std::string_view op, std::span<const Shape> in, std::size_t n,
                          std::string_view names) {
  if (in.size() != n)
    fail("op {}: shapes: expected {} shape(s) ({}) separated by ';', got {}", op, n, names, in.size());
}

inline void expect_rank(std::string_view op, std::string_view input, const Shape& s, std::size_t rank,
                        std::string_view form) {
  if (s.size() != rank) shape_error(op, input, form, s);
  for (auto d : s)
    if (d <= 0) shape_error(op, input, fmt::format("{} with every size >= 1", form), s);
}

// Rows × last dimension of a tensor of rank >= 1 (softmax, rmsnorm, quant work on the last axis).
struct RowsCols {
  std::size_t rows, cols;
};
inline RowsCols rows_cols(const Shape& s) {
  std::size_t cols = s.empty() ? 1 : static_cast<std::size_t>(s.back());
  return {cols ? shape_numel(s) / cols : 0, cols};
}

inline void expect_positive(std::string_view op, std::string_view input, const Shape& s) {
  if (s.empty()) shape_error(op, input, "at least one dimension", s);
  for (auto d : s)
    if (d <= 0) shape_error(op, input, "every size >= 1", s);
}

}  // namespace kc::ops
