#include "model/hf_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/parallel.h"
#include "io/safetensors.h"
#include "model/dequant.h"

namespace kc {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const std::string& path) {
  const std::string text = read_text_file(path, kDataTextCap, "a JSON file");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw_input_error(path, "", "a JSON document", e.what());
  }
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string short_dump(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 60) + "…" : s;
}

}  // namespace

HfCheckpoint HfCheckpoint::open(const std::string& dir) {
  HfCheckpoint ck;
  ck.dir_ = dir;
  ck.config_path_ = (fs::path(dir) / "config.json").string();
  if (!fs::is_directory(dir))
    throw_input_error(dir, "", "a checkpoint folder (config.json + *.safetensors)", "no such folder");
  if (!fs::exists(ck.config_path_))
    throw_input_error(dir, "config.json", "a file config.json in the checkpoint folder", "none");
  ck.config_ = read_json(ck.config_path_);
  if (!ck.config_.is_object())
    throw_input_error(ck.config_path_, "", "a JSON object", ck.config_.type_name());

  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) {
    ck.shards_.push_back(std::make_shared<const SafetensorsFile>(SafetensorsFile::open(single.string())));
    for (const auto& n : ck.shards_[0]->names()) ck.where_.emplace(n, 0);
    return ck;
  }
  if (!fs::exists(index))
    throw_input_error(dir, "weights", "model.safetensors or model.safetensors.index.json", "neither");
  const std::string ipath = index.string();
  const json idx = read_json(ipath);
  if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    throw_input_error(ipath, "weight_map", "an object {tensor name: shard file}",
                      idx.is_object() && idx.contains("weight_map") ? idx["weight_map"].type_name() : "none");
  std::map<std::string, std::size_t> shard_index;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw_input_error(ipath, fmt::format("weight_map[\"{}\"]", it.key()), "a shard file name",
                        short_dump(it.value()));
    const std::string shard = it.value().get<std::string>();
    // Shards live beside the index: a path that leaves the folder is refused.
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == "..")
      throw_input_error(ipath, fmt::format("weight_map[\"{}\"]", it.key()),
                        "a file name in the checkpoint folder", fmt::format("\"{}\"", shard));
    auto [si, fresh] = shard_index.emplace(shard, ck.shards_.size());
    if (fresh) {
      const std::string spath = (fs::path(dir) / shard).string();
      if (!fs::exists(spath))
        throw_input_error(ipath, fmt::format("weight_map[\"{}\"]", it.key()), "an existing shard file",
                          fmt::format("missing {}", spath));
      ck.shards_.push_back(std::make_shared<const SafetensorsFile>(SafetensorsFile::open(spath)));
    }
    if (!ck.shards_[si->second]->contains(it.key()))
      throw_input_error(ipath, fmt::format("weight_map[\"{}\"]", it.key()),
                        fmt::format("a tensor that {} holds", shard), "not in that shard");
    ck.where_.emplace(it.key(), si->second);
  }
  return ck;
}

const json* HfCheckpoint::lookup(std::string_view key) const {
  const json* cur = &config_;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part(
        key.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (!cur->is_object() || !cur->contains(part)) return nullptr;
    cur = &(*cur)[part];
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

void HfCheckpoint::config_error(std::string_view key, std::string_view expected, const json* v) const {
  throw_input_error(config_path_, key, expected, v ? short_dump(*v) : "no such key");
}

bool HfCheckpoint::has(std::string_view key) const {
  const json* v = lookup(key);
  return v && !v->is_null();
}

std::int64_t HfCheckpoint::config_int(std::string_view key) const {
  const json* v = lookup(key);
  if (!v || !v->is_number_integer()) config_error(key, "an integer", v);
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    config_error(key, "an integer below 2^63", v);
  return v->get<std::int64_t>();
}

double HfCheckpoint::config_float(std::string_view key) const {
  const json* v = lookup(key);
  if (!v || !v->is_number()) config_error(key, "a number", v);
  return v->get<double>();
}

std::string HfCheckpoint::config_string(std::string_view key) const {
  const json* v = lookup(key);
  if (!v || !v->is_string()) config_error(key, "a string", v);
  return v->get<std::string>();
}

bool HfCheckpoint::config_bool(std::string_view key) const {
  const json* v = lookup(key);
  if (!v || !v->is_boolean()) config_error(key, "true or false", v);
  return v->get<bool>();
}

std::optional<std::int64_t> HfCheckpoint::find_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return config_int(key);
}

std::optional<double> HfCheckpoint::find_float(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return config_float(key);
}

std::vector<std::string> HfCheckpoint::tensor_names() const {
  std::vector<std::string> v;
  for (const auto& [n, _] : where_) v.push_back(n);
  return v;
}

bool HfCheckpoint::contains(std::string_view name) const { return where_.find(name) != where_.end(); }

const SafetensorsFile& HfCheckpoint::shard_of(std::string_view name) const {
  auto it = where_.find(name);
  if (it == where_.end())
    throw_input_error(dir_, fmt::format("tensor '{}'", name),
                      fmt::format("a tensor of that name (the checkpoint has {} tensors)", where_.size()),
                      "none");
  return *shards_[it->second];
}

Tensor HfCheckpoint::tensor(std::string_view name) const { return shard_of(name).tensor(std::string(name)); }

std::vector<std::int64_t> HfCheckpoint::shape(std::string_view name) const { return tensor(name).shape; }

std::vector<float> HfCheckpoint::tensor_f32(std::string_view name,
                                            const std::vector<std::int64_t>& expect_shape) const {
  const Tensor t = tensor(name);
  const std::string file = shard_of(name).path();
  if (!expect_shape.empty() && t.shape != expect_shape)
    throw_input_error(file, fmt::format("tensor '{}' shape", name), shape_text(expect_shape),
                      shape_text(t.shape));
  GgmlType g;
  switch (t.dtype) {
    case DType::float32:
      g = GgmlType::F32;
      break;
    case DType::bfloat16:
      g = GgmlType::BF16;
      break;
    case DType::float16:
      g = GgmlType::F16;
      break;
    default:
      throw_input_error(file, fmt::format("tensor '{}' dtype", name), "F32, BF16 or F16",
                        dtype_name(t.dtype));
  }
  const std::size_t n = t.bytes.size() / (g == GgmlType::F32 ? 4 : 2);
  std::vector<float> out(n);
  if (n == 0) return out;
  const std::size_t row =
      t.shape.empty() ? 1 : static_cast<std::size_t>(std::max<std::int64_t>(1, t.shape.back()));
  dequantize(g, t.bytes, out, n % row == 0 ? row : n);
  return out;
}

Tensor HfCheckpoint::tensor_f32_tensor(std::string_view name,
                                       const std::vector<std::int64_t>& expect_shape) const {
  auto buf = std::make_shared<std::vector<float>>(tensor_f32(name, expect_shape));
  Tensor out;
  out.dtype = DType::float32;
  out.shape = tensor(name).shape;
  out.bytes = {reinterpret_cast<const std::uint8_t*>(buf->data()), buf->size() * sizeof(float)};
  out.owner = buf;
  out.origin = fmt::format("{}:{}", shard_of(name).path(), name);
  return out;
}

}  // namespace kc
