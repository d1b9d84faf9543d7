// safetensors: u64 little-endian header length, JSON header {name: {dtype, shape, data_offsets}, and an
// optional "__metadata__": {str: str}}, then the data. All dtype codes of the format map to kc::DType:
// BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 F8_E8M0 F4 C64 (and our extensions
// for the rest, spelled with an "X_" prefix so stock loaders refuse them rather than misread them):
// X_HIF8 (hifloat8), X_HIF32 (hifloat32), X_I4 (int4, packed like F4), X_C32 (complex32), X_C128.
// The format's F6_E2M3, F6_E3M2, F8_E4M3FNUZ and F8_E5M2FNUZ have no kerncheck dtype: reading them fails
// with a message naming the tensor.
//
// Format facts (huggingface/safetensors, src/tensor.rs; stock loader 0.8):
// - F4 is float4_e2m1, 4 bits per element, two per byte; shapes count elements. The stock loader refuses
//   an F4 tensor whose element count is odd (bit size not a whole number of bytes), so write_safetensors
//   refuses it too; we read the low nibble first (torch float4_e2m1fn_x2 / OCP MX order).
// - The stock loader requires the tensors' data to cover the data region exactly, without gaps, and the
//   file to end where the data ends; the header JSON may be followed by whitespace only (its writer pads
//   with spaces; a NUL or anything else is refused); it caps the header at 100,000,000 bytes. We read as
//   strictly, and write what the stock loader reads: data contiguous from offset 0, header padded with
//   spaces to a multiple of 8.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "io/tensor.h"

namespace kc {

class SafetensorsFile {
 public:
  // Maps and validates the whole header (offsets in range, non-overlapping, sizes match shapes).
  static SafetensorsFile open(const std::string& path);
  // The same from bytes already in memory (fuzzing, load_tensor's content sniffing). `owner` keeps
  // `file` alive for the tensors returned; `path` is used in messages and origins.
  static SafetensorsFile parse(std::span<const std::uint8_t> file, const std::string& path,
                               std::shared_ptr<const void> owner);

  const std::vector<std::string>& names() const { return names_; }  // in file order
  bool contains(const std::string& name) const;
  Tensor tensor(const std::string& name) const;  // throws naming the file and the tensor
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<const void> owner_;
  std::vector<std::string> names_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes atomically, tensors in the given order, data 8-byte aligned, header padded with spaces.
// The data region starts 8-byte aligned; tensors follow each other without gaps (the format allows no
// padding between them), so a tensor is naturally aligned only when the ones before it keep it so.
// Names must be unique, non-empty and not "__metadata__".
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Files whose every byte is checked (judge shards, record checkpoints): metadata "checksum" = "xxh3:" +
// XXH3-64 over every other metadata key and value (key order) and every tensor's name, dtype, shape and
// bytes (name order), each string/byte run preceded by its length as a little-endian u64. Generic: a new
// metadata key or tensor is covered without a change here.
std::string content_checksum(const std::map<std::string, std::string>& metadata,
                             const std::vector<NamedTensor>& tensors);
// write_safetensors with metadata["checksum"] = content_checksum(...).
void write_sealed_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              std::map<std::string, std::string> metadata);
// Throws kc::Error "FILE: metadata checksum: expected …, got …" unless the file's checksum matches.
void verify_sealed(const SafetensorsFile& f);

// "F32" ↔ DType
std::optional<DType> dtype_from_safetensors(std::string_view code);
const char* safetensors_code(DType d);

}  // namespace kc
