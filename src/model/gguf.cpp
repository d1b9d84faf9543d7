#include "model/gguf.h"

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/mapped_file.h"

namespace kc {
namespace {

constexpr int kMaxArrayDepth = 8;      // arrays of arrays: deeper nesting is refused (stack safety)
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::uint8:
    case GgufType::int8:
    case GgufType::boolean:
      return 1;
    case GgufType::uint16:
    case GgufType::int16:
      return 2;
    case GgufType::uint32:
    case GgufType::int32:
    case GgufType::float32:
      return 4;
    case GgufType::uint64:
    case GgufType::int64:
    case GgufType::float64:
      return 8;
    default:
      return 0;
  }
}

bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::uint8:
    case GgufType::int8:
    case GgufType::uint16:
    case GgufType::int16:
    case GgufType::uint32:
    case GgufType::int32:
    case GgufType::uint64:
    case GgufType::int64:
      return true;
    default:
      return false;
  }
}
bool is_unsigned_type(GgufType t) {
  return t == GgufType::uint8 || t == GgufType::uint16 || t == GgufType::uint32 || t == GgufType::uint64;
}

std::string quoted(std::string_view s, std::size_t max = 60) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (s.size() > max) out += "…";
  return out + "\"";
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Bounds-checked little-endian cursor; every failure names the file, the field and the byte offset.
class Cursor {
 public:
  Cursor(std::span<const std::uint8_t> b, const std::string& file) : b_(b), file_(file) {}
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }

  void need(std::size_t n, std::string_view field) const {
    if (n > left())
      throw_input_error(file_, field, fmt::format("{} more bytes at offset {}", n, pos_),
                        fmt::format("{} (truncated file of {} bytes)", left(), b_.size()));
  }
  template <typename T>
  T read(std::string_view field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view string(std::string_view field) {
    const std::size_t at = pos_;
    const auto n = read<std::uint64_t>(field);
    if (n > left())
      throw_input_error(file_, field,
                        fmt::format("a string length of at most {} (bytes left) at offset {}", left(), at),
                        std::to_string(n));
    std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  std::span<const std::uint8_t> take(std::size_t n, std::string_view field) {
    need(n, field);
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::span<const std::uint8_t> b_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

GgufType read_type(Cursor& c, const std::string& file, std::string_view field) {
  const auto t = c.read<std::uint32_t>(field);
  if (t > static_cast<std::uint32_t>(GgufType::float64))
    throw_input_error(file, field, "a GGUF value type 0..12", std::to_string(t));
  return static_cast<GgufType>(t);
}

void read_scalar(Cursor& c, GgufType t, GgufValue& v, std::string_view field) {
  switch (t) {
    case GgufType::uint8:
      v.u = c.read<std::uint8_t>(field);
      break;
    case GgufType::int8:
      v.i = c.read<std::int8_t>(field);
      break;
    case GgufType::uint16:
      v.u = c.read<std::uint16_t>(field);
      break;
    case GgufType::int16:
      v.i = c.read<std::int16_t>(field);
      break;
    case GgufType::uint32:
      v.u = c.read<std::uint32_t>(field);
      break;
    case GgufType::int32:
      v.i = c.read<std::int32_t>(field);
      break;
    case GgufType::uint64:
      v.u = c.read<std::uint64_t>(field);
      break;
    case GgufType::int64:
      v.i = c.read<std::int64_t>(field);
      break;
    case GgufType::float32:
      v.f = c.read<float>(field);
      break;
    case GgufType::float64:
      v.f = c.read<double>(field);
      break;
    case GgufType::boolean: {
      const auto b = c.read<std::uint8_t>(field);
      v.b = b != 0;  // gguf-py and llama.cpp accept any non-zero byte as true
      break;
    }
    default:
      KC_ASSERT(false, "read_scalar of {}", gguf_type_name(t));
  }
}

void read_value(Cursor& c, GgufType t, GgufValue& v, const std::string& file, const std::string& field,
                int depth) {
  v.type = t;
  if (t == GgufType::string) {
    v.s = c.string(field);
    return;
  }
  if (t != GgufType::array) {
    read_scalar(c, t, v, field);
    return;
  }
  if (depth >= kMaxArrayDepth)
    throw_input_error(file, field, fmt::format("arrays nested at most {} deep", kMaxArrayDepth),
                      "deeper nesting");
  v.elem_type = read_type(c, file, field + " element type");
  const std::size_t at = c.pos();
  v.count = c.read<std::uint64_t>(field + " count");
  // Smallest encoding of one element; the count must fit in what is left before anything is allocated.
  const std::size_t min_elem = v.elem_type == GgufType::string  ? 8
                               : v.elem_type == GgufType::array ? 12
                                                                : scalar_size(v.elem_type);
  if (v.count > c.left() / min_elem)
    throw_input_error(file, field + " count",
                      fmt::format("at most {} elements of {} ({} bytes left at offset {})",
                                  c.left() / min_elem, gguf_type_name(v.elem_type), c.left(), at),
                      std::to_string(v.count));
  const auto n = static_cast<std::size_t>(v.count);
  if (v.elem_type == GgufType::string) {
    v.strings.reserve(n);
    for (std::size_t k = 0; k < n; ++k) v.strings.push_back(c.string(field));
  } else if (v.elem_type == GgufType::array) {
    v.items.resize(n);
    for (std::size_t k = 0; k < n; ++k)
      read_value(c, GgufType::array, v.items[k], file, fmt::format("{}[{}]", field, k), depth + 1);
  } else {
    v.raw = c.take(n * min_elem, field);
  }
}

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Element k of a numeric array as int64 / double.
std::int64_t array_int(const GgufValue& v, std::size_t k, bool& ok) {
  const std::uint8_t* p = v.raw.data() + k * scalar_size(v.elem_type);
  ok = true;
  switch (v.elem_type) {
    case GgufType::uint8:
      return load<std::uint8_t>(p);
    case GgufType::int8:
      return load<std::int8_t>(p);
    case GgufType::uint16:
      return load<std::uint16_t>(p);
    case GgufType::int16:
      return load<std::int16_t>(p);
    case GgufType::uint32:
      return load<std::uint32_t>(p);
    case GgufType::int32:
      return load<std::int32_t>(p);
    case GgufType::int64:
      return load<std::int64_t>(p);
    case GgufType::uint64: {
      const auto u = load<std::uint64_t>(p);
      ok = u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
      return static_cast<std::int64_t>(u);
    }
    default:
      ok = false;
      return 0;
  }
}

// Raised before any allocation: the file names a type the dequantizer has no kernel for.
[[noreturn]] void unsupported_type(const std::string& path, const std::string& tensor, const char* type) {
  throw_input_error(path, fmt::format("tensor '{}' type", tensor),
                    fmt::format("a supported type ({})", ggml_dequantizable_list()), type);
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
  const auto i = static_cast<std::uint32_t>(t);
  return i < std::size(names) ? names[i] : "?";
}

std::vector<std::int64_t> GgufTensorInfo::shape() const { return {ne.rbegin(), ne.rend()}; }

GgufFile GgufFile::open(const std::string& path) {
  auto m = MappedFile::open(path);
  return parse(m->bytes(), path, m);
}

GgufFile GgufFile::parse(std::span<const std::uint8_t> bytes, std::string name,
                         std::shared_ptr<const void> owner) {
  GgufFile g;
  g.path_ = std::move(name);
  g.owner_ = std::move(owner);
  g.bytes_ = bytes;
  const std::string& file = g.path_;
  Cursor c(bytes, file);

  const auto magic = c.take(4, "magic");
  if (std::memcmp(magic.data(), "GGUF", 4) != 0)
    throw_input_error(file, "magic", "\"GGUF\" (a GGUF file)",
                      quoted(std::string_view(reinterpret_cast<const char*>(magic.data()), 4)));
  g.version_ = c.read<std::uint32_t>("version");
  if (g.version_ != 2 && g.version_ != 3)
    throw_input_error(file, "version", "2 or 3", std::to_string(g.version_));
  const auto n_tensors = c.read<std::uint64_t>("tensor_count");
  const auto n_kv = c.read<std::uint64_t>("metadata_kv_count");
  // Each key/value takes at least 13 bytes and each tensor info at least 24: refuse impossible counts
  // before allocating anything.
  if (n_kv > c.left() / 13)
    throw_input_error(file, "metadata_kv_count",
                      fmt::format("at most {} for a file of {} bytes", c.left() / 13, bytes.size()),
                      std::to_string(n_kv));
  if (n_tensors > c.left() / 24)
    throw_input_error(file, "tensor_count",
                      fmt::format("at most {} for a file of {} bytes", c.left() / 24, bytes.size()),
                      std::to_string(n_tensors));

  g.kv_.reserve(static_cast<std::size_t>(n_kv));
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    const std::string_view key = c.string(fmt::format("metadata key #{}", k));
    const std::string field = fmt::format("metadata '{}'", key);
    GgufValue v;
    read_value(c, read_type(c, file, field + " type"), v, file, field, 0);
    if (!g.kv_index_.emplace(key, g.kv_.size()).second)
      throw_input_error(file, field, "each key once", "a duplicate key");
    g.kv_.emplace_back(key, std::move(v));
  }

  if (const GgufValue* a = g.find("general.alignment")) {
    const bool is_int = is_int_type(a->type) && (is_unsigned_type(a->type) || a->i >= 0);
    const std::uint64_t al = !is_int                     ? 0
                             : is_unsigned_type(a->type) ? a->u
                                                         : static_cast<std::uint64_t>(a->i);
    if (al == 0 || (al & (al - 1)) != 0 || al > (std::uint64_t{1} << 30))
      throw_input_error(file, "metadata 'general.alignment'", "a power of two up to 2^30 (UINT32)",
                        gguf_value_str(*a));
    g.alignment_ = al;
  }

  g.tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = std::string(c.string(fmt::format("tensor #{} name", k)));
    const std::string field = fmt::format("tensor '{}'", t.name);
    const auto n_dims = c.read<std::uint32_t>(field + " n_dims");
    if (n_dims > kMaxDims)
      throw_input_error(file, field + " n_dims", fmt::format("at most {}", kMaxDims), std::to_string(n_dims));
    t.n_elements = 1;
    bool overflow = false;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = c.read<std::uint64_t>(field + " ne");
      if (ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw_input_error(file, field + " ne", "a dimension below 2^63", std::to_string(ne));
      t.ne.push_back(ne);
      overflow |= __builtin_mul_overflow(t.n_elements, ne, &t.n_elements);
    }
    if (overflow)
      throw_input_error(file, field + " shape", "an element count below 2^64", "an overflowing shape");
    const auto type_id = c.read<std::uint32_t>(field + " type");
    const GgmlTypeInfo* ti = ggml_type_info(type_id);
    if (!ti)
      throw_input_error(file, field + " type", "a ggml type id (0..41, e.g. 0 F32, 3 Q4_1)",
                        std::to_string(type_id));
    t.type = ti->type;
    t.offset = c.read<std::uint64_t>(field + " offset");
    const std::uint64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % ti->block_size != 0)
      throw_input_error(file, field + " ne[0]",
                        fmt::format("a multiple of {} (the {} block size)", ti->block_size, ti->name),
                        std::to_string(row));
    t.n_bytes = t.n_elements / ti->block_size * ti->type_size;
    if (t.n_elements / ti->block_size > std::numeric_limits<std::uint64_t>::max() / ti->type_size)
      throw_input_error(file, field + " shape", "a byte size below 2^64", "an overflowing size");
    if (t.offset % g.alignment_ != 0)
      throw_input_error(file, field + " offset", fmt::format("a multiple of the alignment {}", g.alignment_),
                        std::to_string(t.offset));
    if (!g.tensor_index_.emplace(t.name, g.tensors_.size()).second)
      throw_input_error(file, field, "each tensor name once", "a duplicate name");
    g.tensors_.push_back(std::move(t));
  }

  // Tensor data starts at the next multiple of the alignment after the tensor infos.
  const std::uint64_t end = c.pos();
  g.data_offset_ = (end + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  for (const auto& t : g.tensors_) {
    const std::uint64_t avail = g.data_offset_ <= bytes.size() ? bytes.size() - g.data_offset_ : 0;
    if (t.offset > avail || t.n_bytes > avail - t.offset)
      throw_input_error(file, fmt::format("tensor '{}' data", t.name),
                        fmt::format("{} bytes at data offset {} within the {} bytes of tensor data",
                                    t.n_bytes, t.offset, avail),
                        "a range past the end of the file");
  }
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

void GgufFile::key_error(std::string_view key, std::string_view expected, const GgufValue* v) const {
  throw_input_error(path_, fmt::format("metadata '{}'", key), expected,
                    v ? fmt::format("{} {}", gguf_type_name(v->type), gguf_value_str(*v)) : "no such key");
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::string) key_error(key, "a STRING", v);
  return v->s;
}

std::uint64_t GgufFile::get_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_int_type(v->type) || (!is_unsigned_type(v->type) && v->i < 0))
    key_error(key, "a non-negative integer", v);
  return is_unsigned_type(v->type) ? v->u : static_cast<std::uint64_t>(v->i);
}

std::int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_int_type(v->type) ||
      (is_unsigned_type(v->type) &&
       v->u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
    key_error(key, "an integer", v);
  return is_unsigned_type(v->type) ? static_cast<std::int64_t>(v->u) : v->i;
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) key_error(key, "a FLOAT32", v);
  if (v->type == GgufType::float32 || v->type == GgufType::float64) return v->f;
  if (is_int_type(v->type))
    return is_unsigned_type(v->type) ? static_cast<double>(v->u) : static_cast<double>(v->i);
  key_error(key, "a FLOAT32", v);
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::boolean) key_error(key, "a BOOL", v);
  return v->b;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::array || v->elem_type != GgufType::string)
    key_error(key, "an ARRAY of STRING", v);
  return v->strings;
}

std::vector<std::int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::array || !is_int_type(v->elem_type))
    key_error(key, "an ARRAY of integers", v);
  std::vector<std::int64_t> out(static_cast<std::size_t>(v->count));
  for (std::size_t k = 0; k < out.size(); ++k) {
    bool ok;
    out[k] = array_int(*v, k, ok);
    if (!ok)
      throw_input_error(path_, fmt::format("metadata '{}'[{}]", key, k), "a value below 2^63",
                        "a larger UINT64");
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufType::array ||
      !(scalar_size(v->elem_type) > 0 && v->elem_type != GgufType::boolean))
    key_error(key, "an ARRAY of numbers", v);
  std::vector<double> out(static_cast<std::size_t>(v->count));
  for (std::size_t k = 0; k < out.size(); ++k) {
    const std::uint8_t* p = v->raw.data() + k * scalar_size(v->elem_type);
    if (v->elem_type == GgufType::float32)
      out[k] = load<float>(p);
    else if (v->elem_type == GgufType::float64)
      out[k] = load<double>(p);
    else if (v->elem_type == GgufType::uint64)
      out[k] = static_cast<double>(load<std::uint64_t>(p));
    else {
      bool ok;
      out[k] = static_cast<double>(array_int(*v, k, ok));
    }
  }
  return out;
}

std::optional<std::uint64_t> GgufFile::find_uint(std::string_view key) const {
  if (!contains(key)) return std::nullopt;
  return get_uint(key);
}
std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!contains(key)) return std::nullopt;
  return get_bool(key);
}
std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  if (!contains(key)) return std::nullopt;
  return get_string(key);
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor_info(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t)
    throw_input_error(path_, fmt::format("tensor '{}'", name),
                      fmt::format("a tensor of that name (the file has {} tensors)", tensors_.size()),
                      "none");
  return *t;
}

const GgufTensorInfo& GgufFile::expect_tensor(std::string_view name,
                                              const std::vector<std::int64_t>& shape) const {
  const GgufTensorInfo& t = tensor_info(name);
  if (t.shape() != shape)
    throw_input_error(path_, fmt::format("tensor '{}' shape", name), shape_text(shape),
                      shape_text(t.shape()));
  return t;
}

std::span<const std::uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  return bytes_.subspan(static_cast<std::size_t>(data_offset_ + t.offset),
                        static_cast<std::size_t>(t.n_bytes));
}

void GgufFile::dequantize_into(const GgufTensorInfo& t, std::span<float> out) const {
  const GgmlTypeInfo& ti = ggml_type_info(t.type);
  if (!ti.dequantizable) unsupported_type(path_, t.name, ti.name);
  KC_ASSERT(out.size() == t.n_elements, "dequantize_into {}: {} != {}", t.name, out.size(), t.n_elements);
  if (t.n_elements == 0) return;
  kc::dequantize(t.type, tensor_data(t), out, static_cast<std::size_t>(t.row_len()));
}

std::vector<float> GgufFile::dequantize(const GgufTensorInfo& t) const {
  const GgmlTypeInfo& ti = ggml_type_info(t.type);
  if (!ti.dequantizable) unsupported_type(path_, t.name, ti.name);  // before allocating
  std::vector<float> out(static_cast<std::size_t>(t.n_elements));
  dequantize_into(t, out);
  return out;
}

Tensor GgufFile::tensor_f32(std::string_view name) const {
  const GgufTensorInfo& t = tensor_info(name);
  auto buf = std::make_shared<std::vector<float>>(dequantize(t));
  Tensor out;
  out.dtype = DType::float32;
  out.shape = t.shape();
  out.bytes = {reinterpret_cast<const std::uint8_t*>(buf->data()), buf->size() * sizeof(float)};
  out.owner = buf;
  out.origin = fmt::format("{}:{}", path_, t.name);
  return out;
}

std::string gguf_value_str(const GgufValue& v, std::size_t max_items) {
  switch (v.type) {
    case GgufType::string:
      return quoted(v.s);
    case GgufType::boolean:
      return v.b ? "true" : "false";
    case GgufType::float32:
    case GgufType::float64:
      return fmt::format("{}", v.f);
    case GgufType::array: {
      std::string s = fmt::format("[{} × {}", v.count, gguf_type_name(v.elem_type));
      const std::size_t n = std::min<std::size_t>(max_items, static_cast<std::size_t>(v.count));
      for (std::size_t k = 0; k < n; ++k) {
        s += k ? ", " : ": ";
        if (v.elem_type == GgufType::string)
          s += quoted(v.strings[k], 30);
        else if (v.elem_type == GgufType::array)
          s += gguf_value_str(v.items[k], 2);
        else {
          GgufValue e;
          e.type = v.elem_type;
          const std::uint8_t* p = v.raw.data() + k * scalar_size(v.elem_type);
          switch (v.elem_type) {
            case GgufType::float32:
              e.f = load<float>(p);
              break;
            case GgufType::float64:
              e.f = load<double>(p);
              break;
            case GgufType::boolean:
              e.b = *p != 0;
              break;
            case GgufType::uint64:
              e.u = load<std::uint64_t>(p);
              break;
            default: {
              bool ok;
              e.i = array_int(v, k, ok);
              e.u = static_cast<std::uint64_t>(e.i);
            }
          }
          s += gguf_value_str(e);
        }
      }
      if (v.count > n) s += ", …";
      return s + "]";
    }
    default:
      return is_unsigned_type(v.type) ? std::to_string(v.u) : std::to_string(v.i);
  }
}

}  // namespace kc
