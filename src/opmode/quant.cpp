// per_token_quant: int8 quantisation with one scale per row (token):
//   scale = max|x| / 127;  q = clamp(round_half_even(x / scale), −127, 127)
// The reference does it in f64. The candidates model kernels: f32 scale and divide, f32 reciprocal
// multiply, and a scale stored in f16 — the step function round(x/scale) turns 1-ULP differences into
// ±1 LSB flips, which is why the quant method (|Δ| <= 1 LSB) exists (docs/compare.md).
#include <algorithm>
#include <cmath>
#include <vector>

#include "numeric/formats.h"
#include "opmode/op_util.h"

namespace kc::ops {
namespace {

enum class Mode { f64, f32_div, f32_recip, scale_f16 };

template <typename T>
Array quantize(const Array& x, Mode mode) {
  auto [rows, cols] = rows_cols(x.shape);
  Array y{x.shape, std::vector<double>(x.values.size())};
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x.values.data() + r * cols;
    T amax = 0;
    for (std::size_t j = 0; j < cols; ++j) amax = std::max(amax, static_cast<T>(std::fabs(xr[j])));
    T scale = amax / T(127);
    if (mode == Mode::scale_f16) scale = static_cast<T>(f16_to_f32(f32_to_f16(scale)));
    T recip = scale > 0 ? T(1) / scale : T(0);
    for (std::size_t j = 0; j < cols; ++j) {
      T xv = static_cast<T>(xr[j]);
      T qv = scale == 0 ? T(0) : (mode == Mode::f32_recip ? xv * recip : xv / scale);
      y.values[r * cols + j] = std::clamp(static_cast<double>(std::nearbyint(qv)), -127.0, 127.0);
    }
  }
  return y;
}

}  // namespace

void register_quant(Registry& r) {
  OpDef d;
  d.name = "per_token_quant";
  d.summary = "int8 per-row quantisation, scale = max|x|/127; input bf16 (compare with a quant spec)";
  d.input_names = {"x [..., H]"};
  d.output_shape = [](std::span<const Shape> s, const Params&) {
    expect_inputs("per_token_quant", s, 1, "x");
    expect_positive("per_token_quant", "x", s[0]);
    return s[0];
  };
  d.input_dtype = DType::bfloat16;
  d.output_dtypes = {DType::int8};
  d.default_output = DType::int8;
  d.reference = [](std::span<const Array> in, const Params&) { return quantize<double>(in[0], Mode::f64); };
  r.add_op(std::move(d));
  r.add_candidate(
      "per_token_quant", "f32_div",
      [](auto in, auto&, DType) { return quantize<float>(in[0], Mode::f32_div); },
      "scale and x/scale in f32");
  r.add_candidate(
      "per_token_quant", "f32_recip",
      [](auto in, auto&, DType) { return quantize<float>(in[0], Mode::f32_recip); }, "x·(1/scale) in f32");
  r.add_candidate(
      "per_token_quant", "scale_f16",
      [](auto in, auto&, DType) { return quantize<float>(in[0], Mode::scale_f16); },
      "scale stored in f16 (off-by-one LSB flips)");
}

}  // namespace kc::ops
