// .npy reader and writer. Format: "\x93NUMPY", major, minor, header length (u16 for 1.0, u32 for 2.0 and
// 3.0), then a Python dict literal {'descr': …, 'fortran_order': …, 'shape': (…)} padded with spaces and
// ended by '\n', then the data. We parse the dict with a small strict parser instead of evaluating it.
#include "io/npy.h"

#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "io/io_internal.h"

namespace kc {

static_assert(std::endian::native == std::endian::little,
              "npy/safetensors data are read in place as little-endian");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kAlign = 64;  // numpy pads the preamble + header to a multiple of 64 bytes

// numpy's own types: kind character and item size ("<f4" → 'f', 4). Byte order is handled separately.
struct NativeDescr {
  char kind;
  int itemsize;
  DType dtype;
  const char* descr;  // what we write
};
constexpr std::array<NativeDescr, 14> kNative{{
    {'f', 8, DType::float64, "<f8"},
    {'f', 4, DType::float32, "<f4"},
    {'f', 2, DType::float16, "<f2"},
    {'i', 1, DType::int8, "|i1"},
    {'i', 2, DType::int16, "<i2"},
    {'i', 4, DType::int32, "<i4"},
    {'i', 8, DType::int64, "<i8"},
    {'u', 1, DType::uint8, "|u1"},
    {'u', 2, DType::uint16, "<u2"},
    {'u', 4, DType::uint32, "<u4"},
    {'u', 8, DType::uint64, "<u8"},
    {'b', 1, DType::boolean, "|b1"},
    {'c', 8, DType::complex64, "<c8"},
    {'c', 16, DType::complex128, "<c16"},
}};

// Bytes per element in an .npy file: packed 4-bit types take one byte each there (ml_dtypes' layout).
std::size_t npy_itemsize(DType d) {
  return is_packed4(d) ? 1 : static_cast<std::size_t>(dtype_info(d).bits / 8);
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::size_t data_offset = 0;
};

// Strict parser of the header dict: the subset of Python literal syntax numpy writes (single- or
// double-quoted strings without escapes, True/False, tuples of non-negative ints with an optional
// Python 2 'L' suffix), any whitespace between tokens, an optional trailing comma.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        dup(have_descr, key);
        if (peek() == '[')
          bad_field("descr", "a simple type string like '<f4'", "a structured dtype (a list)");
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        dup(have_fortran, key);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        dup(have_shape, key);
        h.shape = tuple();
      } else {
        bad_field("header", "only the keys 'descr', 'fortran_order' and 'shape'",
                  fmt::format("key '{}'", key));
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      if (peek() != '}') bad("',' or '}'");
    }
    ++i_;
    ws();
    if (i_ != s_.size()) bad("only spaces after the dict");
    if (!have_descr) bad_field("descr", "present", "missing");
    if (!have_fortran) bad_field("fortran_order", "present", "missing");
    if (!have_shape) bad_field("shape", "present", "missing");
    return h;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  [[noreturn]] void bad(std::string_view expected) const {
    std::string got = i_ < s_.size() ? fmt::format("'{}'", printable(s_[i_])) : std::string("the end");
    throw_input_error(
        path_, "header",
        fmt::format("a Python dict {{'descr': …, 'fortran_order': …, 'shape': (…)}}: {}", expected),
        fmt::format("{} at byte {} of the header", got, i_));
  }
  [[noreturn]] void bad_field(std::string_view field, std::string_view expected, std::string_view got) const {
    throw_input_error(path_, field, expected, got);
  }
  static std::string printable(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7F ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  void expect(char c) {
    if (peek() != c) bad(fmt::format("'{}'", c));
    ++i_;
  }
  void dup(bool& seen, const std::string& key) {
    if (seen) bad_field(key, "the key once", "it twice");
    seen = true;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') bad("a quoted string");
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      const auto u = static_cast<unsigned char>(s_[i_]);
      if (u < 0x20 || u >= 0x7F || s_[i_] == '\\') bad("a plain ASCII string without escapes");
      ++i_;
    }
    if (i_ == s_.size()) bad("a closing quote");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    bad("True or False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> v;
    bool trailing_comma = false;
    for (;;) {
      ws();
      if (peek() == ')') break;
      v.push_back(integer());
      ws();
      trailing_comma = false;
      if (peek() == ',') {
        ++i_;
        trailing_comma = true;
        continue;
      }
      if (peek() != ')') bad("',' or ')' in the shape tuple");
    }
    ++i_;
    // "(3)" is the integer 3 in Python, not a tuple: numpy rejects it, and so do we.
    if (v.size() == 1 && !trailing_comma) bad_field("shape", "a tuple like (3,)", "(n) without a comma");
    return v;
  }
  std::int64_t integer() {
    if (peek() < '0' || peek() > '9') bad("a non-negative integer");
    if (peek() == '0' && i_ + 1 < s_.size() && s_[i_ + 1] >= '0' && s_[i_ + 1] <= '9')
      bad("an integer without leading zeros");
    std::int64_t x = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(x, std::int64_t{10}, &x) || __builtin_add_overflow(x, peek() - '0', &x))
        bad_field("shape", "dimensions below 2^63", "a larger one");
      ++i_;
    }
    if (peek() == 'L' || peek() == 'l') ++i_;  // Python 2 long, accepted by numpy for version 1.0 files
    return x;
  }

  std::string_view s_;
  const std::string& path_;
  std::size_t i_ = 0;
};

Header read_header(std::span<const std::uint8_t> file, const std::string& path) {
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, 6) != 0) {
    std::string got;
    for (std::size_t i = 0; i < file.size() && i < 6; ++i) got += fmt::format("{:02x}", file[i]);
    throw_input_error(path, "magic", "\\x93NUMPY (an .npy file)",
                      file.size() < 10 ? fmt::format("a file of {} bytes", file.size()) : "0x" + got);
  }
  const int major = file[6], minor = file[7];
  if (major < 1 || major > 3 || minor != 0)
    throw_input_error(path, "version", "1.0, 2.0 or 3.0", fmt::format("{}.{}", major, minor));
  std::size_t prefix = 10, hlen = file[8] | (std::size_t{file[9]} << 8);
  if (major >= 2) {
    if (file.size() < 12) throw_input_error(path, "header length", "4 bytes", "the end of the file");
    prefix = 12;
    hlen |= (std::size_t{file[10]} << 16) | (std::size_t{file[11]} << 24);
  }
  if (hlen > file.size() - prefix)
    throw_input_error(
        path, "header length",
        fmt::format("at most {} bytes (the file has {} bytes)", file.size() - prefix, file.size()),
        fmt::format("{} bytes", hlen));
  // Version 1.0/2.0 headers are latin-1 and 3.0 ones utf-8; the keys and values we accept are ASCII.
  std::string_view text(reinterpret_cast<const char*>(file.data() + prefix), hlen);
  Header h = DictParser(text, path).parse();
  h.data_offset = prefix + hlen;
  return h;
}

std::string hint_text(std::optional<DType> hint) {
  return hint ? fmt::format("dtype {}", dtype_name(*hint)) : std::string("no dtype given");
}

// Maps the descr (with the caller's dtype hint) to a DType. Hints resolve void types and may restate the
// file's own type; the one reinterpretation allowed is hifloat32 for '<f4' (it is stored as an f32 pattern).
DType resolve_descr(const std::string& descr, std::optional<DType> hint, const std::string& path) {
  std::size_t i = 0;
  char order = '|';
  if (!descr.empty() && (descr[0] == '<' || descr[0] == '>' || descr[0] == '|' || descr[0] == '='))
    order = descr[i++];
  const char kind = i < descr.size() ? descr[i++] : '\0';
  int itemsize = 0;
  bool digits = i < descr.size();
  for (; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || itemsize > 1'000'000) {
      digits = false;
      break;
    }
    itemsize = itemsize * 10 + (descr[i] - '0');
  }
  if (!digits || itemsize == 0)
    throw_input_error(path, "descr", "a numpy type string like '<f4'", fmt::format("'{}'", descr));
  if (order == '>' && itemsize > 1 && kind != 'V')
    throw_input_error(path, "descr",
                      "little-endian data ('<'); re-save with a.astype(a.dtype.newbyteorder('<'))",
                      fmt::format("big-endian '{}'", descr));

  for (const auto& n : kNative) {
    if (n.kind != kind || n.itemsize != itemsize) continue;
    if (!hint || *hint == n.dtype) return n.dtype;
    if (*hint == DType::hifloat32 && n.dtype == DType::float32) return DType::hifloat32;
    throw_input_error(path, "descr", fmt::format("a type matching the dtype given ({})", dtype_name(*hint)),
                      fmt::format("'{}' ({})", descr, dtype_name(n.dtype)));
  }
  // ml_dtypes registers float8_e5m2 with kind 'f', so numpy writes '<f1' for it (np.load cannot read it
  // back).
  if (kind == 'f' && itemsize == 1) {
    if (!hint || *hint == DType::float8_e5m2) return DType::float8_e5m2;
    throw_input_error(path, "descr", fmt::format("a type matching the dtype given ({})", dtype_name(*hint)),
                      fmt::format("'{}' (ml_dtypes float8_e5m2)", descr));
  }
  // ml_dtypes ≥ 0.7 registers complex32 with kind 'c' (two IEEE binary16 parts, real then imaginary), so
  // numpy writes '<c4' for it, numpy's own convention for a complex of two 2-byte floats; np.load cannot
  // read it back. (bcomplex32, bfloat16 parts, is still written as a void '<V4'.) Earlier ml_dtypes wrote
  // '<W4', read below with a hint. We keep writing a void type, which every numpy reads.
  if (kind == 'c' && itemsize == 4) {
    if (!hint || *hint == DType::complex32) return DType::complex32;
    throw_input_error(path, "descr", fmt::format("a type matching the dtype given ({})", dtype_name(*hint)),
                      fmt::format("'{}' (ml_dtypes complex32: float16 real and imaginary parts)", descr));
  }
  // Void types ('|V2' for bfloat16, '<V1' for float8/float4/int4) and ml_dtypes' complex32 ('<W4', shared
  // with bcomplex32) carry no type name: the caller must say which type they hold.
  if (kind == 'V' || (kind == 'W' && itemsize == 4)) {
    if (!hint)
      throw_input_error(
          path, "descr",
          "a numpy type, or a dtype given with the file (pass --dtype to kerncheck compare, e.g. --dtype bfloat16; "
          "record and test take no --dtype: save the array as .safetensors or as float32 .npy): numpy writes "
          "ml_dtypes arrays without their type name",
          fmt::format("'{}'", descr));
    if (kind == 'W' && *hint != DType::complex32)
      throw_input_error(path, "descr", fmt::format("a type matching the dtype given ({})", dtype_name(*hint)),
                        fmt::format("'{}' (ml_dtypes complex32)", descr));
    // numpy writes its own types with their names ('<f2' for float16): a void type never holds one.
    for (const auto& n : kNative)
      if (n.dtype == *hint)
        throw_input_error(path, "descr",
                          fmt::format("'{}' for {} (numpy writes it with its name; a void type is how ml_dtypes "
                                      "types such as bfloat16 are written)",
                                      n.descr, dtype_name(*hint)),
                          fmt::format("'{}'", descr));
    if (npy_itemsize(*hint) != static_cast<std::size_t>(itemsize))
      throw_input_error(path, "descr",
                        fmt::format("{} bytes per element for {}", npy_itemsize(*hint), dtype_name(*hint)),
                        fmt::format("'{}' ({} bytes)", descr, itemsize));
    return *hint;
  }
  throw_input_error(
      path, "descr",
      "one of <f8 <f4 <f2 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 <c4 <c8 <c16, or a void type with --dtype",
      fmt::format("'{}' ({})", descr, hint_text(hint)));
}

}  // namespace

// The tensor's bytes point into `file` (no copy, no owner set) except for packed 4-bit types, which numpy
// stores one per byte: those are packed into a buffer the tensor owns.
Tensor parse_npy(std::span<const std::uint8_t> file, const std::string& path, std::optional<DType> hint) {
  Header h = read_header(file, path);
  const DType dtype = resolve_descr(h.descr, hint, path);
  const auto numel = io_detail::checked_numel(h.shape);
  if (h.fortran_order) {
    // With at most one dimension above 1, Fortran and C order are the same layout.
    int big = 0;
    for (auto d : h.shape) big += d > 1;
    if (big > 1)
      throw_input_error(path, "fortran_order", "False (C order; re-save with np.ascontiguousarray(a))",
                        "True");
  }
  std::size_t nbytes = 0;
  if (!numel || __builtin_mul_overflow(*numel, npy_itemsize(dtype), &nbytes))
    throw_input_error(path, "shape", "a shape whose byte size fits in 64 bits",
                      io_detail::shape_to_string(h.shape));
  const std::size_t avail = file.size() - h.data_offset;
  if (nbytes > avail)  // longer is fine: np.load reads prod(shape) items and ignores the rest
    throw_input_error(path, "data",
                      fmt::format("{} bytes after the {}-byte header ({} elements of {}, shape {})", nbytes,
                                  h.data_offset, *numel, h.descr, io_detail::shape_to_string(h.shape)),
                      fmt::format("{} bytes", avail));
  const auto data = file.subspan(h.data_offset, nbytes);

  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(h.shape);
  t.origin = path;
  if (is_packed4(dtype)) {
    auto buf = std::make_shared<std::vector<std::uint8_t>>(storage_bytes(dtype, *numel));
    io_detail::pack_nibbles(data.data(), *numel, buf->data());
    t.bytes = std::span<const std::uint8_t>(buf->data(), buf->size());
    t.owner = std::move(buf);
  } else {
    t.bytes = data;
  }
  return t;
}

Tensor read_npy(const std::string& path, std::optional<DType> hint) {
  auto file = MappedFile::open(path);
  Tensor t = parse_npy(file->bytes(), path, hint);
  if (!t.owner) t.owner = file;
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  const std::size_t n = t.numel();
  KC_ASSERT(t.bytes.size() == storage_bytes(t.dtype, n), "{}: {} bytes for {} elements", t.origin,
            t.bytes.size(), n);
  std::string descr = fmt::format("|V{}", npy_itemsize(t.dtype));
  for (const auto& nd : kNative)
    if (nd.dtype == t.dtype) descr = nd.descr;
  std::string shape = "(";
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += fmt::format("{}{}", i ? ", " : "", t.shape[i]);
  if (t.shape.size() == 1) shape += ",";
  shape += ")";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape);
  // Version 1.0 unless the header does not fit a u16 length (then 2.0), padded like numpy's writer.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const std::size_t prefix = v2 ? 12 : 10;
  const std::size_t total = (prefix + dict.size() + 1 + kAlign - 1) / kAlign * kAlign;
  dict.resize(total - prefix - 1, ' ');
  dict += '\n';
  std::string pre(kMagic, 6);
  pre += static_cast<char>(v2 ? 2 : 1);
  pre += '\0';
  for (std::size_t i = 0; i < (v2 ? 4u : 2u); ++i) pre += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);

  AtomicFile out(path);
  out.write(pre);
  out.write(dict);
  if (is_packed4(t.dtype)) {
    // numpy (ml_dtypes) stores one 4-bit element per byte, code in the low nibble.
    constexpr std::size_t kChunk = 1 << 16;
    std::vector<std::uint8_t> buf(kChunk);
    for (std::size_t i = 0; i < n; i += kChunk) {
      const std::size_t m = std::min(kChunk, n - i);
      // i is even, so element i starts byte i/2 at the low nibble.
      io_detail::unpack_nibbles(t.bytes.data() + i / 2, m, buf.data());
      out.write(std::span<const std::uint8_t>(buf.data(), m));
    }
  } else {
    out.write(t.bytes);
  }
  out.commit();
}

}  // namespace kc
