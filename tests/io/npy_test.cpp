#include "io/npy.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace kc {
namespace {

using test::expect_error;

// An .npy image with the given header dict (padded with spaces and '\n' to 64 bytes like numpy) and data.
std::string npy_image(std::string dict, const std::string& data, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.resize(total - prefix - 1, ' ');
  dict += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) s += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
  return s + dict + data;
}

std::span<const std::uint8_t> span_of(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

Tensor parse(const std::string& image, std::optional<DType> hint = std::nullopt) {
  return parse_npy(span_of(image), "t.npy", hint);
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

TEST(Npy, RoundTripEveryDtypeAndShape) {
  test::TmpDir tmp;
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {1}, {7}, {2, 3}, {3, 1, 5}, {2, 0, 4}};
  std::uint32_t seed = 1;
  for (DType d : test::all_dtypes()) {
    for (const auto& shape : shapes) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + test::random_tensor(d, shape, 0).shape_str());
      Tensor t = test::random_tensor(d, shape, seed++);
      const std::string path = tmp.path("x.npy");
      write_npy(path, t);
      // Types numpy has natively need no hint; the others are void types that need one.
      const bool native = dtype_info(d).numpy_descr != nullptr;
      Tensor r = read_npy(path, native ? std::nullopt : std::optional<DType>(d));
      EXPECT_EQ(r.dtype, d);
      EXPECT_EQ(r.shape, shape);
      EXPECT_EQ(test::bytes_of(r), test::bytes_of(t));
      EXPECT_EQ(r.origin, path);
      const std::string file = test::read_bytes(path);
      const std::size_t data = is_packed4(d) ? t.numel() : t.bytes.size();  // npy: 4-bit types one per byte
      EXPECT_EQ((file.size() - data) % 64, 0u);
      if (!native) expect_error([&] { read_npy(path); }, {path, "descr", "pass --dtype"});
    }
  }
}

TEST(Npy, HeaderIsByteIdenticalToNumpys) {
  test::TmpDir tmp;
  // np.save(f, np.zeros((2, 3), np.float32)) writes exactly this 128-byte header.
  std::string expect = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expect.resize(127, ' ');
  expect += '\n';
  write_npy(tmp.path("a.npy"), test::random_tensor(DType::float32, {2, 3}, 1));
  EXPECT_EQ(test::read_bytes(tmp.path("a.npy")).substr(0, 128), expect);
  // One-dimensional shapes are written as Python 1-tuples, scalars as ().
  write_npy(tmp.path("b.npy"), test::random_tensor(DType::bfloat16, {4}, 1));
  EXPECT_NE(
      test::read_bytes(tmp.path("b.npy")).find("{'descr': '|V2', 'fortran_order': False, 'shape': (4,), }"),
      std::string::npos);
  write_npy(tmp.path("c.npy"), test::random_tensor(DType::float64, {}, 1));
  EXPECT_NE(test::read_bytes(tmp.path("c.npy")).find("'shape': (), }"), std::string::npos);
}

TEST(Npy, ReadsEveryNumpyDescr) {
  const std::pair<const char*, DType> cases[] = {
      {"<f8", DType::float64},   {"<f4", DType::float32},     {"<f2", DType::float16},
      {"|i1", DType::int8},      {"<i2", DType::int16},       {"<i4", DType::int32},
      {"<i8", DType::int64},     {"|u1", DType::uint8},       {"<u2", DType::uint16},
      {"<u4", DType::uint32},    {"<u8", DType::uint64},      {"|b1", DType::boolean},
      {"<c8", DType::complex64}, {"<c16", DType::complex128}, {"<f1", DType::float8_e5m2},
      {"|f4", DType::float32},
  };
  for (const auto& [descr, d] : cases) {
    const std::size_t item = dtype_info(d).bits / 8;
    Tensor t = parse(npy_image(dict(descr, "(3,)"), std::string(3 * item, '\x01')));
    EXPECT_EQ(t.dtype, d) << descr;
    EXPECT_EQ(t.bytes.size(), 3 * item) << descr;
  }
}

TEST(Npy, VoidTypesNeedAMatchingHint) {
  const std::string img = npy_image(dict("<V2", "(2,)"), std::string("\x80\x3f\x00\x40", 4));
  expect_error([&] { parse(img); }, {"t.npy: descr: expected", "pass --dtype", "got '<V2'"});
  Tensor t = parse(img, DType::bfloat16);
  EXPECT_EQ(t.dtype, DType::bfloat16);
  EXPECT_EQ(t.shape, std::vector<std::int64_t>{2});
  expect_error([&] { parse(img, DType::float8_e4m3fn); },
               {"t.npy: descr", "1 bytes per element for float8_e4m3fn"});
  // numpy names its own types ('<f2'): a void type given one of them is another type's bits.
  expect_error([&] { parse(img, DType::float16); }, {"t.npy: descr: expected '<f2' for float16", "got '<V2'"});
  expect_error([&] { parse(img, DType::int16); }, {"expected '<i2' for int16"});
  // A native descr with a different hint is refused, except hifloat32 over '<f4' (same bit pattern).
  const std::string f4 = npy_image(dict("<f4", "(1,)"), std::string(4, '\0'));
  EXPECT_EQ(parse(f4, DType::hifloat32).dtype, DType::hifloat32);
  expect_error([&] { parse(f4, DType::int32); }, {"t.npy: descr", "dtype given (int32)", "'<f4' (float32)"});
  // ml_dtypes complex32 is '<W4' (shared with bcomplex32): only with the complex32 hint.
  const std::string w4 = npy_image(dict("<W4", "(1,)"), std::string(4, '\0'));
  expect_error([&] { parse(w4); }, {"pass --dtype"});
  expect_error([&] { parse(w4, DType::float32); }, {"complex32"});
  EXPECT_EQ(parse(w4, DType::complex32).dtype, DType::complex32);
  // ml_dtypes >= 0.7 writes complex32 as '<c4' (kind 'c', two binary16 parts): read without a hint.
  const std::string c4 = npy_image(dict("<c4", "(1,)"), std::string("\x00\x3c\x00\xc0", 4));  // 1 - 2j
  EXPECT_EQ(parse(c4).dtype, DType::complex32);
  EXPECT_EQ(parse(c4, DType::complex32).dtype, DType::complex32);
  expect_error([&] { parse(c4, DType::float32); }, {"t.npy: descr", "dtype given (float32)", "'<c4'"});
  expect_error([&] { parse(npy_image(dict("<f1", "(1,)"), "x"), DType::hifloat8); }, {"float8_e5m2"});
}

TEST(Npy, FourBitTypesArePackedFromOnePerByte) {
  // ml_dtypes stores int4/float4_e2m1fn one per byte (code in the low nibble; the high nibble is ignored).
  const std::string img = npy_image(dict("<V1", "(3,)"), std::string("\x0F\xF1\x08", 3));
  for (DType d : {DType::int4, DType::float4_e2m1}) {
    Tensor t = parse(img, d);
    EXPECT_EQ(t.dtype, d);
    EXPECT_EQ(t.numel(), 3u);
    ASSERT_EQ(t.bytes.size(), 2u);
    EXPECT_EQ(t.bytes[0], 0x1F);
    EXPECT_EQ(t.bytes[1], 0x08);
    EXPECT_TRUE(t.owner);  // the packed copy is owned by the tensor
  }
}

TEST(Npy, Versions2And3AndPython2Longs) {
  for (int major : {2, 3}) {
    Tensor t = parse(npy_image(dict("<i2", "(2, 2)"), std::string(8, '\x02'), major));
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 2}));
  }
  Tensor t =
      parse(npy_image("{\"descr\":\"<i2\",\"fortran_order\":False,\"shape\":(2L,3L)}", std::string(12, 'a')));
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
}

TEST(Npy, LongDataIsAcceptedShortIsNot) {
  Tensor t = parse(npy_image(dict("<f4", "(2,)"), std::string(9, '\0')));
  EXPECT_EQ(t.bytes.size(), 8u);
  expect_error([&] { parse(npy_image(dict("<f4", "(2, 3)"), std::string(23, '\0'))); },
               {"t.npy: data: expected 24 bytes after the 128-byte header (6 elements of <f4, shape [2, 3]), "
                "got 23 bytes"});
}

TEST(Npy, FortranOrderIsRefusedUnlessTheLayoutIsTheSame) {
  expect_error([&] { parse(npy_image(dict("<f8", "(2, 3)", "True"), std::string(48, '\0'))); },
               {"t.npy: fortran_order: expected False (C order", "got True"});
  EXPECT_EQ(parse(npy_image(dict("<f8", "(1, 3)", "True"), std::string(24, '\0'))).numel(), 3u);
}

TEST(Npy, BigEndianIsRefused) {
  expect_error([&] { parse(npy_image(dict(">f4", "(1,)"), std::string(4, '\0'))); },
               {"t.npy: descr", "little-endian", "big-endian '>f4'"});
  EXPECT_EQ(parse(npy_image(dict(">i1", "(1,)"), "a")).dtype, DType::int8);  // one byte: no order
}

TEST(Npy, MalformedPreambles) {
  expect_error([&] { parse("\x93NUMP"); }, {"t.npy: magic: expected \\x93NUMPY", "a file of 5 bytes"});
  expect_error([&] { parse("PK\x03\x04xxxxxxxxxx"); }, {"t.npy: magic", "got 0x504b03047878"});
  std::string v4 = npy_image(dict("<f4", "(1,)"), std::string(4, '\0'));
  v4[6] = 4;
  expect_error([&] { parse(v4); }, {"t.npy: version: expected 1.0, 2.0 or 3.0, got 4.0"});
  std::string longhdr = npy_image(dict("<f4", "(1,)"), "");
  longhdr[8] = '\xff';
  expect_error([&] { parse(longhdr); },
               {"t.npy: header length: expected at most 118 bytes (the file has 128 bytes), got 255 bytes"});
  expect_error([&] { parse(std::string("\x93NUMPY\x02\x00\x00\x00", 10)); },
               {"t.npy: header length", "4 bytes"});
}

TEST(Npy, MalformedDicts) {
  const std::pair<std::string, std::string> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "t.npy: shape: expected present, got missing"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "only the keys"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
       "t.npy: descr: expected the key once"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", "t.npy: shape: expected a tuple like (3,)"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "t.npy: header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "only spaces after the dict"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}",
       "t.npy: descr: expected a simple type"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (01,)}", "without leading zeros"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "'('"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "dimensions below 2^63"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}",
       "t.npy: shape: expected a shape whose byte size fits in 64 bits, got [4294967296, 4294967296, 16]"},
      {"{'descr': '<x4', 'fortran_order': False, 'shape': (1,)}", "t.npy: descr: expected one of <f8"},
      {"{'descr': '<f', 'fortran_order': False, 'shape': (1,)}",
       "t.npy: descr: expected a numpy type string"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", "without escapes"},
      {"['descr']", "'{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", "',' or '}'"},
  };
  for (const auto& [d, msg] : cases) {
    SCOPED_TRACE(d);
    expect_error([&] { parse(npy_image(d, std::string(64, '\0'))); }, {msg});
  }
}

TEST(Npy, WritesV2WhenTheHeaderIsHuge) {
  test::TmpDir tmp;
  // 30000 dimensions of 1 make a header longer than a u16 length allows.
  std::vector<std::int64_t> shape(30000, 1);
  Tensor t = test::random_tensor(DType::int16, shape, 3);
  write_npy(tmp.path("big.npy"), t);
  const std::string f = test::read_bytes(tmp.path("big.npy"));
  EXPECT_EQ(f[6], 2);
  Tensor r = read_npy(tmp.path("big.npy"));
  EXPECT_EQ(r.shape, shape);
  EXPECT_EQ(test::bytes_of(r), test::bytes_of(t));
}

}  // namespace
}  // namespace kc
