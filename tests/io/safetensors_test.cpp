#include "io/safetensors.h"

#include <gtest/gtest.h>

#include "io_test_util.h"

namespace kc {
namespace {

using test::expect_error;

// A safetensors image: u64 length, the header text as given, then the data.
std::string st_image(const std::string& header, const std::string& data) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return s + header + data;
}

SafetensorsFile parse(const std::string& image) {
  auto buf = std::make_shared<std::string>(image);
  return SafetensorsFile::parse({reinterpret_cast<const std::uint8_t*>(buf->data()), buf->size()},
                                "m.safetensors", buf);
}

TEST(Safetensors, CodesMapBothWays) {
  for (DType d : test::all_dtypes()) {
    const char* code = safetensors_code(d);
    EXPECT_EQ(dtype_from_safetensors(code), d) << code;
  }
  // The stock codes (safetensors/src/tensor.rs Dtype).
  EXPECT_EQ(dtype_from_safetensors("BF16"), DType::bfloat16);
  EXPECT_EQ(dtype_from_safetensors("F8_E4M3"), DType::float8_e4m3fn);
  EXPECT_EQ(dtype_from_safetensors("F8_E8M0"), DType::float8_e8m0);
  EXPECT_EQ(dtype_from_safetensors("F4"), DType::float4_e2m1);
  EXPECT_EQ(dtype_from_safetensors("C64"), DType::complex64);
  EXPECT_EQ(dtype_from_safetensors("BOOL"), DType::boolean);
  EXPECT_EQ(dtype_from_safetensors("F6_E2M3"), std::nullopt);
  EXPECT_EQ(dtype_from_safetensors("f32"), std::nullopt);
  // Our extensions carry the X_ prefix so stock loaders refuse them.
  for (DType d : {DType::hifloat8, DType::hifloat32, DType::int4, DType::complex32, DType::complex128})
    EXPECT_EQ(std::string(safetensors_code(d)).substr(0, 2), "X_");
}

TEST(Safetensors, RoundTripEveryDtype) {
  test::TmpDir tmp;
  std::vector<NamedTensor> ts;
  std::uint32_t seed = 7;
  for (DType d : test::all_dtypes()) {
    // F4 needs an even count; others get odd shapes to break alignment of what follows.
    const std::vector<std::int64_t> shape =
        d == DType::float4_e2m1 ? std::vector<std::int64_t>{2, 3} : std::vector<std::int64_t>{3, 1, 3};
    ts.push_back({std::string("t_") + dtype_name(d), test::random_tensor(d, shape, seed++)});
  }
  ts.push_back({"scalar", test::random_tensor(DType::float32, {}, 1)});
  ts.push_back({"empty", test::random_tensor(DType::bfloat16, {0, 4}, 1)});
  ts.push_back({"odd_int4", test::random_tensor(DType::int4, {5}, 1)});
  const std::map<std::string, std::string> meta = {{"format", "kerncheck"}, {"note", "ünïcode"}};
  const std::string path = tmp.path("all.safetensors");
  write_safetensors(path, ts, meta);

  auto st = SafetensorsFile::open(path);
  ASSERT_EQ(st.names().size(), ts.size());
  EXPECT_EQ(st.metadata(), meta);
  std::size_t data_bytes = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(st.names()[i], ts[i].name);  // file order = given order
    Tensor r = st.tensor(ts[i].name);
    EXPECT_EQ(r.dtype, ts[i].tensor.dtype) << ts[i].name;
    EXPECT_EQ(r.shape, ts[i].tensor.shape) << ts[i].name;
    EXPECT_EQ(test::bytes_of(r), test::bytes_of(ts[i].tensor)) << ts[i].name;
    EXPECT_EQ(r.origin, path + ":" + ts[i].name);
    data_bytes += r.bytes.size();
  }
  // Layout the stock loader demands: data start 8-aligned, contiguous, file ends where data ends.
  const std::string f = test::read_bytes(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(f[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(f.size(), 8 + n + data_bytes);
  EXPECT_EQ(f[8], '{');
  EXPECT_FALSE(st.contains("nope"));
  expect_error([&] { st.tensor("nope"); },
               {path + ": tensor name: expected one of t_float64, t_float32", "got 'nope'"});
}

TEST(Safetensors, WriterRefusesWhatStockLoadersCannotRead) {
  test::TmpDir tmp;
  const std::string p = tmp.path("w.safetensors");
  expect_error(
      [&] {
        write_safetensors(p, {{"a", test::random_tensor(DType::float4_e2m1, {3}, 1)}});
      },
      {"tensor 'a': shape: expected an even element count", "got 3 elements"});
  Tensor t = test::random_tensor(DType::float32, {2}, 1);
  expect_error([&] { write_safetensors(p, {{"a", t}, {"a", t}}); }, {"tensor name", "got 'a'"});
  expect_error([&] { write_safetensors(p, {{"__metadata__", t}}); }, {"tensor name"});
  expect_error([&] { write_safetensors(p, {{"", t}}); }, {"tensor name"});
  expect_error([&] { write_safetensors(p, {{"bad\xff", t}}); }, {"valid UTF-8"});
  EXPECT_FALSE(std::filesystem::exists(p));
}

const std::string kData16(16, '\x01');

// Issue 20: as strict as the stock loader (safetensors 0.8 refuses gaps, trailing bytes and anything but
// whitespace after the header JSON; tests/py/test_hostile_inputs.py checks the stock loader agrees).
TEST(Safetensors, AcceptsNullMetadataExtraFieldsAndHeaderSpaces) {
  auto st =
      parse(st_image(R"({"__metadata__":null,"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16],"x":1},)"
                     R"("a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}}   )" "\n\t",
                     kData16));
  EXPECT_EQ(st.names(), (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ(st.tensor("b").bytes.size(), 8u);
  EXPECT_TRUE(st.metadata().empty());
}

TEST(Safetensors, RefusesGapsTrailingBytesAndHeaderGarbage) {
  const std::string two = R"({"b":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},)"
                          R"("a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})";
  expect_error([&] { parse(st_image(two, kData16)); },
               {"m.safetensors: tensor 'b': data_offsets: expected to begin at 2", "got [8, 16]"});
  const std::string one = R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  expect_error([&] { parse(st_image(one, kData16 + "trailing")); },
               {"m.safetensors: file size: expected", "trailing bytes", "got"});
  expect_error([&] { parse(st_image(one + std::string("\0garbage", 8), kData16)); },
               {"m.safetensors: header: expected a JSON object followed by spaces only", "NUL byte at header offset"});
  expect_error([&] { parse(st_image(one + "xyz", kData16)); }, {"m.safetensors: header: expected a JSON object"});
}

TEST(Safetensors, MalformedFiles) {
  auto one = [](const std::string& entry) { return st_image(R"({"w":)" + entry + "}", kData16); };
  const std::pair<std::string, std::vector<std::string>> cases[] = {
      {"1234567", {"m.safetensors: header length: expected an 8-byte", "got a file of 7 bytes"}},
      {std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10),
       {"header length: expected at most 100000000 bytes"}},
      {std::string("\x10\x00\x00\x00\x00\x00\x00\x00{}", 10),
       {"header length: expected at most 2 bytes", "got 16"}},
      {st_image("{\"a\":", ""), {"m.safetensors: header: expected a JSON object, got invalid JSON"}},
      {st_image("[1]", ""), {"m.safetensors: header: expected a JSON object, got an array"}},
      {st_image(R"({"__metadata__":{"k":1}})", ""),
       {"m.safetensors: __metadata__.k: expected a string, got 1"}},
      {st_image(R"({"__metadata__":[]})", ""),
       {"m.safetensors: __metadata__: expected an object of strings"}},
      {one("3"), {"m.safetensors: tensor 'w': expected an object {dtype, shape, data_offsets}, got 3"}},
      {one(R"({"shape":[1],"data_offsets":[0,4]})"), {"tensor 'w': dtype: expected present, got missing"}},
      {one(R"({"dtype":"F6_E2M3","shape":[1],"data_offsets":[0,1]})"),
       {"tensor 'w': dtype: expected one of BOOL U8", "got 'F6_E2M3'"}},
      {one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"),
       {"tensor 'w': shape: expected a non-negative integer, got -1"}},
      {one(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), {"tensor 'w': shape", "got 1.5"}},
      {one(R"({"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]})"),
       {"dimensions below 2^63"}},
      {one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
       {"tensor 'w': shape: expected a shape whose byte size fits in 64 bits"}},
      {one(R"({"dtype":"F32","shape":[8],"data_offsets":[0,32]})"),
       {"m.safetensors: tensor 'w': data_offsets: expected 0 <= begin <= end <= 16 (the size of the data "
        "region), "
        "got [0, 32]"}},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), {"data_offsets", "got [8, 4]"}},
      {one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"),
       {"tensor 'w': data_offsets: expected end - begin = 12 bytes (3 F32 elements, shape [3]), got [0, 8], "
        "8 bytes"}},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"),
       {"data_offsets: expected [begin, end], got [0]"}},
      {one(R"({"dtype":"F32","shape":[1],"data_offsets":[0,"4"]})"),
       {"data_offsets: expected a non-negative"}},
      {one(R"({"dtype":"F32","shape":[1],"dtype":"F32","data_offsets":[0,4]})"),
       {"header: expected unique keys", "key 'dtype' twice"}},
      {st_image(
           R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"a":{}})",
           kData16),
       {"key 'a' twice"}},
      {st_image(
           R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
           kData16),
       {"m.safetensors: tensor 'b': data_offsets: expected no overlap with tensor 'a' [0, 8], got [6, 10]"}},
      {st_image(R"({"a":{"x":[[[[[[[[[[1]]]]]]]]]]}})", ""),
       {"header: expected JSON nested at most 8 levels"}},
  };
  for (const auto& [image, parts] : cases) {
    SCOPED_TRACE(image.substr(0, 120));
    try {
      parse(image);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

TEST(Safetensors, OpenNamesTheFile) {
  test::TmpDir tmp;
  expect_error([&] { SafetensorsFile::open(tmp.path("missing.safetensors")); },
               {"missing.safetensors", "open: expected a readable file"});
}

}  // namespace
}  // namespace kc
