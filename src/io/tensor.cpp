#include "io/tensor.h"

#include <sys/stat.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/io_internal.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "numeric/formats.h"

namespace kc {

namespace io_detail {

std::optional<std::size_t> checked_numel(std::span<const std::int64_t> shape) {
  std::size_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) return std::nullopt;
  }
  return n;
}

std::optional<std::size_t> checked_storage_bytes(DType d, std::size_t n) {
  const int bits = dtype_info(d).bits;
  std::size_t bytes;
  if (bits % 8 == 0) {
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(bits / 8), &bytes)) return std::nullopt;
  } else {
    KC_ASSERT(bits == 4, "dtype {} has {} bits", dtype_name(d), bits);
    bytes = n / 2 + (n % 2);
  }
  return bytes;
}

std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

void pack_nibbles(const std::uint8_t* one_per_byte, std::size_t n, std::uint8_t* packed) {
  for (std::size_t i = 0; i + 1 < n; i += 2)
    packed[i / 2] = static_cast<std::uint8_t>((one_per_byte[i] & 0xF) | ((one_per_byte[i + 1] & 0xF) << 4));
  if (n % 2) packed[n / 2] = one_per_byte[n - 1] & 0xF;
}

void unpack_nibbles(const std::uint8_t* packed, std::size_t n, std::uint8_t* one_per_byte) {
  for (std::size_t i = 0; i < n; ++i) one_per_byte[i] = (packed[i / 2] >> ((i % 2) * 4)) & 0xF;
}

}  // namespace io_detail

std::size_t Tensor::numel() const {
  auto n = io_detail::checked_numel(shape);
  KC_ASSERT(n.has_value(), "invalid shape {} of {}", io_detail::shape_to_string(shape), origin);
  return *n;
}

std::string Tensor::shape_str() const { return io_detail::shape_to_string(shape); }

Tensor make_tensor(DType dtype, std::vector<std::int64_t> shape, std::vector<std::uint8_t> bytes,
                   std::string origin) {
  auto n = io_detail::checked_numel(shape);
  KC_ASSERT(n.has_value(), "invalid shape {} for {}", io_detail::shape_to_string(shape), origin);
  KC_ASSERT(bytes.size() == storage_bytes(dtype, *n), "{}: {} bytes for {} {} elements", origin, bytes.size(),
            *n, dtype_name(dtype));
  auto buf = std::make_shared<const std::vector<std::uint8_t>>(std::move(bytes));
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes = std::span<const std::uint8_t>(buf->data(), buf->size());
  t.owner = buf;
  t.origin = std::move(origin);
  return t;
}

// Complex dtypes take interleaved (re, im) pairs, 2·numel values, encoded with the component float type.
Tensor make_tensor_f64(DType dtype, std::vector<std::int64_t> shape, std::span<const double> values,
                       std::string origin) {
  auto n = io_detail::checked_numel(shape);
  KC_ASSERT(n.has_value(), "invalid shape {} for {}", io_detail::shape_to_string(shape), origin);
  std::vector<std::uint8_t> bytes(storage_bytes(dtype, *n));
  if (is_complex(dtype)) {
    KC_ASSERT(values.size() == 2 * *n, "{}: {} values for {} complex elements", origin, values.size(), *n);
    const DType part = dtype == DType::complex32   ? DType::float16
                       : dtype == DType::complex64 ? DType::float32
                                                   : DType::float64;
    encode_block(part, values.data(), values.size(), bytes.data());
  } else {
    KC_ASSERT(values.size() == *n, "{}: {} values for {} elements", origin, values.size(), *n);
    encode_block(dtype, values.data(), values.size(), bytes.data());
  }
  return make_tensor(dtype, std::move(shape), std::move(bytes), std::move(origin));
}

// Accepted forms: "2,3,4", "[2, 3, 4]", "(2, 3, 4)", a trailing comma, spaces anywhere between tokens.
// "", "[]" and "()" mean a scalar (shape [], one element), as in numpy.
std::vector<std::int64_t> parse_shape(std::string_view text, std::string_view what) {
  auto bad = [&](std::string_view why) -> std::vector<std::int64_t> {
    throw_input_error(what, "shape", fmt::format("non-negative integers like 2,3,4 or [2, 3, 4] ({})", why),
                      fmt::format("'{}'", text));
  };
  std::size_t i = 0;
  auto skip_ws = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  };
  skip_ws();
  char close = 0;
  if (i < text.size() && (text[i] == '[' || text[i] == '(')) {
    close = text[i] == '[' ? ']' : ')';
    ++i;
  }
  std::vector<std::int64_t> shape;
  for (;;) {
    skip_ws();
    if (i == text.size() || (close && text[i] == close)) break;
    if (text[i] < '0' || text[i] > '9') return bad("unexpected character");
    std::int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (__builtin_mul_overflow(v, std::int64_t{10}, &v) || __builtin_add_overflow(v, text[i] - '0', &v))
        return bad("dimension too large");
      ++i;
    }
    shape.push_back(v);
    skip_ws();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    break;
  }
  if (close) {
    if (i == text.size() || text[i] != close) return bad(fmt::format("missing '{}'", close));
    ++i;
  }
  skip_ws();
  if (i != text.size()) return bad("trailing characters");
  if (!io_detail::checked_numel(shape)) return bad("element count overflows");
  return shape;
}

namespace {

bool is_regular_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool looks_like_npy(std::span<const std::uint8_t> b) {
  return b.size() >= 6 && std::memcmp(b.data(), "\x93NUMPY", 6) == 0;
}

bool looks_like_safetensors(std::span<const std::uint8_t> b) {
  if (b.size() < 9 || b[8] != '{') return false;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
  return n <= b.size() - 8;
}

void check_shape_matches(const Tensor& t, const RawLayout& raw, const std::string& path) {
  if (raw.shape && *raw.shape != t.shape)
    throw_input_error(path, "shape",
                      fmt::format("{} (the shape given)", io_detail::shape_to_string(*raw.shape)),
                      fmt::format("{} in the file", t.shape_str()));
}

}  // namespace

// "file:name" selects a tensor of a safetensors file. A path may itself contain ':', so the whole spec
// is tried as a file first, then each split at a ':' from the right whose prefix is a regular file
// (so tensor names may contain ':' too).
Tensor load_tensor(const std::string& spec, const RawLayout& raw) {
  std::string path = spec;
  std::optional<std::string> name;
  if (!is_regular_file(spec)) {
    for (std::size_t pos = spec.rfind(':'); pos != std::string::npos && pos > 0;
         pos = spec.rfind(':', pos - 1)) {
      if (is_regular_file(spec.substr(0, pos))) {
        path = spec.substr(0, pos);
        name = spec.substr(pos + 1);
        break;
      }
    }
  }
  auto file = MappedFile::open(path);
  const auto bytes = file->bytes();

  // A raw file can start like a safetensors header by chance (a small u64, then '{'): when a raw layout
  // whose size matches is given and the header does not parse, the file is read as raw.
  std::optional<std::size_t> raw_bytes;
  if (raw.dtype && raw.shape)
    if (auto n = io_detail::checked_numel(*raw.shape))
      raw_bytes = io_detail::checked_storage_bytes(*raw.dtype, *n);
  const bool raw_fits = raw_bytes == bytes.size();
  std::optional<SafetensorsFile> st;
  if (looks_like_safetensors(bytes)) {
    try {
      st = SafetensorsFile::parse(bytes, path, file);
    } catch (const Error&) {
      if (!raw_fits || name) throw;
    }
  }
  if (st) {
    Tensor t;
    if (name) {
      t = st->tensor(*name);
    } else {
      const auto& names = st->names();
      if (names.size() != 1) {
        std::string list;
        for (std::size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? ", " : "") + names[i];
        if (names.size() > 8) list += ", …";
        throw_input_error(path, "tensor name",
                          fmt::format("FILE:NAME to select one of its {} tensors ({})", names.size(), list),
                          "no name");
      }
      t = st->tensor(names[0]);
    }
    if (raw.dtype && *raw.dtype != t.dtype)
      throw_input_error(t.origin, "dtype", fmt::format("{} (the dtype given)", dtype_name(*raw.dtype)),
                        fmt::format("{} in the file", dtype_name(t.dtype)));
    check_shape_matches(t, raw, t.origin);
    return t;
  }
  if (name) {
    throw_input_error(path, "format", fmt::format("a .safetensors file (to select tensor '{}')", *name),
                      looks_like_npy(bytes) ? "an .npy file" : "a file without a safetensors header");
  }
  if (looks_like_npy(bytes)) {
    Tensor t = parse_npy(bytes, path, raw.dtype);
    if (!t.owner) t.owner = file;
    check_shape_matches(t, raw, path);
    return t;
  }

  // Raw little-endian bytes.
  if (!raw.dtype || !raw.shape)
    throw_input_error(
        path, "format",
        "an .npy or .safetensors file, or a dtype and a shape (--dtype, --shape) to read it as raw "
        "bytes",
        fmt::format("a file of {} bytes without a known header", bytes.size()));
  auto n = io_detail::checked_numel(*raw.shape);
  auto expected = n ? io_detail::checked_storage_bytes(*raw.dtype, *n) : std::nullopt;
  if (!expected)
    throw_input_error(path, "shape", "a shape whose byte size fits in memory",
                      io_detail::shape_to_string(*raw.shape));
  if (*expected != bytes.size())
    throw_input_error(path, "size",
                      fmt::format("{} bytes ({} elements of {} with shape {})", *expected, *n,
                                  dtype_name(*raw.dtype), io_detail::shape_to_string(*raw.shape)),
                      fmt::format("{} bytes", bytes.size()));
  Tensor t;
  t.dtype = *raw.dtype;
  t.shape = *raw.shape;
  t.bytes = bytes;
  t.owner = file;
  t.origin = path;
  return t;
}

}  // namespace kc
