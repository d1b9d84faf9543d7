// NumPy .npy (versions 1.0, 2.0, 3.0), C order, little-endian. ml_dtypes arrays (bfloat16, float8_*,
// float4_e2m1fn, int4) are written by numpy with descr "|V1"/"<V2" and no type name; we read them only
// when the caller says the dtype (the header does not carry it). numpy's own descrs map directly.
#pragma once
#include <span>
#include <string>

#include "io/tensor.h"

namespace kc {

// Parse an .npy image (already mapped). `hint` resolves void descrs (|V1, <V2 …) to an ml_dtypes type.
Tensor parse_npy(std::span<const std::uint8_t> file, const std::string& path,
                 std::optional<DType> hint = std::nullopt);
Tensor read_npy(const std::string& path, std::optional<DType> hint = std::nullopt);

// Write atomically. Types numpy lacks are written as numpy void "|V1"/"<V2" of the right size, which is
// what numpy+ml_dtypes produce (np.load(...).view(ml_dtypes.bfloat16) restores them).
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kc
