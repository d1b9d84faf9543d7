// Test helper for tests/py/test_io.py: reads tensors through kc::load_tensor and writes them back.
//
//   kc_tensor_dump info SPEC [DTYPE [SHAPE]]          prints "dtype=… shape=[…] numel=… bytes=… origin=…"
//   kc_tensor_dump f64 SPEC OUT.npy [DTYPE [SHAPE]]   values decoded to float64 (complex → complex128 pairs)
//   kc_tensor_dump npy SPEC OUT.npy [DTYPE [SHAPE]]   same dtype, written with write_npy
//   kc_tensor_dump safetensors OUT [--meta K=V]… NAME=SPEC[@DTYPE[@SHAPE]]…
//
// DTYPE/SHAPE describe raw files and resolve npy void types ("-" = not given). Errors: message on stderr,
// exit code 3.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/tensor.h"
#include "numeric/formats.h"

namespace {

kc::RawLayout layout(const std::string& dtype, const std::string& shape) {
  kc::RawLayout raw;
  if (!dtype.empty() && dtype != "-") {
    raw.dtype = kc::parse_dtype(dtype);
    if (!raw.dtype) kc::throw_input_error("kc_tensor_dump", "dtype", kc::dtype_names_list(), dtype);
  }
  if (!shape.empty() && shape != "-") raw.shape = kc::parse_shape(shape, "kc_tensor_dump");
  return raw;
}

kc::Tensor to_f64(const kc::Tensor& t) {
  const std::size_t n = t.numel();
  const bool cplx = kc::is_complex(t.dtype);
  std::vector<std::uint8_t> out((cplx ? 2 : 1) * n * sizeof(double));
  auto* d = reinterpret_cast<double*>(out.data());
  if (cplx)
    kc::decode_complex_block(t.dtype, t.bytes, 0, n, d);
  else
    kc::decode_block(t.dtype, t.bytes, 0, n, d);
  return kc::make_tensor(cplx ? kc::DType::complex128 : kc::DType::float64, t.shape, std::move(out),
                         t.origin);
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: kc_tensor_dump info|f64|npy|safetensors …\n");
    return 2;
  }
  const std::string mode = argv[1];
  auto arg = [&](int i) { return i < argc ? std::string(argv[i]) : std::string(); };
  if (mode == "info") {
    kc::Tensor t = kc::load_tensor(argv[2], layout(arg(3), arg(4)));
    std::printf("dtype=%s shape=%s numel=%zu bytes=%zu origin=%s\n", kc::dtype_name(t.dtype),
                t.shape_str().c_str(), t.numel(), t.bytes.size(), t.origin.c_str());
    return 0;
  }
  if (mode == "f64" || mode == "npy") {
    if (argc < 4) return 2;
    kc::Tensor t = kc::load_tensor(argv[2], layout(arg(4), arg(5)));
    kc::write_npy(argv[3], mode == "f64" ? to_f64(t) : t);
    return 0;
  }
  if (mode == "safetensors") {
    std::vector<kc::NamedTensor> ts;
    std::map<std::string, std::string> meta;
    for (int i = 3; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--meta" && i + 1 < argc) {
        std::string kv = argv[++i];
        auto eq = kv.find('=');
        meta[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
        continue;
      }
      auto eq = a.find('=');
      if (eq == std::string::npos) return 2;
      std::string spec = a.substr(eq + 1), dtype, shape;
      if (auto at = spec.find('@'); at != std::string::npos) {
        dtype = spec.substr(at + 1);
        spec.resize(at);
        if (auto at2 = dtype.find('@'); at2 != std::string::npos) {
          shape = dtype.substr(at2 + 1);
          dtype.resize(at2);
        }
      }
      ts.push_back({a.substr(0, eq), kc::load_tensor(spec, layout(dtype, shape))});
    }
    kc::write_safetensors(argv[2], ts, meta);
    return 0;
  }
  std::fprintf(stderr, "kc_tensor_dump: unknown mode %s\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_tensor_dump: error: %s\n", e.what());
    return kc::kExitBadInput;
  }
}
