// NumPy .npy (versions 1.0, 2.0, 3.0), C order, little-endian. ml_dtypes arrays (bfloat16, float8_*,
// float4_e2m1fn, int4) are written by numpy with descr "|V1"/"<V2" and no type name; we read them only
// when the caller says the dtype (the header does not carry it). numpy's own descrs map directly.
#pragma once
#include <span>
#include <string>

#include "io/tensor.h"

namespace kc {

// What numpy 2.x + ml_dtypes 0.6 write (checked): bfloat16 '<V2'; float8_e4m3fn, float8_e8m0fnu,
// float4_e2m1fn, int4 '<V1'; float8_e5m2 '<f1' (ml_dtypes gives it kind 'f'; np.load cannot read it back,
// we read it as float8_e5m2 without a hint); complex32 '<W4' (shared with bcomplex32, so it needs the hint).
// float4_e2m1fn and int4 take one byte per element in numpy (code in the low nibble): reading with such a
// hint packs them two per byte (kerncheck's storage, as in raw and safetensors files; a copy), and
// write_npy unpacks them again. A hint on a native descr must name the same type, except hifloat32 on
// '<f4' (hifloat32 is stored as an f32 bit pattern). Fortran order is refused unless at most one dimension
// exceeds 1 (same layout); big-endian data and structured dtypes are refused. Data longer than the shape
// needs is accepted (np.load ignores it), shorter is an error.
//
// Parse an .npy image (already mapped). `hint` resolves void descrs (|V1, <V2 …) to an ml_dtypes type.
// The tensor's bytes point into `file` and its owner is left empty (the caller keeps `file` alive),
// except for the packed 4-bit copy, which the tensor owns.
Tensor parse_npy(std::span<const std::uint8_t> file, const std::string& path,
                 std::optional<DType> hint = std::nullopt);
Tensor read_npy(const std::string& path, std::optional<DType> hint = std::nullopt);

// Write atomically. Types numpy lacks are written as numpy void "|V1"/"|V2"/"|V4" of the right size, which
// np.load reads (np.load(...).view(ml_dtypes.bfloat16) restores them; numpy+ml_dtypes write "<V2", which
// np.load also returns as |V2). Header padded to 64 bytes like numpy's; version 2.0 only for huge headers.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace kc
