// GGUF reader (versions 2 and 3): metadata key/values of every type, tensor infos, data memory-mapped
// (never copied), dequantization of tensors to f32.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor_count, u64 kv_count, kv_count × {string key,
// u32 value type, value}, tensor_count × {string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
// u64 offset}, padding to `general.alignment` (default 32), tensor data (offsets relative to its start).
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
// ne[0] is the fastest-varying dimension: a GGUF [ne0, ne1] matrix is a row-major [ne1, ne0] array with
// rows of ne0 elements (ggml quantizes along ne0, so ne0 is a multiple of the block size).
//
// Every malformed file (truncated, bad magic or version, counts or lengths past the end, overflowing
// sizes, unknown types, tensors out of range) is a kc::Error naming the file, the field and the expected
// value; no input reads out of bounds.
//
// **Example**:
//   auto g = kc::GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf");
//   g.get_uint("llama.block_count");               // 30
//   kc::Tensor w = g.tensor_f32("blk.0.attn_q.weight");  // float32 [576, 576]
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor.h"
#include "model/dequant.h"

namespace kc {

enum class GgufType : std::uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
const char* gguf_type_name(GgufType t);  // "UINT32", "ARRAY", …

// One metadata value. Scalars: integers in `u` (unsigned types) or `i` (signed), floats in `f`, bool in
// `b`, strings in `s`. Arrays: `elem_type`, `count`, and the elements in `raw` (numeric/bool, packed
// little-endian), `strings`, or `items` (arrays of arrays). String views point into the file mapping.
struct GgufValue {
  GgufType type = GgufType::uint8;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view s;
  GgufType elem_type = GgufType::uint8;
  std::uint64_t count = 0;
  std::span<const std::uint8_t> raw;
  std::vector<std::string_view> strings;
  std::vector<GgufValue> items;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<std::uint64_t> ne;  // ggml order: ne[0] fastest
  std::uint64_t offset = 0;       // relative to the data section
  std::uint64_t n_elements = 0;
  std::uint64_t n_bytes = 0;

  std::vector<std::int64_t> shape() const;  // row-major: ne reversed ([ne1, ne0] for a matrix)
  std::uint64_t row_len() const { return ne.empty() ? 1 : ne[0]; }
  const char* type_name() const { return ggml_type_info(type).name; }
};

class GgufFile {
 public:
  // Maps and validates the whole header.
  static GgufFile open(const std::string& path);
  // Parses a GGUF held in memory; `name` stands for the file in error messages and `owner` keeps the
  // bytes alive (may be null when the caller does).
  static GgufFile parse(std::span<const std::uint8_t> bytes, std::string name,
                        std::shared_ptr<const void> owner = nullptr);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  // start of the tensor data in the file

  // --- metadata, in file order ---
  const std::vector<std::pair<std::string_view, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // Typed getters: throw "FILE: KEY: expected TYPE, got …" when the key is missing or of another type.
  std::string_view get_string(std::string_view key) const;
  std::uint64_t get_uint(std::string_view key) const;  // any integer type holding a value >= 0
  std::int64_t get_int(std::string_view key) const;    // any integer type holding a value <= INT64_MAX
  double get_float(std::string_view key) const;        // FLOAT32/FLOAT64 (or an integer)
  bool get_bool(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<std::int64_t> get_int_array(std::string_view key) const;  // arrays of any integer type
  std::vector<double> get_float_array(std::string_view key) const;      // arrays of floats or integers
  // Optional variants: nullopt when the key is absent (still throw on a wrong type).
  std::optional<std::uint64_t> find_uint(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::string_view> find_string(std::string_view key) const;

  // --- tensors, in file order ---
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Throws "FILE: tensor 'NAME': expected a tensor of that name (the file has N tensors)".
  const GgufTensorInfo& tensor_info(std::string_view name) const;
  // Like tensor_info, and checks the row-major shape: "FILE: tensor 'NAME': shape: expected [..], got [..]".
  const GgufTensorInfo& expect_tensor(std::string_view name, const std::vector<std::int64_t>& shape) const;
  std::span<const std::uint8_t> tensor_data(const GgufTensorInfo& t) const;

  // Dequantizes to f32 (rows in parallel). Throws "FILE: tensor 'NAME': type Q3_K is not supported;
  // supported: F32, F16, …" for types without a kernel.
  void dequantize_into(const GgufTensorInfo& t, std::span<float> out) const;
  std::vector<float> dequantize(const GgufTensorInfo& t) const;
  // The tensor as a float32 kc::Tensor (row-major shape, owns its buffer; origin "FILE:NAME").
  Tensor tensor_f32(std::string_view name) const;

 private:
  std::string path_;
  std::shared_ptr<const void> owner_;
  std::span<const std::uint8_t> bytes_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string_view, GgufValue>> kv_;
  std::map<std::string_view, std::size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;

  [[noreturn]] void key_error(std::string_view key, std::string_view expected, const GgufValue* v) const;
};

// A value as short text for dumps and messages: 3, 1e-05, "llama", [49152 × STRING: "<|endoftext|>", …].
std::string gguf_value_str(const GgufValue& v, std::size_t max_items = 4);

}  // namespace kc
