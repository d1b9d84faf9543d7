// Test driver for tests/py/test_numeric.py: exposes the numeric layer on raw little-endian streams so that
// Python can compare it with ml_dtypes, en_dtypes and numpy.
//
//   kc_numeric_dump decode DTYPE                  all codes (16, 256 or 65536) decoded → f64 stdout
//   kc_numeric_dump encode DTYPE none|clamp       f64 stdin → one uint32 code per value on stdout
//   kc_numeric_dump ulp DTYPE                     f64 stdin → f64 stdout
//   kc_numeric_dump round_mantissa BITS MODE      f64 stdin → f64 stdout; MODE f64 | f32 (scalar float
//                                                 overload) | f32bulk (round_mantissa_inplace)
//   kc_numeric_dump quantize DTYPE none|clamp     f64 stdin (f32 values) → quantize_inplace → f64 stdout
//   kc_numeric_dump decode_block DTYPE COUNT      storage bytes stdin → decode_block → f64 stdout
//   kc_numeric_dump encode_block DTYPE none|clamp f64 stdin → encode_block → storage bytes stdout
//   kc_numeric_dump info DTYPE                    one line: name bits max min_normal min_subnormal descr
//   kc_numeric_dump parse NAME                    canonical name, or exit 3
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "numeric/dtype.h"
#include "numeric/formats.h"

namespace {

std::vector<std::uint8_t> read_stdin() {
  std::vector<std::uint8_t> buf;
  std::uint8_t chunk[1 << 16];
  std::size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0) buf.insert(buf.end(), chunk, chunk + n);
  return buf;
}

std::vector<double> read_f64() {
  auto b = read_stdin();
  if (b.size() % 8) kc::fail("stdin: length: expected a multiple of 8 bytes, got {}", b.size());
  std::vector<double> v(b.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

template <typename T>
void write(const std::vector<T>& v) {
  std::fwrite(v.data(), sizeof(T), v.size(), stdout);
}

kc::DType dtype_arg(const char* s) {
  auto d = kc::parse_dtype(s);
  if (!d) kc::throw_input_error("argv", "DTYPE", kc::dtype_names_list(), s);
  return *d;
}

kc::Saturation sat_arg(const char* s) {
  if (std::strcmp(s, "none") == 0) return kc::Saturation::none;
  if (std::strcmp(s, "clamp") == 0) return kc::Saturation::clamp;
  kc::throw_input_error("argv", "SAT", "none or clamp", s);
}

int run(int argc, char** argv) {
  if (argc < 3) kc::fail("usage: kc_numeric_dump COMMAND ARGS… (see the source)");
  const std::string cmd = argv[1];
  if (cmd == "parse") {
    auto d = kc::parse_dtype(argv[2]);
    if (!d) return kc::kExitBadInput;
    std::printf("%s\n", kc::dtype_name(*d));
    return 0;
  }
  if (cmd == "round_mantissa") {
    if (argc < 4) kc::fail("usage: round_mantissa BITS f64|f32|f32bulk");
    const int bits = std::stoi(argv[2]);
    const std::string mode = argv[3];
    auto v = read_f64();
    if (mode == "f64") {
      for (double& x : v) x = kc::round_mantissa(x, bits);
    } else if (mode == "f32") {
      for (double& x : v) x = kc::round_mantissa(static_cast<float>(x), bits);
    } else if (mode == "f32bulk") {
      std::vector<float> f(v.begin(), v.end());
      kc::round_mantissa_inplace(f.data(), f.size(), bits);
      v.assign(f.begin(), f.end());
    } else {
      kc::throw_input_error("argv", "MODE", "f64, f32 or f32bulk", mode);
    }
    write(v);
    return 0;
  }
  const kc::DType d = dtype_arg(argv[2]);
  const int bits = kc::dtype_info(d).bits;
  if (cmd == "info") {
    const char* descr = kc::dtype_info(d).numpy_descr;
    std::printf("%s %d %.17g %.17g %.17g %s\n", kc::dtype_name(d), bits, kc::max_finite(d), kc::min_normal(d),
                kc::min_subnormal(d), descr ? descr : "-");
    return 0;
  }
  if (cmd == "decode") {
    std::vector<double> out;
    if (bits == 4 || bits == 8) {
      for (int c = 0; c < (1 << bits); ++c) out.push_back(kc::decode8(d, static_cast<std::uint8_t>(c)));
    } else if (d == kc::DType::float16) {
      for (int c = 0; c < 65536; ++c) out.push_back(kc::f16_to_f32(static_cast<std::uint16_t>(c)));
    } else if (d == kc::DType::bfloat16) {
      for (int c = 0; c < 65536; ++c) out.push_back(kc::bf16_to_f32(static_cast<std::uint16_t>(c)));
    } else {
      kc::throw_input_error("argv", "DTYPE", "a 4, 8 or 16-bit float dtype", argv[2]);
    }
    write(out);
    return 0;
  }
  if (cmd == "ulp") {
    auto v = read_f64();
    for (double& x : v) x = kc::ulp(d, x);
    write(v);
    return 0;
  }
  if (argc < 4) kc::fail("usage: kc_numeric_dump {} DTYPE ARG", cmd);
  if (cmd == "encode") {
    const kc::Saturation s = sat_arg(argv[3]);
    auto v = read_f64();
    std::vector<std::uint32_t> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const double x = v[i];
      std::uint32_t c;
      if (bits == 4 || bits == 8) {
        c = kc::encode8(d, x, s);
      } else if (d == kc::DType::float16) {
        c = kc::f32_to_f16(x, s);
      } else if (d == kc::DType::bfloat16) {
        c = kc::f32_to_bf16(x, s);
      } else if (d == kc::DType::hifloat32) {
        const float f = kc::to_hifloat32(x);
        std::memcpy(&c, &f, 4);
      } else {
        kc::throw_input_error("argv", "DTYPE", "a float dtype of at most 32 bits", argv[2]);
      }
      out[i] = c;
    }
    write(out);
    return 0;
  }
  if (cmd == "quantize") {
    const kc::Saturation s = sat_arg(argv[3]);
    auto v = read_f64();
    std::vector<float> f(v.begin(), v.end());
    kc::quantize_inplace(d, f.data(), f.size(), s);
    v.assign(f.begin(), f.end());
    write(v);
    return 0;
  }
  if (cmd == "decode_block") {
    const std::size_t count = std::stoull(argv[3]);
    auto b = read_stdin();
    if (b.size() != kc::storage_bytes(d, count))
      kc::fail("stdin: length: expected {} bytes for {} x {}, got {}", kc::storage_bytes(d, count), count,
               kc::dtype_name(d), b.size());
    std::vector<double> out(kc::is_complex(d) ? 2 * count : count);
    if (kc::is_complex(d))
      kc::decode_complex_block(d, b, 0, count, out.data());
    else
      kc::decode_block(d, b, 0, count, out.data());
    write(out);
    return 0;
  }
  if (cmd == "encode_block") {
    const kc::Saturation s = sat_arg(argv[3]);
    auto v = read_f64();
    std::vector<std::uint8_t> out(kc::storage_bytes(d, v.size()));
    kc::encode_block(d, v.data(), v.size(), out.data(), s);
    write(out);
    return 0;
  }
  kc::fail(
      "argv: COMMAND: expected decode, encode, ulp, round_mantissa, quantize, decode_block, "
      "encode_block, info or parse, got {}",
      cmd);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kc::Error& e) {
    std::fprintf(stderr, "kc_numeric_dump: error: %s\n", e.what());
    return kc::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kc_numeric_dump: error: %s\n", e.what());
    return kc::kExitBadInput;
  }
}
