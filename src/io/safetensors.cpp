#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_set>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/hash.h"
#include "io/io_internal.h"

namespace kc {

namespace {

using ojson = nlohmann::ordered_json;

// The stock loader's cap (safetensors/src/tensor.rs MAX_HEADER_SIZE).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests three levels deep ({name: {shape: [..]}}); deeper input is rejected while parsing.
constexpr int kMaxJsonDepth = 8;

struct CodeEntry {
  DType dtype;
  const char* code;
};
// Stock codes first, then our "X_" extensions (unknown to stock loaders, which refuse them).
constexpr std::array<CodeEntry, kDTypeCount> kCodes{{
    {DType::boolean, "BOOL"},
    {DType::uint8, "U8"},
    {DType::int8, "I8"},
    {DType::int16, "I16"},
    {DType::uint16, "U16"},
    {DType::int32, "I32"},
    {DType::uint32, "U32"},
    {DType::int64, "I64"},
    {DType::uint64, "U64"},
    {DType::float16, "F16"},
    {DType::bfloat16, "BF16"},
    {DType::float32, "F32"},
    {DType::float64, "F64"},
    {DType::float8_e4m3fn, "F8_E4M3"},
    {DType::float8_e5m2, "F8_E5M2"},
    {DType::float8_e8m0, "F8_E8M0"},
    {DType::float4_e2m1, "F4"},
    {DType::complex64, "C64"},
    {DType::hifloat8, "X_HIF8"},
    {DType::hifloat32, "X_HIF32"},
    {DType::int4, "X_I4"},
    {DType::complex32, "X_C32"},
    {DType::complex128, "X_C128"},
}};

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | p[i];
  return n;
}

std::string json_kind(const ojson& j) {
  if (j.is_number_unsigned()) return fmt::format("{}", j.get<std::uint64_t>());
  if (j.is_number()) return fmt::format("{}", j.dump());
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  if (j.is_object()) return "an object";
  if (j.is_boolean()) return "a boolean";
  return "null";
}

std::uint64_t get_u64(const ojson& j, const std::string& where, const std::string& field) {
  if (!j.is_number_unsigned()) throw_input_error(where, field, "a non-negative integer", json_kind(j));
  return j.get<std::uint64_t>();
}

}  // namespace

std::optional<DType> dtype_from_safetensors(std::string_view code) {
  for (const auto& e : kCodes)
    if (code == e.code) return e.dtype;
  return std::nullopt;
}

const char* safetensors_code(DType d) {
  for (const auto& e : kCodes)
    if (e.dtype == d) return e.code;
  KC_ASSERT(false, "no safetensors code for dtype {}", static_cast<int>(d));
  return nullptr;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto file = MappedFile::open(path);
  return parse(file->bytes(), path, file);
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::uint8_t> file, const std::string& path,
                                       std::shared_ptr<const void> owner) {
  if (file.size() < 8)
    throw_input_error(path, "header length", "an 8-byte little-endian length (safetensors)",
                      fmt::format("a file of {} bytes", file.size()));
  const std::uint64_t n = read_u64_le(file.data());
  if (n > kMaxHeaderBytes)
    throw_input_error(path, "header length", fmt::format("at most {} bytes", kMaxHeaderBytes),
                      fmt::format("{} bytes", n));
  if (n > file.size() - 8)
    throw_input_error(path, "header length",
                      fmt::format("at most {} bytes (the file has {} bytes)", file.size() - 8, file.size()),
                      fmt::format("{} bytes", n));
  const std::uint8_t* hbegin = file.data() + 8;
  const std::span<const std::uint8_t> data = file.subspan(8 + n);

  // Parse with a callback that rejects duplicate keys (JSON allows them; a duplicated tensor name or
  // field would make the file ambiguous) and deep nesting (no valid header needs it).
  std::vector<std::unordered_set<std::string>> keys;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, ojson& parsed) -> bool {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      if (depth >= kMaxJsonDepth)
        throw_input_error(path, "header", fmt::format("JSON nested at most {} levels deep", kMaxJsonDepth),
                          "deeper nesting");
      if (ev == E::object_start) keys.emplace_back();
    } else if (ev == E::object_end) {
      keys.pop_back();
    } else if (ev == E::key) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(k).second)
        throw_input_error(path, "header", "unique keys in every JSON object",
                          fmt::format("key '{}' twice", k));
    }
    return true;
  };
  // As the stock loader (serde_json): the JSON may be followed by whitespace only (its writer pads with
  // spaces). nlohmann's parser stops at a NUL byte, so a NUL with anything after it is refused here.
  if (const void* nul = std::memchr(hbegin, 0, n))
    throw_input_error(path, "header",
                      "a JSON object followed by spaces only (the stock safetensors loader refuses anything else)",
                      fmt::format("a NUL byte at header offset {}", static_cast<const std::uint8_t*>(nul) - hbegin));
  ojson header;
  try {
    header = ojson::parse(hbegin, hbegin + n, cb);
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(path, "header", "a JSON object", fmt::format("invalid JSON ({})", e.what()));
  }
  if (!header.is_object()) throw_input_error(path, "header", "a JSON object", json_kind(header));

  SafetensorsFile st;
  st.path_ = path;
  st.owner_ = owner;
  struct Range {
    std::uint64_t begin, end;
    std::size_t index;  // into names_
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object())
        throw_input_error(path, "__metadata__", "an object of strings", json_kind(entry));
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          throw_input_error(path, fmt::format("__metadata__.{}", k), "a string", json_kind(v));
        st.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("{}: tensor '{}'", path, name);
    if (!entry.is_object())
      throw_input_error(where, "", "an object {dtype, shape, data_offsets}", json_kind(entry));
    for (const char* f : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(f)) throw_input_error(where, f, "present", "missing");

    const auto& jd = entry["dtype"];
    if (!jd.is_string()) throw_input_error(where, "dtype", "a string", json_kind(jd));
    const auto& code = jd.get_ref<const std::string&>();
    auto dtype = dtype_from_safetensors(code);
    if (!dtype) {
      std::string known;
      for (const auto& e : kCodes) known += fmt::format("{}{}", known.empty() ? "" : " ", e.code);
      throw_input_error(where, "dtype", fmt::format("one of {}", known), fmt::format("'{}'", code));
    }

    const auto& js = entry["shape"];
    if (!js.is_array()) throw_input_error(where, "shape", "an array of non-negative integers", json_kind(js));
    std::vector<std::int64_t> shape;
    for (const auto& d : js) {
      const std::uint64_t v = get_u64(d, where, "shape");
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw_input_error(where, "shape", "dimensions below 2^63", fmt::format("{}", v));
      shape.push_back(static_cast<std::int64_t>(v));
    }
    auto numel = io_detail::checked_numel(shape);
    auto size = numel ? io_detail::checked_storage_bytes(*dtype, *numel) : std::nullopt;
    if (!size)
      throw_input_error(where, "shape", "a shape whose byte size fits in 64 bits",
                        io_detail::shape_to_string(shape));

    const auto& jo = entry["data_offsets"];
    if (!jo.is_array() || jo.size() != 2)
      throw_input_error(where, "data_offsets", "[begin, end]", jo.is_array() ? jo.dump() : json_kind(jo));
    const std::uint64_t b = get_u64(jo[0], where, "data_offsets"), e = get_u64(jo[1], where, "data_offsets");
    if (b > e || e > data.size())
      throw_input_error(where, "data_offsets",
                        fmt::format("0 <= begin <= end <= {} (the size of the data region)", data.size()),
                        fmt::format("[{}, {}]", b, e));
    if (e - b != *size)
      throw_input_error(where, "data_offsets",
                        fmt::format("end - begin = {} bytes ({} {} elements, shape {})", *size, *numel, code,
                                    io_detail::shape_to_string(shape)),
                        fmt::format("[{}, {}], {} bytes", b, e, e - b));

    Tensor t;
    t.dtype = *dtype;
    t.shape = std::move(shape);
    t.bytes = data.subspan(b, e - b);
    t.owner = owner;
    t.origin = fmt::format("{}:{}", path, name);
    st.names_.push_back(name);
    st.tensors_.emplace(name, std::move(t));
    if (e > b) ranges.push_back({b, e, st.names_.size() - 1});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end)
      throw_input_error(fmt::format("{}: tensor '{}'", path, st.names_[ranges[i].index]), "data_offsets",
                        fmt::format("no overlap with tensor '{}' [{}, {}]", st.names_[ranges[i - 1].index],
                                    ranges[i - 1].begin, ranges[i - 1].end),
                        fmt::format("[{}, {}]", ranges[i].begin, ranges[i].end));
  }
  // As strict as the stock loader: the tensors cover the data region exactly (no gap, no trailing bytes).
  std::uint64_t covered = 0;
  for (const Range& r : ranges) {
    if (r.begin != covered)
      throw_input_error(fmt::format("{}: tensor '{}'", path, st.names_[r.index]), "data_offsets",
                        fmt::format("to begin at {}, where the previous tensor ends (the stock loader refuses gaps)",
                                    covered),
                        fmt::format("[{}, {}]", r.begin, r.end));
    covered = r.end;
  }
  if (covered != data.size())
    throw_input_error(path, "file size",
                      fmt::format("{} bytes (header and tensors; the stock loader refuses trailing bytes)",
                                  8 + n + covered),
                      fmt::format("{} bytes", file.size()));
  return st;
}

bool SafetensorsFile::contains(const std::string& name) const { return tensors_.count(name) != 0; }

Tensor SafetensorsFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string list;
    for (std::size_t i = 0; i < names_.size() && i < 8; ++i) list += (i ? ", " : "") + names_[i];
    if (names_.size() > 8) list += ", …";
    throw_input_error(path_, "tensor name",
                      fmt::format("one of {} ({} tensors)", list.empty() ? "none" : list, names_.size()),
                      fmt::format("'{}'", name));
  }
  return it->second;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  ojson header = ojson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> seen;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__" || !seen.insert(name).second)
      throw_input_error(path, "tensor name", "a unique non-empty name other than __metadata__",
                        fmt::format("'{}'", name));
    const std::size_t n = t.numel();
    KC_ASSERT(t.bytes.size() == storage_bytes(t.dtype, n), "{}: {} bytes for {} elements", t.origin,
              t.bytes.size(), n);
    if (t.dtype == DType::float4_e2m1 && n % 2)
      throw_input_error(
          fmt::format("{}: tensor '{}'", path, name), "shape",
          "an even element count (safetensors F4 stores whole bytes; stock loaders refuse odd ones)",
          fmt::format("{} elements", n));
    header[name] = {{"dtype", safetensors_code(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(path, "tensor names and metadata", "valid UTF-8", e.what());
  }
  text.resize((text.size() + 7) / 8 * 8, ' ');  // data starts 8-byte aligned (the stock writer does the same)
  std::array<std::uint8_t, 8> len{};
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(text.size() >> (8 * i));

  AtomicFile out(path);
  out.write(len);
  out.write(text);
  for (const auto& nt : tensors) out.write(nt.tensor.bytes);
  out.commit();
}

std::string content_checksum(const std::map<std::string, std::string>& metadata,
                             const std::vector<NamedTensor>& tensors) {
  Xxh64 h;
  auto put = [&h](std::span<const std::uint8_t> b) {
    std::uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(b.size()) >> (8 * i));
    h.update(len);
    h.update(b);
  };
  auto put_str = [&put](std::string_view s) { put({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}); };
  for (auto& [k, v] : metadata)
    if (k != "checksum") put_str(k), put_str(v);
  std::vector<const NamedTensor*> order;
  for (auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (auto* t : order) {
    put_str(t->name);
    put_str(safetensors_code(t->tensor.dtype));
    put_str(t->tensor.shape_str());
    put(t->tensor.bytes);
  }
  return "xxh3:" + h.hex();
}

void write_sealed_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                              std::map<std::string, std::string> metadata) {
  metadata["checksum"] = content_checksum(metadata, tensors);
  write_safetensors(path, tensors, metadata);
}

void verify_sealed(const SafetensorsFile& f) {
  std::vector<NamedTensor> ts;
  for (auto& n : f.names()) ts.push_back({n, f.tensor(n)});
  const std::string want = content_checksum(f.metadata(), ts);
  auto it = f.metadata().find("checksum");
  if (it == f.metadata().end() || it->second != want)
    throw_input_error(f.path(), "metadata checksum", want,
                      it == f.metadata().end()
                          ? std::string("nothing")
                          : it->second.substr(0, 40) + " (the file was changed or is damaged)");
}

}  // namespace kc
