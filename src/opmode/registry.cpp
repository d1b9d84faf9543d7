#include "opmode/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "core/error.h"
#include "numeric/formats.h"

namespace kc::ops {

std::size_t shape_numel(const Shape& s) {
  std::size_t n = 1;
  for (auto d : s) n *= static_cast<std::size_t>(d);
  return n;
}

std::string shape_text(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out.empty() ? "scalar" : out;
}

double Params::get(const std::string& key, double fallback) const {
  auto it = values.find(key);
  return it == values.end() ? fallback : it->second;
}

bool OpDef::accepts_output(DType d) const {
  if (!output_dtypes.empty())
    return std::find(output_dtypes.begin(), output_dtypes.end(), d) != output_dtypes.end();
  return std::find(output_kinds.begin(), output_kinds.end(), dtype_info(d).kind) != output_kinds.end();
}

std::string OpDef::accepted_outputs_text() const {
  std::vector<std::string> parts;
  if (!output_dtypes.empty()) {
    for (auto d : output_dtypes) parts.emplace_back(dtype_name(d));
  } else {
    for (auto k : output_kinds) {
      parts.emplace_back(k == DKind::floating  ? "a float dtype"
                         : k == DKind::integer ? "an integer dtype"
                         : k == DKind::boolean ? "bool"
                                               : "a complex dtype");
    }
  }
  return fmt::format("{}", fmt::join(parts, " or "));
}

OpDef& Registry::add_op(OpDef def) {
  KC_ASSERT(!ops_.count(def.name), "op {} registered twice", def.name);
  std::string name = def.name;
  return ops_.emplace(name, std::move(def)).first->second;
}

void Registry::add_candidate(const std::string& op, const std::string& name, CandidateFn fn,
                             std::string summary) {
  auto it = ops_.find(op);
  KC_ASSERT(it != ops_.end(), "candidate {} for unknown op {}", name, op);
  KC_ASSERT(!it->second.candidates.count(name), "candidate {}.{} registered twice", op, name);
  it->second.candidates.emplace(name, std::move(fn));
  if (!summary.empty()) it->second.candidate_summaries[name] = std::move(summary);
  if (it->second.default_candidate.empty()) it->second.default_candidate = name;
}

const OpDef* Registry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (auto& [k, v] : ops_) out.push_back(k);
  return out;
}

std::string Registry::names_text() const { return fmt::format("{}", fmt::join(names(), ", ")); }

Registry& registry() {
  static Registry r;
  static std::once_flag once;
  std::call_once(once, [] {
    register_matmul(r);
    register_softmax(r);
    register_rmsnorm(r);
    register_attention(r);
    register_cast(r);
    register_quant(r);
  });
  return r;
}

double round_to(DType d, double x) {
  switch (d) {
    case DType::float64:
      return x;
    case DType::float32:
      return static_cast<double>(static_cast<float>(x));
    case DType::bfloat16:
      return bf16_to_f32(f32_to_bf16(x));
    case DType::float16:
      return f16_to_f32(f32_to_f16(x));
    case DType::hifloat32:
      return to_hifloat32(x);
    default:
      break;
  }
  double out = 0;
  std::uint8_t buf[8] = {};
  KC_ASSERT(storage_bytes(d, 1) <= sizeof buf, "dtype {} too wide for round_to", dtype_name(d));
  encode_block(d, &x, 1, buf);
  decode_block(d, std::span<const std::uint8_t>(buf, storage_bytes(d, 1)), 0, 1, &out);
  return out;
}

void round_to(DType d, std::span<double> values) {
  if (values.empty() || d == DType::float64) return;
  if (d == DType::float32 || d == DType::bfloat16 || d == DType::float16 || d == DType::hifloat32) {
    for (auto& v : values) v = round_to(d, v);
    return;
  }
  std::vector<std::uint8_t> buf(storage_bytes(d, values.size()));
  encode_block(d, values.data(), values.size(), buf.data());
  decode_block(d, buf, 0, values.size(), values.data());
}

}  // namespace kc::ops
