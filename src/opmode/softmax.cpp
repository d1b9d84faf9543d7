// softmax over the last axis: y = exp(x − max) / Σ exp(x − max).
#include <cmath>
#include <vector>

#include "opmode/op_util.h"

namespace kc::ops {
namespace {

template <typename T>
Array softmax_rows(const Array& x, bool round_exp_bf16) {
  auto [rows, cols] = rows_cols(x.shape);
  Array y{x.shape, std::vector<double>(x.values.size())};
  std::vector<T> e(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x.values.data() + r * cols;
    T m = static_cast<T>(xr[0]);
    for (std::size_t j = 1; j < cols; ++j) m = std::max(m, static_cast<T>(xr[j]));
    T sum = 0;
    for (std::size_t j = 0; j < cols; ++j) {
      e[j] = std::exp(static_cast<T>(xr[j]) - m);
      if (round_exp_bf16) e[j] = static_cast<T>(round_to(DType::bfloat16, e[j]));
      sum += e[j];
    }
    for (std::size_t j = 0; j < cols; ++j) y.values[r * cols + j] = static_cast<double>(e[j] / sum);
  }
  return y;
}

}  // namespace

void register_softmax(Registry& r) {
  OpDef d;
  d.name = "softmax";
  d.summary = "softmax over the last axis; inputs in the row dtype";
  d.input_names = {"x [..., N]"};
  d.output_shape = [](std::span<const Shape> s, const Params&) {
    expect_inputs("softmax", s, 1, "x");
    expect_positive("softmax", "x", s[0]);
    return s[0];
  };
  d.reference = [](std::span<const Array> in, const Params&) { return softmax_rows<double>(in[0], false); };
  r.add_op(std::move(d));
  r.add_candidate(
      "softmax", "f32", [](auto in, auto&, DType) { return softmax_rows<float>(in[0], false); },
      "max, exp, sum and divide in f32");
  r.add_candidate(
      "softmax", "exp_bf16", [](auto in, auto&, DType) { return softmax_rows<float>(in[0], true); },
      "f32, but exp(x − max) rounded to bf16 before the sum and the divide");
}

}  // namespace kc::ops
