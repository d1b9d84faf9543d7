#include "io/tensor.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/npy.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "numeric/formats.h"

namespace kc {
namespace {

using test::expect_error;
using Shape = std::vector<std::int64_t>;

TEST(Tensor, NumelAndShapeStr) {
  Tensor t = test::random_tensor(DType::float32, {2, 3, 4}, 1);
  EXPECT_EQ(t.numel(), 24u);
  EXPECT_EQ(t.shape_str(), "[2, 3, 4]");
  Tensor s = test::random_tensor(DType::float32, {}, 1);
  EXPECT_EQ(s.numel(), 1u);
  EXPECT_EQ(s.shape_str(), "[]");
  EXPECT_EQ(test::random_tensor(DType::int4, {5, 0}, 1).numel(), 0u);
  Tensor p = test::random_tensor(DType::int4, {5}, 1);
  EXPECT_EQ(p.bytes.size(), 3u);
}

TEST(Tensor, MakeTensorF64EncodesWithTheFormatCodecs) {
  const double v[] = {1.0, -2.5, 0.1};
  Tensor t = make_tensor_f64(DType::float32, {3}, v, "<gen>");
  ASSERT_EQ(t.bytes.size(), 12u);
  float f[3];
  std::memcpy(f, t.bytes.data(), 12);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.5f);
  EXPECT_EQ(f[2], 0.1f);
  EXPECT_EQ(t.origin, "<gen>");
  // bfloat16 of 1.0 is 0x3F80; of -2.5 is 0xC020.
  Tensor b = make_tensor_f64(DType::bfloat16, {2}, std::span<const double>(v, 2), "<gen>");
  EXPECT_EQ(b.bytes[0] | (b.bytes[1] << 8), 0x3F80);
  EXPECT_EQ(b.bytes[2] | (b.bytes[3] << 8), 0xC020);
  // Complex types take (re, im) pairs.
  const double c[] = {1.0, -2.5};
  Tensor z = make_tensor_f64(DType::complex64, {1}, c, "<gen>");
  std::memcpy(f, z.bytes.data(), 8);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -2.5f);
  // int4 packs two per byte, low nibble first: 1 → 0x1, -2 → 0xE.
  const double q[] = {1, -2, 7};
  Tensor i4 = make_tensor_f64(DType::int4, {3}, q, "<gen>");
  ASSERT_EQ(i4.bytes.size(), 2u);
  EXPECT_EQ(i4.bytes[0], 0xE1);
  EXPECT_EQ(i4.bytes[1] & 0x0F, 0x7);
}

TEST(Tensor, ParseShape) {
  EXPECT_EQ(parse_shape("2,3,4", "--shape"), (Shape{2, 3, 4}));
  EXPECT_EQ(parse_shape("[2, 3, 4]", "--shape"), (Shape{2, 3, 4}));
  EXPECT_EQ(parse_shape(" (5,) ", "--shape"), (Shape{5}));
  EXPECT_EQ(parse_shape("7", "--shape"), (Shape{7}));
  EXPECT_EQ(parse_shape("0, 3", "--shape"), (Shape{0, 3}));
  EXPECT_EQ(parse_shape("", "--shape"), Shape{});
  EXPECT_EQ(parse_shape("[]", "--shape"), Shape{});
  EXPECT_EQ(parse_shape("()", "--shape"), Shape{});
  for (const char* bad : {"2,,3", "-1", "2x3", "[2, 3", "2, 3]", "(2]", "a", "2 3", "99999999999999999999",
                          "4294967296,4294967296,4294967296", ","}) {
    SCOPED_TRACE(bad);
    expect_error([&] { parse_shape(bad, "--shape"); },
                 {"--shape: shape: expected non-negative integers like 2,3,4 or [2, 3, 4]",
                  std::string("got '") + bad + "'"});
  }
}

TEST(LoadTensor, DetectsTheFormatByContent) {
  test::TmpDir tmp;
  Tensor a = test::random_tensor(DType::float32, {2, 3}, 1);
  Tensor b = test::random_tensor(DType::bfloat16, {4}, 2);
  // Suffixes are deliberately misleading: the content decides.
  write_npy(tmp.path("a.bin"), a);
  write_safetensors(tmp.path("one.npy"), {{"w", b}});
  write_safetensors(tmp.path("two.safetensors"), {{"w", b}, {"x:y", a}});
  test::write_bytes(tmp.path("raw.safetensors"), std::string(a.bytes.begin(), a.bytes.end()));

  Tensor r = load_tensor(tmp.path("a.bin"));
  EXPECT_EQ(r.dtype, DType::float32);
  EXPECT_EQ(test::bytes_of(r), test::bytes_of(a));
  Tensor s = load_tensor(tmp.path("one.npy"));
  EXPECT_EQ(s.dtype, DType::bfloat16);
  EXPECT_EQ(s.origin, tmp.path("one.npy") + ":w");
  EXPECT_EQ(test::bytes_of(load_tensor(tmp.path("two.safetensors") + ":w")), test::bytes_of(b));
  // A tensor name may contain ':' (the split is at a ':' whose prefix is a file).
  EXPECT_EQ(test::bytes_of(load_tensor(tmp.path("two.safetensors") + ":x:y")), test::bytes_of(a));
  expect_error([&] { load_tensor(tmp.path("two.safetensors")); },
               {tmp.path("two.safetensors") +
                ": tensor name: expected FILE:NAME to select one of its 2 tensors (w, x:y)"});
  expect_error([&] { load_tensor(tmp.path("two.safetensors") + ":q"); }, {"tensor name", "got 'q'"});
  expect_error([&] { load_tensor(tmp.path("a.bin") + ":w"); },
               {tmp.path("a.bin") +
                ": format: expected a .safetensors file (to select tensor 'w'), got an .npy file"});

  Tensor raw = load_tensor(tmp.path("raw.safetensors"), {DType::float32, Shape{3, 2}});
  EXPECT_EQ(raw.shape, (Shape{3, 2}));
  EXPECT_EQ(test::bytes_of(raw), test::bytes_of(a));
  expect_error(
      [&] {
        load_tensor(tmp.path("raw.safetensors"), {DType::float32, Shape{7}});
      },
      {tmp.path("raw.safetensors") +
       ": size: expected 28 bytes (7 elements of float32 with shape [7]), got 24 bytes"});
  expect_error(
      [&] {
        load_tensor(tmp.path("raw.safetensors"), {DType::float32, std::nullopt});
      },
      {tmp.path("raw.safetensors") +
           ": format: expected an .npy or .safetensors file, or a dtype and a shape",
       "got a file of 24 bytes"});
  expect_error([&] { load_tensor(tmp.path("missing.npy")); }, {"missing.npy", "open: expected a readable file"});
}

TEST(LoadTensor, PathsWithColonsAndHints) {
  test::TmpDir tmp;
  std::filesystem::create_directories(tmp.path("d:1"));
  Tensor b = test::random_tensor(DType::bfloat16, {4}, 2);
  write_npy(tmp.path("d:1/b.npy"), b);
  EXPECT_EQ(load_tensor(tmp.path("d:1/b.npy"), {DType::bfloat16, std::nullopt}).dtype, DType::bfloat16);
  expect_error([&] { load_tensor(tmp.path("d:1/b.npy")); }, {"d:1/b.npy: descr", "pass --dtype"});
  // The given shape and dtype must agree with the file's own.
  expect_error(
      [&] {
        load_tensor(tmp.path("d:1/b.npy"), {DType::bfloat16, Shape{2, 2}});
      },
      {"b.npy: shape: expected [2, 2] (the shape given), got [4] in the file"});
  write_safetensors(tmp.path("s"), {{"w", b}});
  expect_error(
      [&] {
        load_tensor(tmp.path("s"), {DType::float16, std::nullopt});
      },
      {"s:w: dtype: expected float16 (the dtype given), got bfloat16 in the file"});
  // Raw bytes that happen to start like a safetensors header are read as raw when a matching layout is given.
  test::write_bytes(tmp.path("r.bin"), std::string("\x01\0\0\0\0\0\0\0{abc", 12));
  EXPECT_EQ(load_tensor(tmp.path("r.bin"), {DType::int8, Shape{12}}).bytes[8], '{');
  expect_error([&] { load_tensor(tmp.path("r.bin")); }, {"r.bin: header: expected a JSON object"});
  expect_error([&] { load_tensor(tmp.path("r.bin"), {DType::int8, Shape{11}}); }, {"r.bin: header"});
  // 4-bit raw files are packed (two per byte).
  test::write_bytes(tmp.path("q.bin"), std::string("\x21\x03", 2));
  Tensor q = load_tensor(tmp.path("q.bin"), {DType::int4, Shape{3}});
  EXPECT_EQ(q.bytes.size(), 2u);
}

}  // namespace
}  // namespace kc
