// safetensors: u64 little-endian header length, JSON header {name: {dtype, shape, data_offsets}, and an
// optional "__metadata__": {str: str}}, then the data. All dtype codes of the format map to kc::DType:
// BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 F8_E8M0 F4 C64 (and our extensions
// for the rest, spelled with an "X_" prefix so stock loaders refuse them rather than misread them).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "io/tensor.h"

namespace kc {

class SafetensorsFile {
 public:
  // Maps and validates the whole header (offsets in range, non-overlapping, sizes match shapes).
  static SafetensorsFile open(const std::string& path);

  const std::vector<std::string>& names() const { return names_; }  // in file order
  bool contains(const std::string& name) const;
  Tensor tensor(const std::string& name) const;  // throws naming the file and the tensor
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  std::vector<std::string> names_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Writes atomically, tensors in the given order, data 8-byte aligned, header padded with spaces.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "F32" ↔ DType
std::optional<DType> dtype_from_safetensors(std::string_view code);
const char* safetensors_code(DType d);

}  // namespace kc
