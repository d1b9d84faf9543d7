// Test helper for tests/py/test_gguf.py: reads a GGUF with kc::GgufFile and prints what it found.
//   kc_gguf_dump FILE                    JSON: version, alignment, metadata, tensor infos
//   kc_gguf_dump FILE --sha256           one line per tensor: NAME TYPE SHA256(f32 little-endian values)
//   kc_gguf_dump FILE --dequant NAME OUT write tensor NAME dequantized to OUT as raw f32
//   kc_gguf_dump --types                 JSON: {name: [id, block_size, type_size, dequantizable]}
// Errors: the kc::Error message on stderr, exit 3.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"
#include "model/gguf.h"

namespace {

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

nlohmann::json value_json(const kc::GgufValue& v) {
  using kc::GgufType;
  switch (v.type) {
    case GgufType::string:
      return std::string(v.s);
    case GgufType::boolean:
      return v.b;
    case GgufType::float32:
    case GgufType::float64:
      return v.f;
    case GgufType::uint8:
    case GgufType::uint16:
    case GgufType::uint32:
    case GgufType::uint64:
      return v.u;
    case GgufType::array: {
      nlohmann::json a = nlohmann::json::array();
      if (v.elem_type == GgufType::string) {
        for (auto s : v.strings) a.push_back(std::string(s));
      } else if (v.elem_type == GgufType::array) {
        for (const auto& it : v.items) a.push_back(value_json(it));
      } else {
        const std::size_t w = v.count ? v.raw.size() / v.count : 0;
        for (std::size_t k = 0; k < v.count; ++k) {  // decode each element as a scalar of elem_type
          kc::GgufValue e;
          e.type = v.elem_type;
          const std::uint8_t* p = v.raw.data() + k * w;
          switch (v.elem_type) {
            case GgufType::uint8:
              e.u = *p;
              break;
            case GgufType::int8:
              e.i = static_cast<std::int8_t>(*p);
              break;
            case GgufType::boolean:
              e.b = *p != 0;
              break;
            case GgufType::uint16:
              e.u = load<std::uint16_t>(p);
              break;
            case GgufType::int16:
              e.i = load<std::int16_t>(p);
              break;
            case GgufType::uint32:
              e.u = load<std::uint32_t>(p);
              break;
            case GgufType::int32:
              e.i = load<std::int32_t>(p);
              break;
            case GgufType::uint64:
              e.u = load<std::uint64_t>(p);
              break;
            case GgufType::int64:
              e.i = load<std::int64_t>(p);
              break;
            case GgufType::float32:
              e.f = load<float>(p);
              break;
            case GgufType::float64:
              e.f = load<double>(p);
              break;
            default:
              break;
          }
          a.push_back(value_json(e));
        }
      }
      return a;
    }
    default:
      return v.i;
  }
}

int run(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--types") {
    nlohmann::json j = nlohmann::json::object();
    for (std::uint32_t id = 0; id < 64; ++id)
      if (const auto* t = kc::ggml_type_info(id))
        j[t->name] = {id, t->block_size, t->type_size, t->dequantizable};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: kc_gguf_dump FILE [--sha256 | --dequant NAME OUT] | --types\n");
    return 2;
  }
  const auto g = kc::GgufFile::open(argv[1]);
  const std::string mode = argc >= 3 ? argv[2] : "";
  if (mode == "--sha256") {
    for (const auto& t : g.tensors()) {
      const auto v = g.dequantize(t);
      std::printf("%s %s %s\n", t.name.c_str(), t.type_name(),
                  kc::sha256_hex({reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * 4}).c_str());
    }
    return 0;
  }
  if (mode == "--dequant" && argc == 5) {
    const auto v = g.dequantize(g.tensor_info(argv[3]));
    std::ofstream(argv[4], std::ios::binary).write(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    return 0;
  }
  nlohmann::json j;
  j["version"] = g.version();
  j["alignment"] = g.alignment();
  j["data_offset"] = g.data_offset();
  nlohmann::json md = nlohmann::json::object();
  for (const auto& [k, v] : g.metadata())
    md[std::string(k)] = {{"type", kc::gguf_type_name(v.type)}, {"value", value_json(v)}};
  j["metadata"] = md;
  nlohmann::json ts = nlohmann::json::array();
  for (const auto& t : g.tensors())
    ts.push_back({{"name", t.name},
                  {"type", t.type_name()},
                  {"ne", t.ne},
                  {"offset", t.offset},
                  {"n_bytes", t.n_bytes}});
  j["tensors"] = ts;
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  }
}
