// Hugging Face checkpoint folder: config.json + model.safetensors, or shards listed by
// model.safetensors.index.json ({"weight_map": {tensor: shard file}}). Tensors stay memory-mapped;
// tensor_f32 converts F32/BF16/F16 to float32.
//
// **Example**:
//   auto ck = kc::HfCheckpoint::open("models/llama-tiny");
//   ck.config_int("num_hidden_layers");                          // 3
//   auto w = ck.tensor_f32("model.layers.0.self_attn.q_proj.weight", {64, 64});
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor.h"

namespace kc {

class SafetensorsFile;

class HfCheckpoint {
 public:
  // `dir` holds config.json and model.safetensors (preferred) or model.safetensors.index.json + shards.
  // Validates every shard header and that every weight_map entry is in its shard.
  static HfCheckpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  // Keys may be dotted paths into nested objects ("text_config.vocab_size"). Missing keys or values of
  // another type throw "DIR/config.json: KEY: expected …, got …".
  bool has(std::string_view key) const;
  std::int64_t config_int(std::string_view key) const;
  double config_float(std::string_view key) const;  // accepts integers too
  std::string config_string(std::string_view key) const;
  bool config_bool(std::string_view key) const;
  std::optional<std::int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;

  std::vector<std::string> tensor_names() const;  // sorted
  bool contains(std::string_view name) const;
  std::vector<std::int64_t> shape(std::string_view name) const;
  // As stored (mmap, no copy). Throws "DIR: tensor 'NAME': expected a tensor of that name …".
  Tensor tensor(std::string_view name) const;
  // Float32 copy of an F32/BF16/F16 tensor. A non-empty `expect_shape` is checked first:
  // "FILE: tensor 'NAME' shape: expected [a, b], got [c, d]". Other dtypes are refused naming the dtype.
  std::vector<float> tensor_f32(std::string_view name,
                                const std::vector<std::int64_t>& expect_shape = {}) const;
  Tensor tensor_f32_tensor(std::string_view name, const std::vector<std::int64_t>& expect_shape = {}) const;

 private:
  std::string dir_;
  std::string config_path_;
  nlohmann::json config_;
  std::vector<std::shared_ptr<const SafetensorsFile>> shards_;
  std::map<std::string, std::size_t, std::less<>> where_;  // tensor name → shard index

  const nlohmann::json* lookup(std::string_view key) const;
  [[noreturn]] void config_error(std::string_view key, std::string_view expected,
                                 const nlohmann::json* v) const;
  const SafetensorsFile& shard_of(std::string_view name) const;
};

}  // namespace kc
