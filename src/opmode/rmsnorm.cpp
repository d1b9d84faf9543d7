// rmsnorm over the last axis: y = x / sqrt(mean(x²) + eps) · w.
#include <cmath>
#include <vector>

#include "opmode/op_util.h"

namespace kc::ops {
namespace {

// round_normed: dtype the normalised x is rounded to before the weight multiply (HF Llama casts
// `hidden_states.to(input_dtype)` there); float64 = no rounding.
template <typename T>
Array rmsnorm_rows(std::span<const Array> in, const Params& p, DType round_normed) {
  const Array& x = in[0];
  const Array& w = in[1];
  auto [rows, cols] = rows_cols(x.shape);
  T eps = static_cast<T>(p.get("eps", 1e-6));
  Array y{x.shape, std::vector<double>(x.values.size())};
  for (std::size_t r = 0; r < rows; ++r) {
    const double* xr = x.values.data() + r * cols;
    T ss = 0;
    for (std::size_t j = 0; j < cols; ++j) ss += static_cast<T>(xr[j]) * static_cast<T>(xr[j]);
    T inv = T(1) / std::sqrt(ss / static_cast<T>(cols) + eps);
    for (std::size_t j = 0; j < cols; ++j) {
      T n = static_cast<T>(xr[j]) * inv;
      if (round_normed != DType::float64) n = static_cast<T>(round_to(round_normed, n));
      y.values[r * cols + j] = static_cast<double>(n * static_cast<T>(w.values[j]));
    }
  }
  return y;
}

}  // namespace

void register_rmsnorm(Registry& r) {
  OpDef d;
  d.name = "rmsnorm";
  d.summary = "x / sqrt(mean(x²) + eps) · w over the last axis; inputs in the row dtype";
  d.input_names = {"x [..., H]", "w [H]"};
  d.param_names = {"eps"};
  d.output_shape = [](std::span<const Shape> s, const Params&) {
    expect_inputs("rmsnorm", s, 2, "x ...xH; w H");
    expect_positive("rmsnorm", "x", s[0]);
    if (s[1].size() != 1 || s[1][0] != s[0].back())
      shape_error("rmsnorm", "w", fmt::format("{} (the last size of x)", s[0].back()), s[1]);
    return s[0];
  };
  d.reference = [](std::span<const Array> in, const Params& p) {
    return rmsnorm_rows<double>(in, p, DType::float64);
  };
  r.add_op(std::move(d));
  r.add_candidate(
      "rmsnorm", "f32", [](auto in, auto& p, DType) { return rmsnorm_rows<float>(in, p, DType::float64); },
      "sum of squares, rsqrt and both multiplies in f32");
  r.add_candidate(
      "rmsnorm", "normed_cast", [](auto in, auto& p, DType out) { return rmsnorm_rows<float>(in, p, out); },
      "f32, but x·rsqrt rounded to the output dtype before · w (HF Llama)");
}

}  // namespace kc::ops
