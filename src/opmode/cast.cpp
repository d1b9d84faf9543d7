// cast: the reference is the f64 value itself; the candidate is our encoder for the row dtype. Compared
// with the routed method this shows what a single rounding to each format costs.
#include <vector>

#include "numeric/formats.h"
#include "opmode/op_util.h"

namespace kc::ops {
namespace {

Array cast_to(const Array& x, DType out, Saturation sat) {
  Array y{x.shape, x.values};
  std::vector<std::uint8_t> buf(storage_bytes(out, y.values.size()));
  encode_block(out, y.values.data(), y.values.size(), buf.data(), sat);
  decode_block(out, buf, 0, y.values.size(), y.values.data());
  return y;
}

}  // namespace

void register_cast(Registry& r) {
  OpDef d;
  d.name = "cast";
  d.summary = "x (f64) encoded to the row dtype; reference: x itself";
  d.input_names = {"x [...]"};
  d.output_shape = [](std::span<const Shape> s, const Params&) {
    expect_inputs("cast", s, 1, "x");
    expect_positive("cast", "x", s[0]);
    return s[0];
  };
  d.input_dtype = DType::float64;
  d.output_kinds = {DKind::floating, DKind::integer, DKind::boolean};
  d.reference = [](std::span<const Array> in, const Params&) { return in[0]; };
  r.add_op(std::move(d));
  r.add_candidate(
      "cast", "rne", [](auto in, auto&, DType out) { return cast_to(in[0], out, Saturation::none); },
      "round to nearest even (hifloat8: half away from zero); overflow as the format does");
  r.add_candidate(
      "cast", "saturate", [](auto in, auto&, DType out) { return cast_to(in[0], out, Saturation::clamp); },
      "as rne, finite overflow clamped to ±max");
}

}  // namespace kc::ops
